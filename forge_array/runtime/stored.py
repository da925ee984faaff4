"""Launches stored on disk: a fresh process's first calls run our kernels before numba loads.

A standard operation that ran on our kernels in one launch (a full reduction such as
``sum(x)``, ``mean(x)``, ``argmax(x)``; ``sum``, ``prod``, ``max``, ``min``, ``any`` or
``all`` along axes; ``cumulative_sum`` and ``cumulative_prod``; a matrix-vector product
``A @ v``) leaves a *stored launch*: the kernel file's key and entry point, the packed
parameter format, grid, block, and each parameter as a value, an operand's address, an
output's address, uninitialised scratch, the stream's zeroed counters, a constant, or a
part of a scan's tile state (the store keeps its own, see :mod:`.scan_state`).  The stored
launches of a process are written at its exit into one index file per *environment* (the
package's source files, the GPU's name, compute capability and SM count, CuPy's version and
the ``FORGE_ARRAY_*`` settings), so anything that could change a plan selects another file.

In a later process, a call that finds its operation and operand layouts (dtype, shape,
strides, 16-byte phase) in the index while the kernel layer is still loading
(:mod:`.background`) runs the stored launch: it loads the kernel file through CuPy and
launches it with ``cuLaunchKernel``, with neither numba nor the kernel modules imported.
Results are the same as the kernel layer's: the same kernel, the same parameters.

>>> key = full_key("sum", __import__("numpy").zeros(3, "float32"), None, False, None)
>>> key[0], key[1]
('full', 'sum')
"""

from __future__ import annotations

import atexit
import os
import struct
import threading
import warnings

import numpy as np

from . import backend, config, kernel_files, temp
from .caches import Cache
from .counters import STATS
from .memory import data_address
from .scan_state import TileState

__all__ = ["full_key", "axis_key", "reduction_key", "AXIS_NAMES", "SCAN_NAMES", "scan_key", "pair_key", "lookup",
           "prepare", "save", "drop", "flush", "MAX_ENTRIES"]

#: stored launches kept per environment (the newest when there are more)
MAX_ENTRIES = 4096

_FORMAT = 1
_LOCK = threading.Lock()
_ENV: dict = {}      # device id -> environment digest
_INDEX: dict = {}    # device id -> {key: description} read from disk
_NEW: dict = {}      # device id -> {key: description} to write at exit
_LIVE = Cache("runtime.stored.LIVE", MAX_ENTRIES)  # (device id, key) -> StoredLaunch, or None: not stored


def layout(a) -> tuple:
    """What a stored launch depends on of backend array ``a`` besides its address: dtype,
    shape, strides, 16-byte phase."""
    return (a.dtype.str, tuple(a.shape), tuple(a.strides), data_address(a) & 15)



def _dt(d):
    return None if d is None else np.dtype(d).str


def full_key(name, x, dtype, keepdims, extra) -> tuple:
    """The key of the full reduction ``name`` of backend array ``x`` with the primitive's
    ``dtype`` argument (None or a dtype), ``keepdims`` and ``extra`` (var / std's
    correction); the types of the arguments are part of it (1 and 1.0 are other keys)."""
    return ("full", name, layout(x), _dt(dtype), bool(keepdims),
            None if extra is None else (type(extra).__name__, repr(extra)))


def axis_key(name, x, axes, dtype, keepdims) -> tuple:
    """The key of the reduction ``name`` of backend array ``x`` along ``axes`` (a sorted
    tuple, not every axis) with the primitive's ``dtype`` argument and ``keepdims``."""
    return ("axis", name, tuple(axes), layout(x), _dt(dtype), bool(keepdims))


#: the reductions whose launches along some axes are stored (argmax / argmin: over all axes)
AXIS_NAMES = frozenset(("sum", "prod", "max", "min", "any", "all"))
#: the scans whose launches are stored (of one array, without out=, exclusive, reverse or
#: deterministic scans, as the cumulative functions call them)
SCAN_NAMES = frozenset(("cumulative_sum", "cumulative_prod"))


