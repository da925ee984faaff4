"""Runtime figures: host time per launch, cold and warm-cache first-call times.

Run on the GPU machine:  python -m bench.runtime_probe [--out DIR]
Prints a table and writes runtime_probe.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

FIRST_CALL = r"""
import time, sys
t0 = time.perf_counter()
import cupy as cp
import numpy as np
from forge_array import primitives
x = cp.arange(1 << 20, dtype=cp.float32)
cp.cuda.runtime.deviceSynchronize()
t1 = time.perf_counter()
y = primitives.copy(x)
cp.cuda.runtime.deviceSynchronize()
t2 = time.perf_counter()
assert bool((y == x).all())
print(f"{t1 - t0:.6f} {t2 - t1:.6f}")
"""


def first_call(cache_dir: str) -> tuple:
    env = dict(os.environ, FORGE_ARRAY_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", FIRST_CALL], env=env, capture_output=True, text=True, check=True)
    setup, call = (float(v) for v in out.stdout.split())
    return setup, call


def host_times(fn, n: int = 3000) -> float:
    for _ in range(50):
        fn()
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples) * 1e6


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    args = ap.parse_args(argv)
    import cupy as cp
    from numba import cuda

    from forge_array import primitives, runtime
    from forge_array.kernels import copy as kcopy

    res = {"device": runtime.device_info()["name"]}
    with tempfile.TemporaryDirectory() as d:
        res["cold_first_call_s"] = first_call(d)[1]
        res["warm_cache_first_call_s"] = first_call(d)[1]
        res["warm_cache_import_s"] = first_call(d)[0]

    x = cp.random.random(1000).astype(cp.float32)
    y = cp.empty_like(x)
    primitives.copy(x, y)
    pt = runtime.ptr_t("uint32")
    k = runtime.compile_kernel(kcopy.make_copy_scalar, (cp.dtype("uint32"), 4), (pt, pt, runtime.i64))
    px, py = x.data.ptr, y.data.ptr
    from forge_array.runtime import launching

    res["host_us_runtime_launch"] = host_times(lambda: runtime.launch(k, 1, 256, (px, py, 1000)))
    launching._FAST_LAUNCH = False
    res["host_us_runtime_launch_via_cupy_function"] = host_times(lambda: runtime.launch(k, 1, 256, (px, py, 1000)))
    launching._FAST_LAUNCH = True
    y[:] = 0
    runtime.launch(k, 1, 256, (px, py, 1000))
    assert bool((y == x).all()), "packed-parameter launch computed a wrong copy"
    res["host_us_primitives_copy"] = host_times(lambda: primitives.copy(x, y))
    res["host_us_cupy_copy"] = host_times(lambda: cp.copyto(y, x))

    @cuda.jit
    def numba_copy(a, b):
        i = cuda.grid(1)
        if i < a.size:
            b[i] = a[i]

    numba_copy[4, 256](x, y)
    res["host_us_numba_dispatcher"] = host_times(lambda: numba_copy[4, 256](x, y), n=500)
    cp.cuda.runtime.deviceSynchronize()

    def event_us(fn):
        """GPU time of one call of ``fn`` (CUDA events on the current stream), in µs."""
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        return cp.cuda.get_elapsed_time(a, b) * 1e3

    def gpu_time(fn, reps):
        for _ in range(3):
            fn()
        return statistics.median([event_us(fn) for _ in range(reps)])

    # nvbench's method for bandwidth-bound kernels: the L2 cache flushed (a memset of twice
    # its size) before every timed launch, ours and CuPy's interleaved (alternating which goes
    # first), so that neither profits from what the other or its own last run left in L2 (at
    # 10^7 the 80 MB of a copy and the 50-60 MB L2 are of one size: the sequential medians
    # above depend on the order of the runs)
    scratch = cp.empty(2 * (runtime.device_info()["l2_bytes"] or 64 << 20) // 4, dtype=cp.float32)

    def gpu_time_pair(fa, fb, reps):
        for _ in range(3):
            fa()
            fb()
        ta, tb = [], []
        for i in range(reps):
            for fn, ts in (((fa, ta), (fb, tb)) if i % 2 == 0 else ((fb, tb), (fa, ta))):
                scratch.fill(i)
                ts.append(event_us(fn))
        return statistics.median(ta), statistics.median(tb)

    for n in (10**6, 10**7, 10**8, 10**9):
        xs = cp.random.random(n + 1, dtype=cp.float32)
        ys = cp.empty(n + 1, dtype=cp.float32)
        reps = 20 if n >= 10**8 else 100
        for label, src, dst in (("aligned", xs[:n], ys[:n]), ("misaligned x[1:]", xs[1:], ys[:n])):
            ours = gpu_time(lambda: primitives.copy(src, dst), reps)
            theirs = gpu_time(lambda: cp.copyto(dst, src), reps)
            assert bool((dst == src).all())
            gbs = 8 * n / ours / 1e3
            ours_c, theirs_c = gpu_time_pair(lambda: primitives.copy(src, dst), lambda: cp.copyto(dst, src), reps)
            res[f"copy {n:.0e} {label}"] = {"forge_us": ours, "cupy_us": theirs, "ratio": theirs / ours, "GB/s": gbs,
                                            "flushed_forge_us": ours_c, "flushed_cupy_us": theirs_c,
                                            "flushed_ratio": theirs_c / ours_c}
        del xs, ys
        cp.get_default_memory_pool().free_all_blocks()
    res["compile_stats"] = dict(runtime.STATS)
    for k_, v in res.items():
        print(f"{k_:32s} {v}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "runtime_probe.json"), "w") as f:
        json.dump(res, f, indent=2)
    return res


if __name__ == "__main__":
    main()
