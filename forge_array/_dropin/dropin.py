"""The drop-in over one array module: :class:`DropIn` (CuPy's functions and ``ndarray``
methods on our primitives, each falling back to the function it replaces) and
:func:`namespace` (a module-like object of them over ``xp``); see the package's docstring.
"""

from __future__ import annotations

import functools

from ..primitives import scan as _scan
from ..primitives.reductions import argmax as _p_argmax
from ..primitives.reductions import argmin as _p_argmin
from ..runtime import originals
from ..runtime.originals import FUNCTIONS, METHODS, in_original
from .cores import Cores, _all_prim, _any_prim, _max_prim, _min_prim, _prod_prim, _sum_prim
from .rules import DECLINE

__all__ = ["DropIn", "FUNCTIONS", "METHODS", "namespace"]


# --------------------------------------------------------------------------- the drop-in


class DropIn(Cores):
    """CuPy-signature reductions, scans and products over array module ``xp`` on our
    kernels, each falling back to the function it replaces.

    ``xp``: the array module (``cupy``; ``numpy`` under the simulator). ``fallbacks``:
    name -> callable overriding the originals (default: the module's own functions as
    :func:`forge_array.runtime.originals.capture` recorded them, before any patch);
    ``method_fallbacks`` likewise for ``xp.ndarray``'s methods.
    Attributes: one function per name of :data:`FUNCTIONS`; ``methods``: name -> function
    taking the array first, for :data:`METHODS`; ``counts``: how many calls ran on our
    kernels (``"kernel"``) and how many fell back (``"fallback"``), per name.

    >>> import numpy as np
    >>> d = DropIn(np)
    >>> float(d.var(np.array([1.0, 2.0, 3.0, 4.0]), ddof=1))
    1.6666666666666667
    >>> d.methods["sum"](np.ones((2, 2)), axis=0).tolist()
    [2.0, 2.0]
    """

    def __init__(self, xp, fallbacks=None, method_fallbacks=None):
        self.xp = xp
        self.ndarray = xp.ndarray
        funcs, meths = originals.capture(xp)   # CuPy's own, recorded before any patch
        fb = dict(funcs)
        fb.update(fallbacks or {})
        fb = {n: originals.guarded(f) for n, f in fb.items()}
        mfb = dict(meths)
        mfb.update(method_fallbacks or {})
        mfb = {n: originals.guarded(f) for n, f in mfb.items()}
        self.fallbacks = fb
        self.method_fallbacks = mfb
        self.counts = {"kernel": {}, "fallback": {}}
        self._patched: dict = {}
        self._build()

    # ----------------------------------------------------------------- bookkeeping

    def _hit(self, which, name):
        c = self.counts[which]
        c[name] = c.get(name, 0) + 1

    def reset_counts(self):
        """Zero :attr:`counts`.

        >>> import numpy as np
        >>> d = DropIn(np); d.reset_counts(); d.counts
        {'kernel': {}, 'fallback': {}}
        """
        self.counts = {"kernel": {}, "fallback": {}}

        return DECLINE                          # matrix-matrix: cuBLAS

    # ----------------------------------------------------------------- public functions

    def _cores(self):
        """name -> the computing core of each reduction, scan and product: called with
        keyword arguments as CuPy's function takes them, it returns the result on our kernels
        or ``DECLINE`` (an argument it does not cover, any unknown keyword among them)."""
        me, DEC = self, DECLINE

        def core(fn):
            names = frozenset(fn.__code__.co_varnames[1:fn.__code__.co_argcount])

            def call(a, *args, **kw):
                for k in kw:
                    if k not in names:
                        return DEC
                return fn(a, *args, **kw)
            return call

        return {
            "sum": core(lambda a, axis=None, dtype=None, out=None, keepdims=False:
                        me._c_sum_prod(_sum_prim, a, axis, dtype, out, keepdims)),
            "prod": core(lambda a, axis=None, dtype=None, out=None, keepdims=False:
                         me._c_sum_prod(_prod_prim, a, axis, dtype, out, bool(keepdims))),
            "max": core(lambda a, axis=None, out=None, keepdims=False:
                        me._c_extremum(_max_prim, a, axis, out, keepdims)),
            "min": core(lambda a, axis=None, out=None, keepdims=False:
                        me._c_extremum(_min_prim, a, axis, out, keepdims)),
            "mean": core(lambda a, axis=None, dtype=None, out=None, keepdims=False:
                         me._c_mean(a, axis, dtype, out, keepdims)),
            "var": core(lambda a, axis=None, dtype=None, out=None, ddof=0, keepdims=False:
                        me._c_moments(a, axis, dtype, out, ddof, keepdims, False)),
            "std": core(lambda a, axis=None, dtype=None, out=None, ddof=0, keepdims=False:
                        me._c_moments(a, axis, dtype, out, ddof, keepdims, True)),
            "argmax": core(lambda a, axis=None, dtype=None, out=None, keepdims=False:
                           me._c_arg(_p_argmax, a, axis, dtype, out, keepdims)),
            "argmin": core(lambda a, axis=None, dtype=None, out=None, keepdims=False:
                           me._c_arg(_p_argmin, a, axis, dtype, out, keepdims)),
            "any": core(lambda a, axis=None, out=None, keepdims=False:
                        me._c_logical(_any_prim, a, axis, out, keepdims)),
            "all": core(lambda a, axis=None, out=None, keepdims=False:
                        me._c_logical(_all_prim, a, axis, out, keepdims)),
            "cumsum": core(lambda a, axis=None, dtype=None, out=None:
                           me._c_scan(_scan.cumulative_sum, a, axis, dtype, out)),
            "cumprod": core(lambda a, axis=None, dtype=None, out=None:
                            me._c_scan(_scan.cumulative_prod, a, axis, dtype, out)),
            "nansum": core(lambda a, axis=None, dtype=None, out=None, keepdims=False:
                           me._c_nansum(a, axis, dtype, out, keepdims)),
            "nanmax": core(lambda a, axis=None, out=None, keepdims=False:
                           me._c_nanext(a, axis, out, keepdims, True)),
            "nanmin": core(lambda a, axis=None, out=None, keepdims=False:
                           me._c_nanext(a, axis, out, keepdims, False)),
            "dot": core(lambda a, b, out=None: me._c_product(a, b, out, "dot")),
            "matmul": core(lambda a, b, out=None: me._c_product(a, b, out, "matmul")),
            "inner": core(lambda a, b: me._c_product(a, b, None, "inner")),
        }

    def _build(self):
        cores = self._cores()
        self.functions = self._build_functions(cores)
        self.methods = self._build_methods(cores)

    def _build_functions(self, cores):
        """The drop-in functions (CuPy's signatures): each runs its core and falls back to the
        function it replaces where the core declines."""
        me = self
        fb = self.fallbacks

        def run(name, r, fallback, *args, **kwargs):
            if r is DECLINE:
                me._hit("fallback", name)
                return fallback(*args, **kwargs)
            me._hit("kernel", name)
            return r

        funcs = _reduction_functions(cores, fb, run)
        funcs.update(_product_functions(me, cores, fb, run))
        direct = dict(fb, argmax=_arg_fallback(fb["argmax"]), argmin=_arg_fallback(fb["argmin"]))
        entries = {}
        for name, f in list(funcs.items()):
            if f not in entries:
                entries[f] = _entry(f, direct[name])
            funcs[name] = entries[f]
        for name, f in funcs.items():
            if name not in ("max", "min"):
                f.__qualname__ = f.__name__ = name
            orig = fb.get(name)
            doc = f.__doc__ or ""
            if orig is not None and orig.__doc__:
                doc += ("\n\n    Runs on forge_array's kernels where they apply, else on the "
                        "original; its documentation follows.\n\n    " + orig.__doc__)
            f.__doc__ = doc
            setattr(self, name, f)
        return funcs

    def _build_methods(self, cores):
        """``ndarray`` methods (CuPy's signatures) on the same cores; a method falls back to
        the unpatched method, and stays in it when called from CuPy's own code."""
        me = self
        mfb = self.method_fallbacks
        DEC = DECLINE

        def m(name, core, call):
            orig = mfb.get(name)

            def method(self, *args, **kwargs):
                if in_original():           # inside CuPy's own code: stay there
                    return call(orig, self, *args, **kwargs)
                r = core(self, *args, **kwargs)
                if r is DEC:
                    me._hit("fallback", "ndarray." + name)
                    return call(orig, self, *args, **kwargs)
                me._hit("kernel", "ndarray." + name)
                return r

            method.__name__ = method.__qualname__ = name
            method.__doc__ = (f"``ndarray.{name}`` on forge_array's kernels where they apply "
                              f"(see forge_array.cupy).\n\n" + (getattr(orig, "__doc__", "") or ""))
            return method

        def plain(orig, self, *args, **kwargs):
            return orig(self, *args, **kwargs)

        def arg_call(orig, self, axis=None, out=None, dtype=None, keepdims=False):
            kw = {"dtype": dtype} if dtype is not None else {}
            return orig(self, axis=axis, out=out, keepdims=keepdims, **kw)

        def prod_call(orig, self, axis=None, dtype=None, out=None, keepdims=None):
            return orig(self, axis=axis, dtype=dtype, out=out, keepdims=bool(keepdims))

        def arg_core(core):     # ndarray.argmax(axis, out, dtype, keepdims): out before dtype
            def call(a, axis=None, out=None, dtype=None, keepdims=False, **kw):
                return core(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)
            return call

        def positional(core, params):   # the method's positional arguments as keywords
            def call(a, *args, **kw):
                if len(args) > len(params):
                    return DEC
                return core(a, **dict(zip(params, args)), **kw)
            return call

        order = {"sum": ("axis", "dtype", "out", "keepdims"), "prod": ("axis", "dtype", "out", "keepdims"),
                 "max": ("axis", "out", "keepdims"), "min": ("axis", "out", "keepdims"),
                 "mean": ("axis", "dtype", "out", "keepdims"), "var": ("axis", "dtype", "out", "ddof", "keepdims"),
                 "std": ("axis", "dtype", "out", "ddof", "keepdims"), "any": ("axis", "out", "keepdims"),
                 "all": ("axis", "out", "keepdims"), "cumsum": ("axis", "dtype", "out"),
                 "cumprod": ("axis", "dtype", "out"), "dot": ("b", "out")}
        calls = {"argmax": arg_call, "argmin": arg_call, "prod": prod_call}
        method_cores = {name: positional(cores[name], params) for name, params in order.items()}
        method_cores["argmax"] = arg_core(cores["argmax"])
        method_cores["argmin"] = arg_core(cores["argmin"])
        return {name: m(name, core, calls.get(name, plain))
                for name, core in method_cores.items() if name in mfb}

    # ----------------------------------------------------------------- patching

    def patch(self, module, methods=True):
        """Replace the functions of ``module`` (e.g. ``cupy``) named in :data:`FUNCTIONS`
        by this drop-in's, and -- with ``methods`` -- the methods of ``module.ndarray``
        named in :data:`METHODS`. Idempotent. Returns ``{"functions": [...], "methods":
        [...], "failed": {name: reason}}``: a method of a type that cannot be changed
        (a C / Cython extension type) is left as it is and reported in ``failed``.

        >>> import numpy as np, types
        >>> fake = types.ModuleType("fake"); fake.sum = np.sum; fake.ndarray = np.ndarray
        >>> d = DropIn(np)
        >>> rep = d.patch(fake)
        >>> fake.sum is d.sum, sorted(rep["failed"])[:1]      # numpy.ndarray is immutable
        (True, ['all'])
        >>> d.unpatch(fake); fake.sum is np.sum
        True
        """
        originals.capture(module)        # what every fallback calls, recorded first
        saved = self._patched.setdefault(id(module), {"module": module, "functions": {},
                                                      "methods": {}})
        done = {"functions": [], "methods": [], "failed": {}}
        for name in FUNCTIONS:
            if not hasattr(module, name):
                continue
            if name not in saved["functions"]:
                saved["functions"][name] = getattr(module, name)
            setattr(module, name, self.functions[name])
            done["functions"].append(name)
        if methods:
            cls = getattr(module, "ndarray", None)
            for name, meth in self.methods.items():
                if cls is None:
                    break
                before = cls.__dict__.get(name, _MISSING)
                try:
                    setattr(cls, name, meth)
                except (TypeError, AttributeError) as exc:
                    done["failed"][name] = f"{type(exc).__name__}: {exc}"
                    continue
                if name not in saved["methods"]:
                    saved["methods"][name] = before
                done["methods"].append(name)
        return done

    def unpatch(self, module):
        """Put back what :meth:`patch` replaced in ``module`` (exactly the original
        objects; a method that the class did not define itself is deleted again, so the
        inherited one shows through). No-op when not patched.

        >>> import numpy as np, types
        >>> fake = types.ModuleType("fake"); fake.cumsum = np.cumsum; fake.ndarray = np.ndarray
        >>> d = DropIn(np); _ = d.patch(fake); d.unpatch(fake); fake.cumsum is np.cumsum
        True
        """
        saved = self._patched.pop(id(module), None)
        if saved is None:
            return
        for name, f in saved["functions"].items():
            setattr(module, name, f)
        cls = getattr(module, "ndarray", None)
        for name, before in saved["methods"].items():
            if before is _MISSING:
                try:
                    delattr(cls, name)
                except AttributeError:
                    pass
            else:
                setattr(cls, name, before)

    def is_patched(self, module):
        """Whether :meth:`patch` is in effect on ``module``.

        >>> import numpy as np, types
        >>> DropIn(np).is_patched(types.ModuleType("m"))
        False
        """
        return id(module) in self._patched


