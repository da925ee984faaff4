"""Benchmark harness: cases, backends, timing, roofline, results.

Nothing here imports CuPy, torch or cuda.compute at module level, so the harness
imports (and ``python -m bench.run --dry-run`` runs) on a machine with no GPU.

Model
-----
A :class:`Case` is one measurement point: a name (the series it belongs to), a size,
the minimal bytes it moves (each input read once, each output written once), a
function that makes fresh random inputs, and a dict of implementations. An
implementation is a *builder*: ``builder(*inputs) -> fn`` does all setup outside the
timed region (wrapping arrays, allocating temporary storage) and returns the
zero-argument callable that is timed. Builders import their library lazily; whatever
they raise (ImportError, AttributeError for a missing function, a compile error) is
recorded as the implementation's status and error string, never a crash.

Timing (:class:`GpuBackend`)
----------------------------
- every library runs on CuPy's current stream, which the harness keeps at the legacy
  default stream (torch's default stream and cuda.compute's ``stream=None`` are the
  same stream); CUDA events bracket each call, the end event is synchronised before
  the next call;
- warm-up calls first (the first one's wall time is kept as ``first_call_ms``: it
  includes compilation or loading), then ``reps`` timed calls: median, min, p90;
- inputs that fit in L2 are replicated into several buffers with different random
  data and the calls rotate among them, so a call never finds its input in L2;
- host time per call for small inputs: ``time.perf_counter`` around calls without
  synchronisation, median over many calls;
- the roofline is a device-to-device ``cudaMemcpyAsync`` of ``bytes/2`` bytes, timed
  the same way in the same run: the bandwidth a pure copy of the same traffic reaches.
"""

from __future__ import annotations

import dataclasses
import datetime
import gc
import importlib
import json
import math
import os
import platform
import re
import statistics
import sys
import time
import traceback
from typing import Any, Callable, Sequence

import numpy as np

L2_BYTES_DEFAULT = 60 * 2**20
CANONICAL_IMPLS = ("forge_array", "cupy", "numpy", "torch", "cuda.compute")
PEERS = ("cupy", "numpy", "torch", "cuda.compute")


# --------------------------------------------------------------------------- cases


class Skip(Exception):
    """Raised by a builder to skip an implementation with a reason (not an error)."""


@dataclasses.dataclass
class Impl:
    """An implementation with options; a bare builder means ``Impl(builder)``.

    ``check=False``: its output is not comparable with the reference (e.g. a
    different operation shown for comparison). ``note``: shown in the report.
    """

    builder: Callable[..., Callable[[], Any]]
    check: bool = True
    note: str = ""


@dataclasses.dataclass
class Case:
    suite: str
    name: str  # the series: cases with the same name form a line over size
    size: int  # elements (of the main input)
    bytes_moved: int  # minimal traffic: inputs read once + outputs written once
    make_inputs: Callable[[int], tuple]  # seed -> tuple of device arrays
    impls: dict[str, Any]  # name -> builder or Impl
    shape: tuple = ()
    dtype: str = ""
    params: dict = dataclasses.field(default_factory=dict)
    reference: str = "cupy"  # impl whose output the others are checked against
    input_bytes: int = 0  # bytes of one set of inputs (for L2 rotation); 0: bytes_moved
    mem_bytes: int = 0  # peak device memory estimate; 0: 4 x bytes_moved
    note: str = ""
    rtol: float | None = None  # check tolerance; None: by output dtype
    checker: Callable[[Any, Any], tuple] | None = None  # (out, ref) -> (err, ok); None: compare()

    @property
    def label(self) -> str:
        if self.shape and len(self.shape) > 1:
            return f"{self.name} {fmt_shape(self.shape)}"
        return f"{self.name} n={fmt_count(self.size)}"


def fmt_count(n: int) -> str:
    if n >= 10 and 10 ** round(math.log10(n)) == n:
        return f"1e{round(math.log10(n))}"
    return str(n)


def fmt_shape(shape: Sequence[int]) -> str:
    return "(" + ",".join(fmt_count(int(s)) for s in shape) + ")"


def shape_sweep(total_exp: int, first: int = 1) -> list[tuple[int, int]]:
    """(10^k, 10^(total-k)) for k = first .. total-first: tall to wide at fixed size."""
    return [(10**k, 10 ** (total_exp - k)) for k in range(first, total_exp - first + 1)]


