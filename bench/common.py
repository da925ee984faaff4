"""Builders shared by the suites: forge_array, CuPy, torch and cuda.compute.

A builder takes the case's inputs (CuPy arrays; NumPy arrays in a dry run), does the
setup (zero-copy wrapping, temporary storage), and returns the zero-argument callable
that the harness times. Libraries and attributes are looked up lazily so that a
missing one becomes a skipped or failed implementation with its message.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from typing import Any, Callable

import numpy as np

from .harness import Skip, import_optional

# ------------------------------------------------------------------------- sizes


class Sizes:
    """Size choices for a run: full GPU sizes, --quick, --sizes, or dry-run sizes.

    Suites write sizes as powers of ten at GPU scale; a dry run divides them by 10^4
    (at least 10) so the same code runs on NumPy in seconds.
    """

    def __init__(self, dry_run: bool, quick: bool, override: list[int] | None = None):
        self.dry_run = dry_run
        self.quick = quick
        self.override = override
        self.shift = 4 if dry_run else 0
        self.max_exp = 8 if quick else 9

    def n(self, exp: int) -> int | None:
        """10^exp at this run's scale, or None when the run leaves it out."""
        if exp > self.max_exp:
            return None
        return 10 ** max(exp - self.shift, 1)

    def sweep(self, lo: int = 3, hi: int = 9) -> list[int]:
        """Sizes of a size sweep: --sizes when given, else 10^lo .. 10^hi."""
        if self.override:
            return [n for n in self.override if n <= 10**self.max_exp]
        out = []
        for e in range(lo, hi + 1):
            n = self.n(e)
            if n is not None and n not in out:
                out.append(n)
        return out

    def shapes(self, total_exp: int) -> list[tuple[int, int]]:
        """(10^k, 10^(T-k)), k = 1..T-1, with T = total_exp at this run's scale."""
        if total_exp > self.max_exp:
            return []
        t = max(total_exp - self.shift, 2)
        return [(10**k, 10 ** (t - k)) for k in range(1, t)]

    def shape(self, rows_exp: int, cols_exp: int) -> tuple[int, int] | None:
        if rows_exp + cols_exp > self.max_exp:
            return None
        if self.shift:  # keep the aspect at 10^shift fewer elements
            t = max(rows_exp + cols_exp - self.shift, 2)
            r = min(max(round(rows_exp * t / (rows_exp + cols_exp)), 1), t - 1)
            return (10**r, 10 ** (t - r))
        return (10**rows_exp, 10**cols_exp)


# ---------------------------------------------------------------------- forge_array


def forge():
    """The forge_array namespace (raises ImportError, recorded as 'skipped')."""
    return importlib.import_module("forge_array")


def fa(call: Callable[..., Any]):
    """Builder: wrap every input with ``xp.asarray`` (zero copy), time ``call(xp, *args)``."""

    def builder(*inputs):
        xp = forge()
        args = [xp.asarray(a) for a in inputs]
        return lambda: call(xp, *args)

    return builder


def fa_out(call: Callable[..., Any]):
    """Builder: wrap every input with ``xp.asarray`` (zero copy), allocate an output like the
    first one outside the timed region, time ``call(xp, out, *args)``."""

    def builder(*inputs):
        xp = forge()
        args = [xp.asarray(a) for a in inputs]
        out = xp.empty_like(args[0])
        return lambda: call(xp, out, *args)

    return builder


def fa_raw(call: Callable[..., Any]):
    """Builder: time ``call(forge_array, *inputs)`` on the raw CuPy inputs."""

    def builder(*inputs):
        mod = forge()
        return lambda: call(mod, *inputs)

    return builder


# ----------------------------------------------------------------------------- cupy


def native(call: Callable[..., Any]):
    """Builder for the reference library (CuPy, or NumPy in a dry run)."""

    def builder(*inputs):
        return lambda: call(*inputs)

    return builder


# ---------------------------------------------------------------------------- torch


