"""Where a bench case runs: :class:`GpuBackend` (CuPy arrays, CUDA-event timing, the peers that
are installed) and :class:`CpuBackend` (NumPy, wall-clock timing), with the versions they report.
"""
from __future__ import annotations

import gc
import os
import platform
import re
import sys
import time
from typing import Any, Callable, Sequence

import numpy as np

from .cases import L2_BYTES_DEFAULT

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


