"""Per-call host timings shared by ``bench/host_overhead.py`` (GPU machine only).

- :func:`host_us`: host µs of one call, the GPU idle before it (synchronised), median;
- :func:`event_us`: CUDA-event µs of one call from an idle GPU (the bench's method: the host
  work before the launch counts), or with ``busy=True`` behind a GPU kept busy by a spin
  kernel while the host prepares (the kernels alone), median.

The difference of the two event timings is the call's host time before its first launch.

Example (on a GPU)::

    from bench.hosttime import event_us
    idle, busy = event_us(lambda: xp.sum(x)), event_us(lambda: xp.sum(x), busy=True)
"""

from __future__ import annotations

import statistics
import time

_SPIN = None


def _cp():
    import cupy

    return cupy


def _spin():
    """Keep the GPU busy for ~200 µs (one thread spinning on clock64)."""
    global _SPIN
    cp = _cp()
    if _SPIN is None:
        _SPIN = cp.RawKernel(r'''extern "C" __global__ void spin(long long t) {
            long long s = clock64(); while (clock64() - s < t) {} }''', "spin")
    _SPIN((1,), (1,), (cp.int64(400000),))


def host_us(f, n=200):
    """Median host µs of ``f()`` with the GPU synchronised before each call."""
    cp = _cp()
    ts = []
    for _ in range(n):
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t) * 1e6)
    cp.cuda.Device().synchronize()
    return statistics.median(ts)


def event_us(f, n=200, busy=False):
    """Median CUDA-event µs of ``f()``: from an idle GPU, or (``busy``) behind a spin kernel,
    so that the host work before the launch is hidden."""
    cp = _cp()
    s, e = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(n):
        if busy:
            _spin()
        s.record()
        f()
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e) * 1e3)
    return statistics.median(ts)


def profile_calls(f, n=3000, top=30, sync=True):
    """Print a cProfile (by own time, ``top`` rows) of ``n`` calls of ``f`` (after one call
    outside it); ``sync``: wait for the GPU before printing (False: no CuPy needed)."""
    import cProfile
    import pstats

    f()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        f()
    pr.disable()
    if sync:
        _cp().cuda.Device().synchronize()
    pstats.Stats(pr).sort_stats("tottime").print_stats(top)


def matvec_calls(n, p, copies=4):
    """``(A @ x, x @ A)`` pairs of zero-argument calls, ours and PyTorch's, on float32 ``(n, p)``
    matrices: ``(("A@x", ours, torch), ("x@A", ours, torch))``; the calls rotate over
    ``copies`` random matrices so that, as in the bench, no call finds its input in L2."""
    import itertools

    import torch

    import forge_array as xp

    cp = _cp()
    cAs = [cp.random.random((n, p), dtype=cp.float32) for _ in range(copies)]
    cv, cu = cp.random.random(p, dtype=cp.float32), cp.random.random(n, dtype=cp.float32)
    As = itertools.cycle([xp.asarray(a) for a in cAs])
    tAs = itertools.cycle([torch.as_tensor(a, device="cuda") for a in cAs])
    v, u = xp.asarray(cv), xp.asarray(cu)
    tv, tu = torch.as_tensor(cv, device="cuda"), torch.as_tensor(cu, device="cuda")
    return (("A@x", lambda: next(As) @ v, lambda: next(tAs) @ tv),
            ("x@A", lambda: u @ next(As), lambda: tu @ next(tAs)))