def torch_builder(ctx, call: Callable[..., Any]):
    """Builder: ``torch.as_tensor`` each input (zero copy), time ``call(torch, *tensors)``.

    All work runs on CuPy's current stream: the legacy default stream, which is torch's
    default stream too; otherwise inside ``torch.cuda.ExternalStream`` on CuPy's stream.
    """

    def builder(*inputs):
        torch = import_optional("torch")
        if ctx.dry_run:
            device = "cpu"
        else:
            if not torch.cuda.is_available():
                raise Skip("torch has no CUDA")
            device = "cuda"
        ts = [torch.as_tensor(a, device=device) for a in inputs]
        stream_ptr = 0 if ctx.dry_run else ctx.stream.ptr
        if stream_ptr:
            ext = torch.cuda.ExternalStream(stream_ptr)

            def fn():
                with torch.cuda.stream(ext):
                    return call(torch, *ts)

            return fn
        return lambda: call(torch, *ts)

    return builder


def torch_dtype(torch, dtype) -> Any:
    return getattr(torch, np.dtype(dtype).name)


# --------------------------------------------------------------------- cuda.compute


def _cuda_compute(ctx):
    if ctx.dry_run:
        raise Skip("cuda.compute needs a GPU")
    cc = import_optional("cuda.compute")
    if not getattr(cc, "_BINDINGS_AVAILABLE", True):
        raise Skip("cuda.compute: CUDA bindings not available")
    return cc


def _stream_arg(ctx):
    return None if ctx.stream.ptr == 0 else ctx.stream


def _op(cc, name: str):
    op_kind = getattr(cc, "OpKind", None)
    if op_kind is None:
        op_kind = importlib.import_module("cuda.compute.op").OpKind
    return getattr(op_kind, name)


def cc_reduce(ctx, op_name: str, out_dtype, init):
    """Builder: cuda.compute reduce_into over the whole (contiguous) input.

    The reducer object is built and its temporary storage allocated outside the timed
    region; the timed call is the reducer with that storage. cuda-cccl 1.0 takes
    keyword arguments only (and the op again at call time); 0.x took them positionally:
    both are tried.
    """

    def builder(x):
        cc = _cuda_compute(ctx)
        cp = ctx.xp
        d_in = x.ravel()
        if not d_in.flags.c_contiguous:
            raise Skip("cuda.compute takes contiguous arrays only")
        d_out = cp.empty(1, dtype=out_dtype)
        h_init = np.array([init], dtype=out_dtype)
        op = _op(cc, op_name)
        n = int(d_in.size)
        stream = _stream_arg(ctx)
        make = getattr(cc, "make_reduce_into")
        try:
            reducer = make(d_in=d_in, d_out=d_out, op=op, h_init=h_init)

            def call(tmp):
                return reducer(temp_storage=tmp, d_in=d_in, d_out=d_out, num_items=n, op=op,
                               h_init=h_init, stream=stream)
        except TypeError as exc:
            if "keyword" not in str(exc) and "positional" not in str(exc):
                raise
            reducer = make(d_in, d_out, op, h_init)

            def call(tmp):
                return reducer(tmp, d_in, d_out, n, h_init, stream)

        nbytes = call(None)
        tmp = cp.empty(max(int(nbytes), 1), dtype=np.uint8)

        def fn():
            call(tmp)
            return d_out

        return fn

    return builder