def reduction_key(name, x, axis, dtype=None, keepdims=False, extra=None):
    """The key of the named reduction ``name`` of backend array ``x`` over ``axis`` (None or
    a sorted tuple; argmax / argmin: None or an int) with the primitive's ``dtype``,
    ``keepdims`` and ``extra`` arguments, or None when such launches are not stored: the one
    rule of the primitives, which store launches, and the routing, which looks them up.

    >>> import numpy as np
    >>> x = np.zeros((2, 3), "float32")
    >>> reduction_key("sum", x, (0, 1))[0], reduction_key("max", x, (1,))[0], reduction_key("argmax", x, 1)
    ('full', 'axis', None)
    """
    if name == "argmax" or name == "argmin":
        return full_key(name, x, dtype, keepdims, extra) if axis is None else None
    if axis is None or len(axis) == x.ndim:
        return full_key(name, x, dtype, keepdims, extra)
    return axis_key(name, x, axis, dtype, keepdims) if name in AXIS_NAMES else None


def scan_key(name, x, axis, dtype, include_initial) -> tuple:
    """The key of the scan ``name`` (``cumulative_sum`` / ``cumulative_prod``) of backend
    array ``x`` along ``axis`` (a non-negative int) accumulated in ``dtype``."""
    return ("scan", name, layout(x), int(axis), _dt(dtype), bool(include_initial))


def pair_key(tag, a, b) -> tuple:
    """The key of the product ``tag`` (``"matmul"``) of backend arrays ``a`` and ``b``."""
    return (tag, layout(a), layout(b))


