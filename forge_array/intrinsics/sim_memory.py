"""Simulated memory intrinsics: a weak memory model (acquire / relaxed loads may return older
values), release stores, atomics, element and 128-bit vector access.
"""

from __future__ import annotations

import random
import re
import threading

import numpy as np

from ..runtime.flags import FLAGS
from .sim_threads import VEC
from .sim_warp import _convert

# --------------------------------------------------------------------------- memory model


def _dtype_of(p):
    dt = getattr(p, "dtype", None)
    if dt is None:
        raise TypeError(f"expected a buffer, got {type(p).__name__}")
    return np.dtype(dt)


def _address(p, i) -> int:
    addr = getattr(p, "address", None)
    if addr is not None:
        return int(addr(int(i)))
    a = np.asarray(p)
    if a.ndim != 1:
        raise TypeError("expected a 1-D buffer")
    return int(a.__array_interface__["data"][0]) + int(i) * a.strides[0]


class _MemoryModel:
    """Per-address histories of values published by ``store_release`` and atomics."""

    def __init__(self):
        self.lock = threading.RLock()
        self.seed = FLAGS["sim_seed"].cell[0]
        self.stale = FLAGS["sim_stale"].cell[0]
        self.max_stale_run = 16
        self.rng = random.Random(self.seed)
        self.history = {}
        self.context = None

    def reset(self, seed=None, stale=None):
        """Forget all histories; optionally reseed and set the stale-read probability."""
        with self.lock:
            if seed is not None:
                self.seed = int(seed)
            if stale is not None:
                self.stale = float(stale)
            self.rng = random.Random(self.seed)
            self.history = {}

    def _check_launch(self):
        from numba.cuda.simulator import kernel as simkernel

        ctx = simkernel._get_kernel_context()
        if ctx is not self.context:  # a new launch: kernel boundaries make all visible
            self.context = ctx
            self.history = {}

    def _hist(self, p, i, create):
        key = _address(p, i)
        cur = p[i]
        h = self.history.get(key)
        if h is not None and not _same(h[-1], cur):
            h = None  # memory was written by other means: the history is stale
        if h is None:
            if not create:
                self.history.pop(key, None)
                return key, None, cur
            h = self.history[key] = [cur]
        return key, h, cur

    def publish(self, p, i, value):
        with self.lock:
            self._check_launch()
            _, h, _ = self._hist(p, i, True)
            p[i] = value
            h.append(p[i])

    def rmw(self, p, i, fn):
        with self.lock:
            self._check_launch()
            _, h, cur = self._hist(p, i, True)
            new = fn(cur)
            if new is not None:
                p[i] = new
                h.append(p[i])
            return cur

    def read(self, p, i):
        t = threading.current_thread()
        with self.lock:
            self._check_launch()
            key, h, cur = self._hist(p, i, False)
            if h is None or len(h) == 1:
                return cur
            seen = t.__dict__.setdefault("_forge_seen", {})
            s = seen.get(key)
            lo, run = (s[1], s[2]) if s is not None and s[0] is h else (0, 0)
            last = len(h) - 1
            if lo < last and run < self.max_stale_run and self.rng.random() < self.stale:
                k = self.rng.randrange(lo, last)
                run += 1
            else:
                k, run = last, 0
            seen[key] = (h, k, run)  # coherence: never read older than already observed
            return h[k]


def _same(a, b) -> bool:
    try:
        return bool(a == b) or (a != a and b != b)
    except Exception:
        return a is b


#: the simulator's memory model (``memory_model.reset(seed=..., stale=...)`` in tests)
memory_model = _MemoryModel()

_WORD_DTYPES = tuple(np.dtype(t) for t in ("int32", "uint32", "int64", "uint64"))


def _check_word(what, p, allow_float=True):
    dt = _dtype_of(p)
    ok = dt in _WORD_DTYPES or (allow_float and dt in (np.dtype("float32"), np.dtype("float64")))
    if not ok:
        raise TypeError(f"{what}: unsupported element type {dt} (int32, uint32, int64, uint64)")
    return dt


def load_acquire(p, i):
    """``p[i]`` with acquire semantics; may return an older published value (see module)."""
    _check_word("load_acquire", p)
    return memory_model.read(p, i)


def load_relaxed(p, i):
    """``p[i]`` with relaxed semantics; may return an older published value."""
    _check_word("load_relaxed", p)
    return memory_model.read(p, i)


def store_release(p, i, v):
    """``p[i] = v`` with release semantics (recorded in the address's history)."""
    dt = _check_word("store_release", p)
    memory_model.publish(p, i, _convert(v, dt))