# ------------------------------------------------------------------------ backends


class _Backend:
    """What suites see as ``ctx``: array module, random data, reference name."""

    dry_run = False
    xp: Any = None  # cupy or numpy
    ref: str = "cupy"

    impl_budget_s = 2.0  # at most this much timed work per implementation and case

    def __init__(self, quick: bool = False, reps_scale: float = 1.0):
        self.quick = quick
        self.reps_scale = reps_scale
        self.l2_bytes = L2_BYTES_DEFAULT

    # -- data
    def random(self, shape, dtype, seed: int):
        raise NotImplementedError

    def empty(self, shape, dtype):
        return self.xp.empty(shape, dtype=dtype)

    # -- repetitions per case
    def reps_for(self, nbytes: int) -> int:
        if nbytes >= 400e6:
            r = 10
        elif nbytes >= 40e6:
            r = 20
        elif nbytes >= 4e6:
            r = 50
        else:
            r = 200
        if self.quick:
            r = max(5, r // 2)
        return max(3, int(r * self.reps_scale))

    def warmup_for(self, nbytes: int) -> int:
        return 2 if nbytes >= 400e6 else 3


class GpuBackend(_Backend):
    """CuPy arrays, CUDA-event timing on the legacy default stream."""

    ref = "cupy"

    def __init__(self, quick: bool = False, reps_scale: float = 1.0):
        super().__init__(quick, reps_scale)
        import cupy

        self.xp = cupy
        self.cupy = cupy
        dev = cupy.cuda.Device()
        props = cupy.cuda.runtime.getDeviceProperties(dev.id)
        name = props["name"]
        self.device_name = name.decode() if isinstance(name, bytes) else str(name)
        self.l2_bytes = int(props.get("l2CacheSize", L2_BYTES_DEFAULT)) or L2_BYTES_DEFAULT
        self.total_mem = int(props.get("totalGlobalMem", 0))
        self.cc = f"{props.get('major', '?')}.{props.get('minor', '?')}"
        self.sm_count = int(props.get("multiProcessorCount", 0))
        self.stream = cupy.cuda.get_current_stream()
        self.notes: list[str] = []
        if self.stream.ptr != 0:
            self.notes.append(
                f"CuPy's current stream is {self.stream.ptr:#x}, not the default stream; "
                "torch runs inside torch.cuda.ExternalStream on it"
            )

    # -- data: fresh random values, never zeros
    def random(self, shape, dtype, seed: int):
        cp = self.cupy
        dt = np.dtype(dtype)
        rs = cp.random.RandomState(seed + 1)
        if dt.kind == "f":
            return rs.random_sample(shape, dtype=dt) if dt.itemsize >= 4 else (
                rs.random_sample(shape, dtype=np.float32).astype(dt)
            )
        if dt.kind == "u":
            hi = 256 if dt.itemsize == 1 else 1000
            return rs.randint(0, hi, size=shape, dtype=dt)
        if dt.kind == "i":
            return rs.randint(-100, 101, size=shape, dtype=dt)
        if dt.kind == "b":
            return rs.random_sample(shape, dtype=np.float32) < 0.5
        if dt.kind == "c":
            re_ = rs.random_sample(shape, dtype=np.float64)
            im = rs.random_sample(shape, dtype=np.float64)
            return (re_ + 1j * im).astype(dt)
        raise TypeError(f"no random data for {dt}")

    def sync(self):
        self.cupy.cuda.get_current_stream().synchronize()

    def free_memory(self) -> int:
        free, _ = self.cupy.cuda.runtime.memGetInfo()
        pool = self.cupy.get_default_memory_pool()
        return int(free + pool.free_bytes())

    def release(self):
        gc.collect()
        self.cupy.get_default_memory_pool().free_all_blocks()
        self.cupy.get_default_pinned_memory_pool().free_all_blocks()
        torch = sys.modules.get("torch")
        if torch is not None:
            try:
                torch.cuda.empty_cache()
            except Exception:
                pass

    def time_device(self, fns: Sequence[Callable], warmup: int, reps: int,
                    keep_first: bool = False):
        """Seconds per call (list), wall ms of the very first call, and its output if
        ``keep_first``. Slow calls get fewer repetitions: at most ``impl_budget_s`` of
        timed calls, and never fewer than 3."""
        cp = self.cupy
        t0 = time.perf_counter()
        first = fns[0]()
        self.sync()
        first_ms = (time.perf_counter() - t0) * 1e3
        if not keep_first:
            first = None
        n_warm = max(warmup - 1, 0) + len(fns) - 1
        t0 = time.perf_counter()
        for i in range(n_warm):
            fns[(i + 1) % len(fns)]()
        self.sync()
        per_call = (time.perf_counter() - t0) / n_warm if n_warm else first_ms * 1e-3
        if per_call > 0:
            reps = min(reps, max(3, int(self.impl_budget_s / per_call)))
        start, end = cp.cuda.Event(), cp.cuda.Event()
        times = []
        for i in range(reps):
            fn = fns[i % len(fns)]
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end) * 1e-3)
        return times, first_ms, first

    def time_host(self, fns: Sequence[Callable], calls: int):
        times = []
        for i in range(calls):
            fn = fns[i % len(fns)]
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        self.sync()
        return times

    def copy_fns(self, nbytes: int, nbuf: int):
        """Zero-arg device-to-device memcpy callables of ``nbytes`` (rotating buffers)."""
        cp = self.cupy
        nbytes = max(int(nbytes), 1)
        fns = []
        for k in range(nbuf):
            src = self.random((nbytes,), np.uint8, 1000 + k)
            dst = cp.empty(nbytes, dtype=np.uint8)
            stream = cp.cuda.get_current_stream().ptr

            def fn(src=src, dst=dst, stream=stream):
                cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes, 3, stream)

            fns.append(fn)
        return fns

    def to_numpy(self, out):
        return _to_numpy_any(out, self.cupy)

    def versions(self) -> dict:
        v = _common_versions()
        cp = self.cupy
        v["cupy"] = cp.__version__
        try:
            v["cuda_runtime"] = cp.cuda.runtime.runtimeGetVersion()
            v["cuda_driver"] = cp.cuda.runtime.driverGetVersion()
        except Exception:
            pass
        return v

    def device_meta(self) -> dict:
        return {
            "name": self.device_name,
            "cc": self.cc,
            "sm_count": self.sm_count,
            "l2_bytes": self.l2_bytes,
            "total_mem_bytes": self.total_mem,
        }