def _source_stamp() -> str:
    """Path, size and modification time of every source file of the package (a stat each:
    a content hash would cost more than the launch it serves; ``os.scandir`` hands the
    stats over with the listing, where ``glob`` costs about 20 ms on a GPU machine)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parts = []
    folders = [root]
    while folders:
        folder = folders.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if e.name != "__pycache__":
                    folders.append(e.path)
            elif e.name.endswith(".py"):
                try:
                    st = e.stat()
                except OSError:
                    continue
                parts.append(f"{os.path.relpath(e.path, root)}:{st.st_size}:{st.st_mtime_ns}")
    return "\n".join(sorted(parts))


_SOURCES: list = []


def environment(device: int) -> str:
    """The digest of what a stored launch of device ``device`` depends on besides its key."""
    env = _ENV.get(device)
    if env is None:
        import hashlib  # noqa: PLC0415

        if not _SOURCES:
            _SOURCES.append(_source_stamp())
        cp = backend.cupy()
        info = backend.device_info(device)
        settings = sorted((k, v) for k, v in os.environ.items()
                          if k.startswith("FORGE_ARRAY_") and k not in ("FORGE_ARRAY_CACHE_DIR",
                                                                        "FORGE_ARRAY_COMPILE"))
        h = hashlib.sha256(repr((_FORMAT, _SOURCES[0], info["name"], info["cc"], info["sm_count"],
                                 cp.__version__, settings)).encode())
        env = _ENV[device] = h.hexdigest()
    return env


def _index_path(env: str) -> str:
    return os.path.join(config.CACHE_DIR, "launches", env[:32] + ".json")


def _read_index(path: str) -> dict:
    """The stored launches of an index file; {} when it is missing or damaged (a damaged
    file is removed, and written anew at exit)."""
    import json  # noqa: PLC0415

    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data.get("format") == _FORMAT and isinstance(data.get("launches"), dict):
            return data["launches"]
    except OSError:
        return {}
    except (ValueError, UnicodeDecodeError, AttributeError):
        pass
    try:
        os.unlink(path)
    except OSError:
        pass
    return {}


def _index(device: int) -> dict:
    idx = _INDEX.get(device)
    if idx is None:
        idx = _INDEX[device] = _read_index(_index_path(environment(device)))
    return idx


def _current_device() -> int:
    return backend.cupy().cuda.runtime.getDevice()


def prepare(device=None) -> None:
    """Read the index of ``device`` (default: the current one) now, so that a first look-up
    finds it read (the routing's load of the kernel layer starts with this)."""
    with _LOCK:
        _index(_current_device() if device is None else device)


def save(key: tuple, description, device=None) -> None:
    """Store the launch ``description`` (see :class:`StoredLaunch`) of the call ``key`` on
    ``device`` (default: the current one); it is written to disk at exit (or by
    :func:`flush`).  A description of None (a launch with no stored form) stores nothing."""
    if description is None:
        return
    import json  # noqa: PLC0415

    dev = _current_device() if device is None else device
    k = repr(key)
    description = json.loads(json.dumps(description))   # as it reads back
    with _LOCK:
        if _index(dev).get(k) == description:
            return
        new = _NEW.setdefault(dev, {})
        new.pop(k, None)
        new[k] = description
        if len(new) > MAX_ENTRIES:   # a process of many layouts: only the newest are kept
            del new[next(iter(new))]


def flush() -> int:
    """Write the launches stored in this process into their index files (merged with what
    other processes wrote meanwhile, the newest :data:`MAX_ENTRIES` kept); returns how many
    were written."""
    if not any(_NEW.values()):
        return 0
    import json  # noqa: PLC0415

    written = 0
    with _LOCK:
        for dev, new in list(_NEW.items()):
            if not new:
                continue
            path = _index_path(environment(dev))
            merged = _read_index(path)
            merged.update(new)
            if len(merged) > MAX_ENTRIES:
                merged = dict(list(merged.items())[-MAX_ENTRIES:])
            kernel_files.write_atomic(path, json.dumps({"format": _FORMAT, "launches": merged}))
            _INDEX[dev] = merged
            written += len(new)
            new.clear()
    return written


atexit.register(flush)


def lookup(key: tuple, device=None):
    """The :class:`StoredLaunch` of the call ``key`` on ``device`` (default: the current
    one), or None."""
    dev = _current_device() if device is None else device
    ent = _LIVE.get((dev, key), False)
    if ent is False:
        with _LOCK:
            desc = _index(dev).get(repr(key))
        try:
            ent = None if desc is None else StoredLaunch(desc)
        except (KeyError, TypeError, ValueError, struct.error):   # a description of another shape
            ent = None
        _LIVE[(dev, key)] = ent
    return ent


def drop(key: tuple, exc: Exception, device=None) -> None:
    """Forget the stored launch of ``key`` in this process after it raised ``exc`` (warned
    about once per process); the caller takes its fallback."""
    dev = _current_device() if device is None else device
    _LIVE[(dev, key)] = None
    if not _DROPPED:
        _DROPPED.append(key)
        warnings.warn(f"forge_array: a stored launch failed ({exc}); its call runs on the fallback",
                      RuntimeWarning, stacklevel=3)


_DROPPED: list = []
_SCRATCH: dict = {}   # (device, stream, slot) -> uninitialised bytes


_KINDS = frozenset(("v", "in", "out", "uninit", "counter", "const", "state"))
_STATES = threading.local()


def _tile_state(dev, sptr, spec):
    """The store's own scan tile state of (device, stream, this thread) for ``spec`` = (packed,
    acc dtypes, slots, tiles, counter words), with room for its slots."""
    cache = getattr(_STATES, "states", None)
    if cache is None:
        cache = _STATES.states = {}
    packed, acc, slots, _, words = spec
    key = (dev, sptr, packed, acc, words)
    st = cache.get(key)
    if st is None:
        st = cache[key] = TileState(backend.cupy(), packed, acc, max(slots, 1024), words)
    elif st.slots < slots:
        st.grow(max(slots, 2 * st.slots))
    return st


def _state_value(st, what):
    kind = what[0]
    if kind == "status":
        return st.buffers()[0]
    if kind == "vals":
        return st.buffers()[1][what[1]]
    if kind == "counter":
        return st.buffers()[2]
    if kind == "base":
        return st.base
    if kind == "epoch":
        return st.epoch
    raise ValueError(f"unknown tile-state parameter {kind!r}")


def _uninit(dev, sptr, slot, nbytes, like):
    buf = _SCRATCH.get((dev, sptr, slot))
    if buf is None or buf.nbytes < nbytes:
        buf = _SCRATCH[(dev, sptr, slot)] = temp.empty(nbytes, "uint8", like)
    return buf


class StoredLaunch:
    """One stored launch, from its description: ``{"key", "entry"}`` of the kernel file,
    ``"fmt"`` (``struct`` format of the packed parameters), ``"grid"``, ``"block"``,
    ``"shared"``, ``"outs"`` (shape and dtype of each output), ``"reshape"`` (the result's
    final shape, or None) and ``"args"``, one per flat parameter: ``["v", value]``,
    ``["in", k]`` (operand k's address), ``["out", j]``, ``["uninit", slot, nbytes]`` or
    ``["counter", words, dtype]`` (the stream's zeroed counters, left zero by the kernel),
    ``["const", j]`` (constant j of ``"consts"``: dtype and hex bytes) or ``["state", ...]``
    (a part of the tile state ``"state"`` describes: packed words, value dtypes, slots,
    tiles, counter words; the store's state advances after each launch).
    Calling it with the operands returns the result (the first output)."""

    __slots__ = ("desc", "struct", "fns", "outs", "args", "grid", "block", "shared", "reshape",
                 "consts", "state", "_consts")

    def __init__(self, desc):
        self.desc = desc
        self.struct = struct.Struct(desc["fmt"])
        self.fns: dict = {}
        self.outs = [(tuple(s), str(d)) for s, d in desc["outs"]]
        self.args = [tuple(a) for a in desc["args"]]
        self.grid, self.block, self.shared = int(desc["grid"]), int(desc["block"]), int(desc["shared"])
        self.reshape = None if desc.get("reshape") is None else tuple(desc["reshape"])
        self.consts = [(str(d), bytes.fromhex(h)) for d, h in desc.get("consts") or ()]
        st = desc.get("state")
        self.state = None if st is None else (int(st["packed"]), tuple(str(d) for d in st["acc"]),
                                              int(st["slots"]), int(st["ntiles"]), int(st["counter_words"]))
        self._consts: dict = {}
        if len(self.args) != len(self.struct.unpack(bytes(self.struct.size))):
            raise ValueError("parameters and format differ")
        for a in self.args:
            if a[0] not in _KINDS:
                raise ValueError(f"unknown parameter kind {a[0]!r}")
            if a[0] == "state" and self.state is None:
                raise ValueError("a tile-state parameter without a tile state")

    def _handle(self, dev):
        """The function handle on device ``dev``; 0 where the kernel file is gone (then
        the caller takes its fallback, and the file is not looked for again)."""
        h = self.fns.get(dev)
        if h is None:
            fn = kernel_files.load_function(self.desc["key"], self.desc["entry"])
            h = self.fns[dev] = 0 if fn is None else kernel_files.function_handle(fn)
            if h and self.shared:
                kernel_files.allow_dynamic_shared(h, self.shared)
        return h

    def _const(self, dev, j):
        c = self._consts.get((dev, j))
        if c is None:
            d, raw = self.consts[j]
            c = self._consts[(dev, j)] = backend.cupy().asarray(np.frombuffer(raw, dtype=d))
        return c

    def __call__(self, ins):
        cp = backend.cupy()
        dev = cp.cuda.runtime.getDevice()
        handle = self._handle(dev)
        if not handle:
            return None
        sptr = cp.cuda.get_current_stream().ptr
        like = ins[0]
        outs = [cp.empty(s, d) for s, d in self.outs]
        st = None if self.state is None else _tile_state(dev, sptr, self.state)
        vals = []
        for a in self.args:
            kind = a[0]
            if kind == "v":
                vals.append(a[1])
            elif kind == "in":
                vals.append(ins[a[1]].data.ptr + (a[2] if len(a) > 2 else 0))
            elif kind == "out":
                vals.append(outs[a[1]].data.ptr + (a[2] if len(a) > 2 else 0))
            elif kind == "uninit":
                vals.append(_uninit(dev, sptr, a[1], a[2], like).data.ptr)
            elif kind == "counter":
                vals.append(temp.counters(a[1], like, a[2]).data.ptr)
            elif kind == "const":
                vals.append(self._const(dev, a[1]).data.ptr)
            else:   # "state"
                vals.append(_state_value(st, a[1:]))
        pb = kernel_files.param_buffer(self.struct.size)   # alive until the launch returns
        self.struct.pack_into(pb[0], 0, *vals)
        kernel_files.launch_packed(handle, self.grid, self.block, self.shared, sptr, pb[3], dev)
        if st is not None:
            st.advance(self.state[3])   # tickets taken from its counter
        STATS["launches"] += 1
        STATS["stored_launches"] += 1
        out = outs[0]
        return out if self.reshape is None else out.reshape(self.reshape)