_MISSING = object()



def _arg_fallback(f):
    """CuPy's ``argmax`` / ``argmin`` called with the drop-in's signature (its ``dtype``
    passed on only when given)."""
    def call(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
        if dtype is not None:
            kw["dtype"] = dtype
        return f(a, axis=axis, out=out, keepdims=keepdims, **kw)
    return call


# The drop-in functions by CuPy signature: each runs core ``c[key]`` and, where it declines,
# the function it replaces (``run``: the drop-in's hit counting and fallback).

def _reduction_with_dtype(key, c, fallback, run, doc):
    def f(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return run(key, c[key](a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw), fallback,
                   a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)
    f.__doc__ = doc
    return f


def _reduction_without_dtype(key, c, fallback, run, doc):
    def f(a, axis=None, out=None, keepdims=False, **kw):
        return run(key, c[key](a, axis=axis, out=out, keepdims=keepdims, **kw), fallback,
                   a, axis=axis, out=out, keepdims=keepdims, **kw)
    f.__doc__ = doc
    return f


def _moment_reduction(key, c, fallback, run, doc):
    def f(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        return run(key, c[key](a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw),
                   fallback, a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw)
    f.__doc__ = doc
    return f


def _cumulative_scan(key, c, fallback, run, doc):
    def f(a, axis=None, dtype=None, out=None, **kw):
        return run(key, c[key](a, axis=axis, dtype=dtype, out=out, **kw), fallback,
                   a, axis=axis, dtype=dtype, out=out, **kw)
    f.__doc__ = doc
    return f


#: name -> (signature family, core, fallback, docstring) of the reductions and scans
_REDUCTIONS = {
    "sum": (_reduction_with_dtype, "sum", "sum",
            "Sum over ``axis`` (CuPy's ``sum``): int64 / uint64 for bool and narrower\n"
            "    integers unless ``dtype`` is given."),
    "prod": (_reduction_with_dtype, "prod", "prod",
             "Product over ``axis`` (CuPy's ``prod``), with ``sum``'s dtype rules."),
    "amax": (_reduction_without_dtype, "max", "amax",
             "Maximum over ``axis`` (CuPy's ``amax`` / ``max``); NaN propagates."),
    "amin": (_reduction_without_dtype, "min", "amin",
             "Minimum over ``axis`` (CuPy's ``amin`` / ``min``); NaN propagates."),
    "mean": (_reduction_with_dtype, "mean", "mean", "Arithmetic mean over ``axis`` (float64 for integers)."),
    "var": (_moment_reduction, "var", "var", "Variance over ``axis`` with ``ddof``, in one pass (Welford / Chan)."),
    "std": (_moment_reduction, "std", "std", "Standard deviation over ``axis`` with ``ddof``, in one pass."),
    "argmax": (_reduction_with_dtype, "argmax", None,
               "Index of the first maximum along ``axis`` (flat index for ``axis=None``)."),
    "argmin": (_reduction_with_dtype, "argmin", None,
               "Index of the first minimum along ``axis`` (flat index for ``axis=None``)."),
    "any": (_reduction_without_dtype, "any", "any", "Whether any element over ``axis`` is nonzero."),
    "all": (_reduction_without_dtype, "all", "all", "Whether every element over ``axis`` is nonzero."),
    "cumsum": (_cumulative_scan, "cumsum", "cumsum",
               "Cumulative sum along ``axis`` (of the flattened array for ``axis=None``)."),
    "cumprod": (_cumulative_scan, "cumprod", "cumprod",
                "Cumulative product along ``axis`` (of the flattened array for ``axis=None``)."),
    "nansum": (_reduction_with_dtype, "nansum", "nansum", "Sum over ``axis`` counting NaN as zero."),
    "nanmax": (_reduction_without_dtype, "nanmax", "nanmax",
               "Maximum over ``axis`` ignoring NaN (NaN and a RuntimeWarning for all-NaN\n    slices)."),
    "nanmin": (_reduction_without_dtype, "nanmin", "nanmin", "Minimum over ``axis`` ignoring NaN."),
}


def _reduction_functions(c, fb, run) -> dict:
    """The drop-in reductions and scans (``max`` / ``min``: ``amax`` / ``amin``)."""
    funcs = {}
    for name, (family, key, fallback, doc) in _REDUCTIONS.items():
        fallback = fb[fallback] if fallback else _arg_fallback(fb[name])
        funcs[name] = family(key, c, fallback, run, doc)
    funcs["max"], funcs["min"] = funcs["amax"], funcs["amin"]
    return funcs


def _product_functions(me, c, fb, run) -> dict:
    """The drop-in products: ``dot``, ``matmul``, ``vdot``, ``inner``."""
    def dot(a, b, out=None, **kw):
        """Dot product; matrix-vector, vector-matrix and vector-vector on our kernels."""
        return run("dot", c["dot"](a, b, out=out, **kw), fb["dot"], a, b, out=out, **kw)

    def matmul(a, b, out=None, **kwargs):
        """``a @ b``; matrix (or batch) times vector and vector times matrix on our
        kernels."""
        return run("matmul", c["matmul"](a, b, out=out, **kwargs), fb["matmul"], a, b, out=out, **kwargs)

    def vdot(a, b, **kw):
        """Dot product of the flattened arrays (real dtypes on our kernels)."""
        r = DECLINE
        if (not kw and me._mine(a) and me._mine(b) and a.size == b.size and a.ndim and b.ndim):
            r = me._c_product(a.reshape(-1), b.reshape(-1), None, "dot")
        return run("vdot", r, fb["vdot"], a, b, **kw)

    def inner(a, b, **kw):
        """Inner product over the last axes."""
        return run("inner", c["inner"](a, b, **kw), fb["inner"], a, b, **kw)

    return {"dot": dot, "matmul": matmul, "vdot": vdot, "inner": inner}


def _entry(f, original):
    """``f``, except inside an original's call (:func:`forge_array.runtime.originals.in_original`),
    where ``original`` runs instead: CuPy's own functions call ``ndarray`` methods and other
    functions that may be patched."""

    @functools.wraps(f)
    def entry(*args, **kwargs):
        if in_original():
            return original(*args, **kwargs)
        return f(*args, **kwargs)

    return entry


class _Namespace:
    """``xp``'s namespace with a :class:`DropIn`'s functions in front (see
    :func:`namespace`)."""

    def __init__(self, xp, dropin):
        self.__dict__.update(dropin.functions)
        self.__dict__["_xp"] = xp
        self.__dict__["dropin"] = dropin

    def __getattr__(self, name):
        return getattr(self.__dict__["_xp"], name)

    def __dir__(self):
        return sorted(set(dir(self._xp)) | set(self.__dict__))

    def __repr__(self):
        return f"<forge_array drop-in over {getattr(self._xp, '__name__', self._xp)!r}>"


def namespace(xp, dropin=None):
    """A module-like object: ``xp``'s whole namespace, with the functions of
    :data:`FUNCTIONS` replaced by a :class:`DropIn`'s (``forge_array.cupy`` is this over
    ``cupy``; over ``numpy`` it runs the same code in the simulator, e.g. for
    ``bench/cupy_workload.py --dry-run``).

    >>> import numpy as np
    >>> fnp = namespace(np)
    >>> fnp.arange is np.arange, int(fnp.sum(np.arange(4, dtype=np.int8)))
    (True, 6)
    """
    return _Namespace(xp, dropin if dropin is not None else DropIn(xp))