class CpuBackend(_Backend):
    """NumPy arrays and wall-clock timing: exercises the harness without a GPU."""

    dry_run = True
    ref = "numpy"

    def __init__(self, quick: bool = False, reps_scale: float = 1.0):
        super().__init__(quick, reps_scale)
        self.xp = np
        self.device_name = "cpu-dry-run"
        self.notes = ["dry run: NumPy on the CPU, wall-clock timing; numbers are meaningless"]
        self.l2_bytes = 2 * 2**20

    def random(self, shape, dtype, seed: int):
        rng = np.random.default_rng(seed + 1)
        dt = np.dtype(dtype)
        if dt.kind == "f":
            return rng.random(shape, dtype=np.float64).astype(dt)
        if dt.kind == "u":
            return rng.integers(0, 256 if dt.itemsize == 1 else 1000, shape, dtype=dt)
        if dt.kind == "i":
            return rng.integers(-100, 101, shape, dtype=dt)
        if dt.kind == "b":
            return rng.random(shape) < 0.5
        if dt.kind == "c":
            return (rng.random(shape) + 1j * rng.random(shape)).astype(dt)
        raise TypeError(f"no random data for {dt}")

    def reps_for(self, nbytes: int) -> int:
        return 5

    def warmup_for(self, nbytes: int) -> int:
        return 1

    def sync(self):
        pass

    def free_memory(self) -> int:
        return 1 << 34

    def release(self):
        gc.collect()

    def time_device(self, fns, warmup, reps, keep_first=False):
        t0 = time.perf_counter()
        first = fns[0]()
        first_ms = (time.perf_counter() - t0) * 1e3
        for i in range(max(warmup - 1, 0)):
            fns[(i + 1) % len(fns)]()
        times = []
        for i in range(reps):
            fn = fns[i % len(fns)]
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return times, first_ms, (first if keep_first else None)

    def time_host(self, fns, calls):
        return self.time_device(fns, 0, calls)[0]

    def copy_fns(self, nbytes, nbuf):
        nbytes = max(int(nbytes), 1)
        fns = []
        for k in range(nbuf):
            src = self.random((nbytes,), np.uint8, 1000 + k)
            dst = np.empty_like(src)
            fns.append(lambda src=src, dst=dst: np.copyto(dst, src))
        return fns

    def to_numpy(self, out):
        return _to_numpy_any(out, None)

    def versions(self) -> dict:
        return _common_versions()

    def device_meta(self) -> dict:
        return {"name": self.device_name, "l2_bytes": self.l2_bytes}