def atomic_add(p, i, v):
    """Atomically ``p[i] += v`` (wrapping); returns the old value."""
    dt = _check_word("atomic_add", p, allow_float=False)
    return memory_model.rmw(p, i, lambda old: _convert(int(old) + int(v), dt))


def atomic_exch(p, i, v):
    """Atomically ``p[i] = v``; returns the old value."""
    dt = _check_word("atomic_exch", p, allow_float=False)
    return memory_model.rmw(p, i, lambda old: _convert(v, dt))


def atomic_cas(p, i, expected, new):
    """Atomically ``if p[i] == expected: p[i] = new``; returns the old value."""
    dt = _check_word("atomic_cas", p, allow_float=False)
    exp = _convert(expected, dt)
    return memory_model.rmw(p, i, lambda old: _convert(new, dt) if old == exp else None)


# --------------------------------------------------------------------------- load / store


def load(p, i):
    """``p[i]`` for a buffer, or the tuple of ``q[i]`` for a tuple of buffers."""
    if isinstance(p, tuple):
        return tuple(load(q, i) for q in p)
    return p[i]


def store(p, i, v):
    """``p[i] = v`` for a buffer, or member-wise for a tuple of buffers."""
    if isinstance(p, tuple):
        if not isinstance(v, tuple) or len(v) != len(p):
            raise TypeError(f"store: value {v!r} does not match a tuple of {len(p)} buffers")
        for q, x in zip(p, v):
            store(q, i, x)
        return
    p[i] = v


# --------------------------------------------------------------------------- 128-bit access


def _check_aligned(what, p, i):
    addr = _address(p, i)
    if addr % 16:
        raise ValueError(
            f"{what}: misaligned 128-bit access at element {int(i)} (address % 16 == "
            f"{addr % 16}); the address must be 16-byte aligned"
        )


def vload(p, i):
    """128-bit load: the tuple ``(p[i], ..., p[i + VEC - 1])``; ``p[i]`` must be 16-byte
    aligned (checked)."""
    _check_aligned("vload", p, i)
    n = VEC(_dtype_of(p))
    return tuple(p[i + k] for k in range(n))


def vstore(p, i, values):
    """128-bit store of the ``VEC`` values of a tuple at ``p[i], ...`` (16-byte aligned)."""
    _check_aligned("vstore", p, i)
    n = VEC(_dtype_of(p))
    if len(values) != n:
        raise TypeError(f"vstore: expected {n} values, got {len(values)}")
    for k in range(n):
        p[i + k] = values[k]


def vstore_shared(a, i, values):
    """:func:`vstore` into a block-shared array (``st.shared.v4`` on the GPU); the index must
    be a multiple of ``VEC`` (the kernels lay shared tiles out from a 16-byte boundary)."""
    n = VEC(_dtype_of(a))
    if (int(i) * (16 // n)) % 16:
        raise ValueError(f"vstore_shared: misaligned 128-bit access at element {int(i)}")
    if len(values) != n:
        raise TypeError(f"vstore_shared: expected {n} values, got {len(values)}")
    for k in range(n):
        a[i + k] = values[k]


def vload_shared(a, i):
    """:func:`vload` from a block-shared array (``ld.shared.v4`` on the GPU); the index must be
    a multiple of ``VEC``."""
    n = VEC(_dtype_of(a))
    if (int(i) * (16 // n)) % 16:
        raise ValueError(f"vload_shared: misaligned 128-bit access at element {int(i)}")
    return tuple(a[i + k] for k in range(n))


_HINT_RE = re.compile(r"(\.[A-Za-z0-9_:]+)*")


def _check_hint(hint):
    if not isinstance(hint, str) or not _HINT_RE.fullmatch(hint):
        raise ValueError(f"cache hint {hint!r}: expected PTX qualifiers such as '.nc.L2::256B' or ''")


def vload_hinted(hint: str):
    """:func:`vload` with a PTX cache hint (``ld.global<hint>.v4`` on the GPU); the simulator
    has no caches, so it is :func:`vload` itself.

    >>> vload_hinted(".nc") is vload
    True
    """
    _check_hint(hint)
    return vload


def vstore_hinted(hint: str):
    """:func:`vstore` with a PTX cache hint (``st.global<hint>.v4`` on the GPU); here
    :func:`vstore` itself.

    >>> vstore_hinted(".cs") is vstore
    True
    """
    _check_hint(hint)
    return vstore


