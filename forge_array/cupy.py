"""Drop-in for existing CuPy scripts: ``import forge_array.cupy as cp``.

Change one line of a working CuPy script, ``import cupy as cp`` to
``import forge_array.cupy as cp``, and its reductions, scans and matrix-vector products run
on forge_array's kernels; everything else is CuPy's own object (``cp.ndarray``,
``cp.asarray``, ``cp.random``, ``cp.cuda``, ``cp.exp``... are forwarded unchanged). Arrays
in and out are ``cupy.ndarray``; signatures, dtype rules and error behaviour are CuPy's.

Overridden: ``sum``, ``prod``, ``max``/``amax``, ``min``/``amin``, ``mean``, ``var``,
``std``, ``argmax``, ``argmin``, ``any``, ``all``, ``cumsum``, ``cumprod``, ``nansum``,
``nanmax``, ``nanmin``, ``dot``, ``matmul``, ``vdot``, ``inner``. A call our kernels do not
cover (float16, complex orderings, an ``out=`` of another dtype or shape, matrix @ matrix,
a bad axis...) runs CuPy's own function with the same arguments.

For code one cannot edit, [`patch`][] makes the ``cupy`` module's functions and the
methods of ``cupy.ndarray`` (``x.sum()``, ``x.max(axis=0)``, ``x.cumsum()``...) use them for
the whole process; [`unpatch`][] restores CuPy exactly; [`patched`][] is the context
manager. See [the CuPy drop-in](cupy.md).

Without CuPy, importing this module raises ImportError; the logic lives in
`forge_array._dropin`, tested over NumPy in the simulator.

Examples:
    On a GPU:

    ```python
    import forge_array.cupy as cp
    x = cp.random.rand(10**6, 100, dtype=cp.float32)
    mu, sd = x.mean(axis=0), x.std(axis=0)      # methods: CuPy's, unless patched
    mu, sd = cp.mean(x, axis=0), cp.std(x, axis=0)   # forge_array kernels
    with cp.patched():
        mu = x.mean(axis=0)                      # forge_array kernels
    ```
"""

from __future__ import annotations

import contextlib as _contextlib

try:
    import cupy as _cupy
except ImportError as _exc:  # pragma: no cover - CI has no CuPy
    raise ImportError(
        "forge_array.cupy is a drop-in for CuPy scripts and needs CuPy (pip install "
        "cupy-cuda12x or cupy-cuda13x) and a CUDA GPU; use `import forge_array as xp` for "
        "the Array API namespace, which also runs on the CPU"
    ) from _exc

from ._dropin import FUNCTIONS, METHODS, DropIn  # noqa: F401  (METHODS re-exported)

#: the engine: functions over cupy, fallbacks captured now (before any patch)
_impl = DropIn(_cupy)

sum = _impl.sum
prod = _impl.prod
amax = _impl.amax
max = _impl.max
amin = _impl.amin
min = _impl.min
mean = _impl.mean
var = _impl.var
std = _impl.std
argmax = _impl.argmax
argmin = _impl.argmin
any = _impl.any
all = _impl.all
cumsum = _impl.cumsum
cumprod = _impl.cumprod
nansum = _impl.nansum
nanmax = _impl.nanmax
nanmin = _impl.nanmin
dot = _impl.dot
matmul = _impl.matmul
vdot = _impl.vdot
inner = _impl.inner

_OWN = frozenset(FUNCTIONS) | {"patch", "unpatch", "patched", "is_patched", "stats",
                               "reset_stats", "FUNCTIONS", "METHODS"}


def patch(methods=True):
    """Make ``cupy.sum``, ``cupy.cumsum``, ... (every name of ``FUNCTIONS``) and, with
    ``methods``, ``cupy.ndarray.sum``, ``.max``, ``.cumsum``, ... (``METHODS``) run on
    forge_array's kernels for the whole process. Idempotent. Returns what was replaced:
    ``{"functions": [...], "methods": [...], "failed": {method: reason}}`` (a method is
    left as CuPy's when ``cupy.ndarray`` cannot take it).

    Examples:
        >>> import cupy, forge_array.cupy as fcp           # doctest: +SKIP
        >>> _ = fcp.patch(); cupy.sum is fcp.sum            # doctest: +SKIP
        True
        >>> fcp.unpatch()                                   # doctest: +SKIP
    """
    return _impl.patch(_cupy, methods=methods)


def unpatch():
    """Undo [`patch`][]: the ``cupy`` functions and ``cupy.ndarray`` methods are CuPy's
    original objects again.

    Examples:
        >>> import cupy, forge_array.cupy as fcp           # doctest: +SKIP
        >>> _ = fcp.patch(); fcp.unpatch(); cupy.sum is fcp.sum   # doctest: +SKIP
        False
    """
    _impl.unpatch(_cupy)


def is_patched():
    """Whether [`patch`][] is in effect.

    Examples:
        >>> import forge_array.cupy as fcp                  # doctest: +SKIP
        >>> fcp.is_patched()                                # doctest: +SKIP
        False
    """
    return _impl.is_patched(_cupy)


@_contextlib.contextmanager
def patched(methods=True):
    """Context manager: [`patch`][] on entry, [`unpatch`][] on exit (unless it was
    patched already on entry, which it then leaves as it is). Yields patch()'s report.

    Examples:
        >>> import cupy, forge_array.cupy as fcp            # doctest: +SKIP
        >>> with fcp.patched():                             # doctest: +SKIP
        ...     total = cupy.arange(10).sum()               # forge_array's kernel
    """
    was = is_patched()
    report = patch(methods=methods)
    try:
        yield report
    finally:
        if not was:
            unpatch()


def stats():
    """How many calls ran on forge_array's kernels and how many fell back to CuPy, per
    function (``ndarray.<name>`` for methods): ``{"kernel": {...}, "fallback": {...}}``.

    Examples:
        >>> import forge_array.cupy as fcp                  # doctest: +SKIP
        >>> fcp.reset_stats(); _ = fcp.sum(fcp.ones(3)); fcp.stats()["kernel"]   # doctest: +SKIP
        {'sum': 1}
    """
    return {k: dict(v) for k, v in _impl.counts.items()}


def reset_stats():
    """Zero the counters of [`stats`][].

    Examples:
        >>> import forge_array.cupy as fcp                  # doctest: +SKIP
        >>> fcp.reset_stats()                               # doctest: +SKIP
    """
    _impl.reset_counts()


def __getattr__(name):
    """Everything not overridden is CuPy's own object.

    >>> import cupy, forge_array.cupy as fcp            # doctest: +SKIP
    >>> fcp.ndarray is cupy.ndarray and fcp.exp is cupy.exp   # doctest: +SKIP
    True
    """
    try:
        return getattr(_cupy, name)
    except AttributeError:
        raise AttributeError(f"module 'forge_array.cupy' has no attribute {name!r} (nor has "
                             "cupy)") from None


def __dir__():
    return sorted(set(dir(_cupy)) | _OWN)