def _to_numpy_any(out, cupy):
    if isinstance(out, (tuple, list)):
        return tuple(_to_numpy_any(o, cupy) for o in out)
    if isinstance(out, np.ndarray) or np.isscalar(out):
        return np.asarray(out)
    mod = type(out).__module__.split(".")[0]
    if mod == "torch":
        return out.detach().cpu().numpy()
    if cupy is not None:
        if isinstance(out, cupy.ndarray):
            return out.get()
        if hasattr(out, "__cuda_array_interface__"):
            return cupy.asarray(out).get()
    return np.asarray(out)


def _version_of(mod: str) -> str | None:
    try:
        from importlib import metadata

        return metadata.version(mod)
    except Exception:
        return None


def _common_versions() -> dict:
    v = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": _version_of("numba"),
        "numba-cuda": _version_of("numba-cuda"),
        "torch": _version_of("torch"),
        "cuda-cccl": _version_of("cuda-cccl"),
        "matplotlib": _version_of("matplotlib"),
    }
    try:
        from forge_array._version import __version__ as fa_version

        v["forge_array"] = fa_version
    except Exception:
        v["forge_array"] = _version_of("forge-array")
    # the commit measured: FORGE_ARRAY_GIT when set (the lent GPU machine's copy of the tree
    # may carry a stale .git: pass the commit in the device command), else git
    if os.environ.get("FORGE_ARRAY_GIT"):
        v["forge_array_git"] = os.environ["FORGE_ARRAY_GIT"]
        return v
    try:
        out = os.popen("git -C %s rev-parse --short HEAD 2>/dev/null" % _repo_root()).read()
        if out.strip():
            v["forge_array_git"] = out.strip()
    except Exception:
        pass
    return v