def cc_inclusive_scan(ctx, op_name: str = "PLUS", alloc: bool = False):
    """Builder: cuda.compute inclusive scan (no initial value) of a contiguous input.

    Built, and its temporary storage allocated, outside the timed region; keyword API of
    cuda-cccl 1.0 first, the positional one of 0.x (with a zero initial value) second.
    The output is allocated once outside the timed region too, unless ``alloc``: then each
    timed call scans into a fresh ``cupy.empty_like`` output and returns it, as a function
    that returns a new array (``cumulative_sum``, ``torch.cumsum``) must.
    """

    def builder(x):
        cc = _cuda_compute(ctx)
        cp = ctx.xp
        d_in = x.ravel()
        if not d_in.flags.c_contiguous:
            raise Skip("cuda.compute takes contiguous arrays only")
        d_out = cp.empty_like(d_in)
        op = _op(cc, op_name)
        n = int(d_in.size)
        stream = _stream_arg(ctx)
        make = getattr(cc, "make_inclusive_scan")
        try:
            scanner = make(d_in=d_in, d_out=d_out, op=op, init_value=None)

            def call(tmp, out=d_out):
                return scanner(temp_storage=tmp, d_in=d_in, d_out=out, op=op,
                               init_value=None, num_items=n, stream=stream)
        except TypeError as exc:
            if "keyword" not in str(exc) and "positional" not in str(exc):
                raise
            h0 = np.zeros(1, dtype=d_in.dtype)
            scanner = make(d_in, d_out, op, h0)

            def call(tmp, out=d_out):
                return scanner(tmp, d_in, out, n, h0, stream)

        nbytes = call(None)
        tmp = cp.empty(max(int(nbytes), 1), dtype=np.uint8)

        if not alloc:
            def fn():
                call(tmp)
                return d_out

            return fn
        empty_like = cp.empty_like

        def fn_alloc():
            o = empty_like(d_in)
            call(tmp, o)
            return o

        return fn_alloc

    return builder


def nbytes(shape, dtype) -> int:
    n = 1
    for s in shape if isinstance(shape, tuple) else (shape,):
        n *= int(s)
    return n * np.dtype(dtype).itemsize


#: packages whose Python bytecode a fresh benchmark process should find compiled, as ``pip
#: install`` leaves it (a wheel installed with ``--no-compile``, or ``PYTHONDONTWRITEBYTECODE``,
#: would make every process compile their sources again: half a second for numba alone)
BYTECODE_PACKAGES = ("numpy", "llvmlite", "numba", "numba_cuda", "cupy", "cupy_backends", "fastrlock",
                     "array_api_compat", "forge_array")

_BYTECODE: list = []  # the one {package: files compiled} of this run, once computed


def ensure_bytecode() -> dict:
    """Compile the bytecode of :data:`BYTECODE_PACKAGES` where it is missing (once per run);
    returns ``{package: files compiled now}`` for the results."""
    if not _BYTECODE:
        import compileall
        import importlib.util

        done = {}
        for name in BYTECODE_PACKAGES:
            spec = importlib.util.find_spec(name)
            if spec is None or not spec.submodule_search_locations:
                continue
            before = _pyc_count(spec.submodule_search_locations)
            for d in spec.submodule_search_locations:
                compileall.compile_dir(d, quiet=2, workers=0)
            done[name] = _pyc_count(spec.submodule_search_locations) - before
        _BYTECODE.append(done)
    return dict(_BYTECODE[0])


def _pyc_count(dirs) -> int:
    return sum(f.endswith(".pyc") for d in dirs for _, _, fs in os.walk(d) for f in fs)


def fresh_env(cache: str, **extra) -> dict:
    """The environment of a fresh benchmark process with its own empty kernel caches under
    ``cache`` (ours and CuPy's), the compile mode and simulator switches of the caller
    dropped, then ``extra`` set.  The packages' bytecode is compiled first
    (:func:`ensure_bytecode`): a user's machine has it, whatever this one's settings."""
    ensure_bytecode()
    env = dict(os.environ, FORGE_ARRAY_CACHE_DIR=os.path.join(cache, "forge"),
               CUPY_CACHE_DIR=os.path.join(cache, "cupy"))
    for k in ("FORGE_ARRAY_COMPILE", "FORGE_ARRAY_SIMULATE", "NUMBA_ENABLE_CUDASIM", "FORGE_ARRAY_BUILD_PROCESS"):
        env.pop(k, None)
    env.update(extra)
    return env


def run_script(code: str, args, env: dict, timeout: float = 900) -> dict:
    """Run Python ``code`` in a fresh process with ``args`` and environment ``env``; its last
    line of output is a JSON object, returned with the process's wall seconds added
    (``process_wall_s``). RuntimeError with the end of stderr when the process fails."""
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env, capture_output=True, text=True,
                         timeout=timeout)
    wall = time.perf_counter() - t
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["process_wall_s"] = wall
    return res