def _repo_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def slug(name: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s or "device"


# ------------------------------------------------------------------------- running


def _short_error(exc: BaseException) -> str:
    msg = f"{type(exc).__name__}: {exc}".strip()
    msg = " ".join(msg.split())
    return msg if len(msg) <= 400 else msg[:397] + "..."


def _stats(times: list[float]) -> dict:
    t = sorted(times)
    p90 = t[min(len(t) - 1, int(math.ceil(0.9 * len(t))) - 1)]
    return {
        "median_us": statistics.median(t) * 1e6,
        "min_us": t[0] * 1e6,
        "p90_us": p90 * 1e6,
        "mean_us": statistics.fmean(t) * 1e6,
        "reps": len(t),
    }


def _tolerance(arr: np.ndarray) -> float:
    if arr.dtype.kind in "fc":
        return 1e-3 if arr.dtype.itemsize <= 4 or arr.dtype == np.complex64 else 1e-9
    return 0.0


def compare(out, ref, rtol: float | None = None) -> tuple[float | None, bool | None]:
    """Normwise relative error max|a-b| / max|b| (tuples: the worst part)."""
    if isinstance(ref, tuple) or isinstance(out, tuple):
        if not (isinstance(ref, tuple) and isinstance(out, tuple)) or len(ref) != len(out):
            return None, False
        errs = [compare(o, r, rtol) for o, r in zip(out, ref)]
        if any(e[1] is None for e in errs):
            return None, None
        return max(e[0] for e in errs), all(e[1] for e in errs)
    a = np.asarray(out)
    b = np.asarray(ref)
    if a.shape != b.shape:
        if a.size == b.size == 1:
            a, b = a.reshape(()), b.reshape(())
        else:
            return None, False
    if b.size == 0:
        return 0.0, True
    a64 = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    b64 = b.astype(np.complex128 if b.dtype.kind == "c" else np.float64)
    scale = float(np.max(np.abs(b64))) or 1.0
    err = float(np.max(np.abs(a64 - b64))) / scale
    tol = _tolerance(b) if rtol is None else rtol
    return err, bool(err <= tol)


class Runner:
    def __init__(
        self,
        ctx: _Backend,
        *,
        check: bool = True,
        check_max_elems: int = 10**8,
        host_max_bytes: int = 4 * 2**20,
        host_calls: int = 200,
        impl_filter: Sequence[str] | None = None,
        verbose: bool = True,
    ):
        self.ctx = ctx
        self.check = check
        self.check_max_elems = check_max_elems
        self.host_max_bytes = host_max_bytes
        self.host_calls = host_calls
        self.impl_filter = tuple(impl_filter) if impl_filter else None
        self.verbose = verbose
        self._roofline_cache: dict[int, dict] = {}
        self.results: list[dict] = []

    def log(self, *a):
        if self.verbose:
            print(*a, flush=True)

    def nbuf_for(self, input_bytes: int) -> int:
        """How many input copies to rotate so that a call never hits L2."""
        l2 = self.ctx.l2_bytes
        if input_bytes <= 0 or input_bytes >= l2:
            return 1
        n = math.ceil(3 * l2 / input_bytes)
        n = min(n, 32, max(1, (512 * 2**20) // input_bytes))
        return max(2, n)

    def roofline(self, bytes_moved: int) -> dict:
        """Time of a D2D copy of bytes_moved/2 bytes (read + written = bytes_moved)."""
        key = int(bytes_moved)
        if key in self._roofline_cache:
            return self._roofline_cache[key]
        nbytes = max(key // 2, 1)
        res: dict
        try:
            fns = self.ctx.copy_fns(nbytes, self.nbuf_for(nbytes))
            reps = self.ctx.reps_for(key)
            times, _, _ = self.ctx.time_device(fns, self.ctx.warmup_for(key), reps)
            st = _stats(times)
            res = {
                "copy_bytes": nbytes,
                "median_us": st["median_us"],
                "gbps": key / (st["median_us"] * 1e-6) / 1e9,
            }
        except Exception as exc:
            res = {"copy_bytes": nbytes, "error": _short_error(exc)}
        finally:
            fns = None
            self.ctx.release()
        self._roofline_cache[key] = res
        return res

    def run_case(self, case: Case) -> dict:
        ctx = self.ctx
        rec: dict = {
            "suite": case.suite,
            "name": case.name,
            "label": case.label,
            "size": int(case.size),
            "shape": [int(s) for s in case.shape],
            "dtype": case.dtype,
            "bytes": int(case.bytes_moved),
            "params": {k: _jsonable(v) for k, v in case.params.items()},
            "note": case.note,
            "impls": {},
        }
        need = case.mem_bytes or 4 * case.bytes_moved
        free = ctx.free_memory()
        if need > 0.9 * free:
            rec["skipped"] = (
                f"needs ~{need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free"
            )
            self.log(f"  skip {case.label}: {rec['skipped']}")
            self.results.append(rec)
            return rec
        if case.bytes_moved > 0:
            rec["roofline"] = self.roofline(case.bytes_moved)
        input_bytes = case.input_bytes or case.bytes_moved
        nbuf = self.nbuf_for(input_bytes)
        rec["buffers"] = nbuf
        reps = ctx.reps_for(case.bytes_moved)
        warmup = ctx.warmup_for(case.bytes_moved)
        inputs: list = []
        ref_out = None
        try:
            inputs = [case.make_inputs(k) for k in range(nbuf)]
            ctx.sync()
            order = list(case.impls)
            if case.reference in order:  # reference first: its output checks the others
                order.remove(case.reference)
                order.insert(0, case.reference)
            for name in order:
                if self.impl_filter and not any(f in name for f in self.impl_filter):
                    continue
                spec = case.impls[name]
                impl = spec if isinstance(spec, Impl) else Impl(spec)
                r = self._run_impl(case, name, impl, inputs, warmup, reps)
                if "_out" in r:
                    out = r.pop("_out")
                    if name == case.reference:
                        ref_out = out
                    elif impl.check and ref_out is not None:
                        err, ok = (case.checker(out, ref_out) if case.checker is not None
                                   else compare(out, ref_out, case.rtol))
                        r["max_rel_err"] = err
                        r["check"] = "ok" if ok else ("MISMATCH" if ok is False else None)
                    del out
                rec["impls"][name] = r
        except Exception as exc:  # making inputs failed (e.g. out of memory)
            rec["skipped"] = _short_error(exc)
            self.log(f"  skip {case.label}: {rec['skipped']}")
        finally:
            inputs = None
            ref_out = None
            ctx.release()
        self._finish(rec)
        self.results.append(rec)
        if self.verbose:
            self._print_case(rec)
        return rec

    def _run_impl(self, case, name, impl, inputs, warmup, reps) -> dict:
        ctx = self.ctx
        r: dict = {"status": "ok"}
        if impl.note:
            r["note"] = impl.note
        fns = []
        want_out = self.check and impl.check and self._checkable(case)
        try:
            for inp in inputs:
                fns.append(impl.builder(*inp))
            times, first_ms, first_out = ctx.time_device(fns, warmup, reps, keep_first=want_out)
        except Skip as exc:
            return {"status": "skipped", "error": str(exc)}
        except ImportError as exc:
            return {"status": "skipped", "error": _short_error(exc)}
        except Exception as exc:
            tb = traceback.extract_tb(exc.__traceback__)
            where = f" (at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno})" if tb else ""
            try:
                ctx.sync()
            except Exception:
                pass
            return {"status": "error", "error": _short_error(exc) + where}
        r.update(_stats(times))
        r["first_call_ms"] = first_ms
        r["gbps"] = (
            case.bytes_moved / (r["median_us"] * 1e-6) / 1e9
            if r["median_us"] and case.bytes_moved > 0
            else None
        )
        if (case.input_bytes or case.bytes_moved) <= self.host_max_bytes:
            try:
                ht = ctx.time_host(fns, self.host_calls)
                r["host_us"] = statistics.median(ht) * 1e6
            except Exception as exc:
                r["host_error"] = _short_error(exc)
        if want_out:
            try:
                r["_out"] = ctx.to_numpy(first_out)
            except Exception as exc:
                r["check_error"] = _short_error(exc)
            first_out = None
        return r

    def _checkable(self, case: Case) -> bool:
        return case.size <= self.check_max_elems

    def _finish(self, rec: dict) -> None:
        roof = rec.get("roofline") or {}
        t_roof = roof.get("median_us")
        for r in rec["impls"].values():
            if r.get("status") == "ok" and t_roof:
                r["roofline_frac"] = t_roof / r["median_us"] if r["median_us"] else None
        ratios = {}
        fa = rec["impls"].get("forge_array", {})
        if fa.get("status") == "ok":
            for peer, r in rec["impls"].items():
                if peer == "forge_array" or r.get("status") != "ok":
                    continue
                ratios[peer] = r["median_us"] / fa["median_us"]
        rec["speedup_vs"] = ratios  # peer time / forge_array time: > 1 means forge_array wins

    def _print_case(self, rec: dict) -> None:
        parts = []
        for name, r in rec["impls"].items():
            if r.get("status") == "ok":
                chk = "" if r.get("check") in (None, "ok") else f" {r['check']}"
                parts.append(f"{name} {r['median_us']:.1f}us{chk}")
            else:
                parts.append(f"{name} {r.get('status')}")
        roof = rec.get("roofline", {}).get("median_us")
        rs = f" | copy {roof:.1f}us" if roof else ""
        print(f"  {rec['label']:<40} " + ", ".join(parts) + rs, flush=True)


def _jsonable(v):
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (tuple, list)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (np.integer, np.floating)):
        return v.item()
    return str(v)


# ----------------------------------------------------------------------- reporting


def metadata(ctx: _Backend, args: dict, elapsed_s: float | None = None) -> dict:
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "device": ctx.device_meta(),
        "versions": ctx.versions(),
        "args": args,
        "notes": list(getattr(ctx, "notes", [])),
        "dry_run": ctx.dry_run,
    }
    if elapsed_s is not None:
        meta["elapsed_s"] = round(elapsed_s, 1)
    return meta


def write_json(path: str, meta: dict, results: list[dict]) -> None:
    with open(path, "w") as f:
        json.dump({"meta": meta, "cases": results}, f, indent=1, default=_jsonable)


def _impl_order(results: list[dict]) -> list[str]:
    names: list[str] = []
    for rec in results:
        for n in rec.get("impls", {}):
            if n not in names:
                names.append(n)

    def key(n):
        base = n.split(" ")[0]
        rank = CANONICAL_IMPLS.index(base) if base in CANONICAL_IMPLS else len(CANONICAL_IMPLS)
        return (rank, n != base, names.index(n))

    return sorted(names, key=key)


def _cell(r: dict | None) -> str:
    if r is None:
        return ""
    if r.get("status") != "ok":
        return "skip" if r.get("status") == "skipped" else "err"
    t = r["median_us"]
    ts = f"{t:.1f}" if t < 1000 else f"{t:,.0f}"
    gb = r.get("gbps")
    frac = r.get("roofline_frac")
    extra = []
    if gb is not None:
        extra.append(f"{gb:.0f} GB/s")
    if frac is not None:
        extra.append(f"{100 * frac:.0f}%")
    s = f"{ts} ({', '.join(extra)})" if extra else ts
    if r.get("check") == "MISMATCH":
        s += " **MISMATCH**"
    return s


def markdown(meta: dict, results: list[dict]) -> str:
    dev = meta["device"]
    v = meta["versions"]
    lines = [f"# forge_array benchmarks: {dev.get('name')}", ""]
    lines.append(
        f"{meta['date']}; compute capability {dev.get('cc', '?')}; "
        + ", ".join(f"{k} {val}" for k, val in v.items() if val)
    )
    lines.append("")
    for note in meta.get("notes", []):
        lines.append(f"> {note}")
    lines += [
        "",
        "Cells: median time in µs (bandwidth from the minimal bytes moved, fraction of the "
        "copy roofline: a device-to-device copy of the same traffic timed in the same run). "
        "`fa ×peer` = peer time / forge_array time (> 1: forge_array is faster). "
        "`skip`/`err`: see the notes under each table.",
        "",
    ]
    suites: list[str] = []
    for rec in results:
        if rec["suite"] not in suites:
            suites.append(rec["suite"])
    for suite in suites:
        recs = [r for r in results if r["suite"] == suite]
        impls = _impl_order(recs)
        peers = [p for p in PEERS if any(p in r.get("speedup_vs", {}) for r in recs)]
        lines.append(f"## {suite}")
        lines.append("")
        head = ["case", "MB", "copy µs"] + impls + [f"fa ×{p}" for p in peers]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "|".join(["---"] * len(head)) + "|")
        problems: list[str] = []
        for rec in recs:
            roof = rec.get("roofline", {})
            row = [rec["label"], f"{rec['bytes'] / 1e6:.3g}"]
            row.append(f"{roof['median_us']:.1f}" if roof.get("median_us") else "")
            if rec.get("skipped"):
                row += [""] * (len(impls) + len(peers))
                row[0] += " (skipped)"
                problems.append(f"- {rec['label']}: skipped: {rec['skipped']}")
            else:
                for n in impls:
                    r = rec["impls"].get(n)
                    row.append(_cell(r))
                    if r and r.get("status") != "ok":
                        problems.append(f"- {rec['label']} / {n}: {r.get('error')}")
                    elif r and r.get("check") == "MISMATCH":
                        problems.append(
                            f"- {rec['label']} / {n}: result differs from "
                            f"the reference: rel. error {r.get('max_rel_err'):.3g}"
                        )
                for p in peers:
                    s = rec.get("speedup_vs", {}).get(p)
                    row.append(f"{s:.2f}" if s is not None else "")
            lines.append("| " + " | ".join(row) + " |")
        notes = sorted({r.get("note") for r in recs if r.get("note")})
        if notes or problems:
            lines.append("")
        for n in notes:
            lines.append(f"- note: {n}")
        # the same error repeats over sizes: show each distinct one once per impl
        seen: set = set()
        for p in problems:
            key = p.split(": ", 1)[-1]
            impl = p.split(" / ")[-1].split(":")[0] if " / " in p else ""
            if (impl, key) in seen:
                continue
            seen.add((impl, key))
            lines.append(p)
        lines.append("")
    return "\n".join(lines)


def _split_series(recs: list[dict]):
    """Size sweeps (x: elements), shape sweeps at a fixed size (x: rows), singles."""
    series: dict[str, list[dict]] = {}
    for r in recs:
        series.setdefault(r["name"], []).append(r)
    sweeps, shape_sweeps, singles = {}, {}, []
    for name, rs in series.items():
        if len({r["size"] for r in rs}) > 1:
            sweeps[name] = sorted(rs, key=lambda r: r["size"])
        elif len(rs) > 1 and all(len(r["shape"]) == 2 for r in rs):
            shape_sweeps[name] = sorted(rs, key=lambda r: r["shape"][0])
        else:
            singles.extend(rs)
    return sweeps, shape_sweeps, singles


def _points(rs: list[dict], impl: str, xfun):
    pts = []
    for r in rs:
        ri = r["impls"].get(impl, {})
        if ri.get("status") == "ok" and ri.get("gbps"):
            pts.append((xfun(r), ri["gbps"]))
    return pts


def plot(path: str, meta: dict, results: list[dict]) -> str | None:
    """Bandwidth per implementation; one row per suite: size sweeps (GB/s vs elements),
    shape sweeps at a fixed size (GB/s vs rows), single cases (bars); the dashed black
    line / black ticks are the copy roofline of the same traffic."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:
        return f"no plot: {_short_error(exc)}"
    suites: list[str] = []
    for rec in results:
        if rec["suite"] not in suites and not rec.get("skipped") and rec.get("impls"):
            suites.append(rec["suite"])
    if not suites:
        return "no plot: no results"
    impls = _impl_order(results)
    colors = {n: f"C{i % 10}" for i, n in enumerate(impls)}
    styles = ["-", "--", ":", "-."]
    markers = "osD^v<>ph*"
    fig, axes = plt.subplots(len(suites), 3, figsize=(21, 8.5 * len(suites)), squeeze=False)
    for row, suite in enumerate(suites):
        recs = [r for r in results if r["suite"] == suite and not r.get("skipped")]
        sweeps, shape_sweeps, singles = _split_series(recs)
        for col, (group, xfun, xlabel) in enumerate((
            (sweeps, lambda r: r["size"], "elements"),
            (shape_sweeps, lambda r: r["shape"][0], "rows (fixed number of elements)"),
        )):
            ax = axes[row][col]
            if not group:
                ax.axis("off")
                continue
            for si, (sname, rs) in enumerate(group.items()):
                for n in impls:
                    pts = _points(rs, n, xfun)
                    if pts:
                        x, y = zip(*pts)
                        ax.plot(x, y, styles[si % 4], marker=markers[si % 10], color=colors[n],
                                label=f"{n}: {sname}", ms=4, lw=1.2)
            first = next(iter(group.values()))
            roof = [(xfun(r), r["roofline"]["gbps"]) for r in first
                    if r.get("roofline", {}).get("gbps")]
            if roof:
                x, y = zip(*roof)
                ax.plot(x, y, "k--", lw=1, label="copy roofline")
            ax.set_xscale("log")
            if col == 0:
                ax.set_yscale("log")
            ax.set_xlabel(xlabel)
            ax.set_ylabel("GB/s (minimal bytes moved)")
            ax.set_title(f"{suite}: " + ("size sweeps" if col == 0 else "shape sweeps"))
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=6, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.13))
        ax = axes[row][2]
        if singles:
            xs = np.arange(len(singles))
            used = [n for n in impls if any(r["impls"].get(n, {}).get("gbps") for r in singles)]
            width = 0.8 / max(len(used), 1)
            for j, n in enumerate(used):
                ys = [(r["impls"].get(n, {}).get("gbps") or 0) for r in singles]
                ax.bar(xs + (j - len(used) / 2 + 0.5) * width, ys, width, color=colors[n],
                       label=n)
            roof = [r.get("roofline", {}).get("gbps") or np.nan for r in singles]
            ax.plot(xs, roof, "k_", ms=20, mew=2, label="copy roofline")
            ax.set_xticks(xs)
            ax.set_xticklabels([r["label"] for r in singles], rotation=45, ha="right",
                               fontsize=7)
            ax.set_ylabel("GB/s")
            ax.set_title(f"{suite}: single cases")
            ax.grid(True, axis="y", alpha=0.3)
            ax.legend(fontsize=6)
        else:
            ax.axis("off")
    fig.suptitle(f"forge_array vs peers on {meta['device'].get('name')} ({meta['date']})")
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None


def write_all(out_dir: str, stem: str, meta: dict, results: list[dict]) -> dict:
    os.makedirs(out_dir, exist_ok=True)
    paths = {
        "json": os.path.join(out_dir, stem + ".json"),
        "md": os.path.join(out_dir, stem + ".md"),
        "png": os.path.join(out_dir, stem + ".png"),
    }
    write_json(paths["json"], meta, results)
    with open(paths["md"], "w") as f:
        f.write(markdown(meta, results))
    err = plot(paths["png"], meta, results)
    if err:
        paths.pop("png")
        print(err)
    return paths


def import_optional(name: str):
    """importlib.import_module, raising Skip (not an error) when it is missing."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise Skip(f"{name} not available: {exc}") from None
