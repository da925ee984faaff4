"""Host time per call of the namespace's full reductions, the reduce primitives and
``primitives.copy``, measured WITHOUT a GPU: the kernels run under numba's CUDA simulator
(``FORGE_ARRAY_SIMULATE=1``, arrays on the ``cpu`` device) with the simulated launch
replaced by a no-op and ``SimBuffer.of`` stubbed, so what is timed is the Python path of a
call (argument checks, dtype rules, axes, dispatch, layout, plan and scratch look-ups, the
output allocation, wrapping the result).  The simulator branch differs from the GPU branch
only in ``runtime.buffer_of`` (a ``SimBuffer`` instead of a device address), so these
figures track the host time of the same calls on a GPU machine, less the launch itself
(~4.5 µs through ``cuLaunchKernel`` on an H200) and CuPy's output allocation (~2-3 µs).

They are CPU host-path figures, not GPU timings:

    python -m bench.host_overhead                 # µs per call: best and median of --repeat runs
    python -m bench.host_overhead --n 1000000 --number 2000 --repeat 7
    python -m bench.host_overhead --clock cpu     # process CPU time: steadier on a busy machine
    python -m bench.host_overhead --profile xp.sum   # cProfile of one case

The results of the stubbed calls are garbage (nothing runs); every case is called once
with the real simulated launch first, so plans and kernels are compiled and cached.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import time
import timeit


def _setup_env():
    if "forge_array" in sys.modules or "numba.cuda" in sys.modules:
        return
    os.environ["FORGE_ARRAY_SIMULATE"] = "1"
    os.environ.setdefault("FORGE_ARRAY_DEVICE", "cpu")


def cases(n: int):
    """(label, zero-argument callable) of every timed call on ``n`` float32 elements."""
    import numpy as np

    import forge_array as xp
    from forge_array import primitives

    pr = importlib.import_module("forge_array.primitives.reductions")  # the module, not the function

    rng = np.random.default_rng(0)
    host = rng.random(n, dtype=np.float32)
    x = xp.asarray(host, device="cpu")
    b = xp.asarray(host > 0.5, device="cpu")
    xs = host  # backend array for the primitives
    m = xp.reshape(x[: (n // 10) * 10], (n // 10, 10))   # a thin matrix
    v = xp.asarray(host[: n // 10], device="cpu")
    w = xp.reshape(x[: (n // 10) * 10], (10, n // 10))   # a wide matrix
    v10 = xp.asarray(host[:10], device="cpu")
    f32 = np.dtype(np.float32)
    y = xp.asarray(host[::-1].copy(), device="cpu")
    xo = xp.empty_like(x)
    px, py = xp.asarray(host, device="cpu", copy=True), xp.asarray(y, copy=True)  # private
    pm, pv = xp.asarray(m, copy=True), xp.asarray(v10, copy=True)
    fused_sum = xp.fuse(_sum_xy1)
    fused_stats = xp.fuse(_stats)
    fused_axpby = xp.fuse(_axpby)
    fused_rows = xp.fuse(_rows)
    fused_colvar = xp.fuse(_colvar)
    fused_scan = xp.fuse(_cumsum_xy)
    return [
        ("xp.sum", lambda: xp.sum(x)),
        ("xp.prod", lambda: xp.prod(x)),
        ("xp.max", lambda: xp.max(x)),
        ("xp.min", lambda: xp.min(x)),
        ("xp.mean", lambda: xp.mean(x)),
        ("xp.var", lambda: xp.var(x)),
        ("xp.std", lambda: xp.std(x)),
        ("xp.argmax", lambda: xp.argmax(x)),
        ("xp.cumulative_sum", lambda: xp.cumulative_sum(x)),
        ("xp.cumulative_sum axis=0", lambda: xp.cumulative_sum(m, axis=0)),
        ("xp.accumulate", lambda: xp.accumulate(xp.ops.add, x)),
        ("xp.accumulate out=", lambda: xp.accumulate(xp.ops.add, x, out=xo)),
        ("xp.sum axis=0", lambda: xp.sum(m, axis=0)),
        ("x @ A", lambda: v @ m),
        ("A @ x", lambda: m @ v10),
        ("A @ x wide", lambda: w @ v),
        ("x @ A wide", lambda: v10 @ w),
        ("xp.mapreduce square", lambda: xp.mapreduce(_square, xp.ops.add, x)),
        ("xp.any", lambda: xp.any(b)),
        ("xp.all", lambda: xp.all(b)),
        ("primitives.reductions.sum", lambda: pr.sum(xs, None, f32)),
        ("primitives.reductions.max", lambda: pr.max(xs)),
        ("primitives.reductions.var", lambda: pr.var(xs)),
        ("primitives.reductions.argmax", lambda: pr.argmax(xs)),
        ("primitives.copy", lambda: primitives.copy(xs)),
        ("xp.fuse sum(x*y+1)", lambda: fused_sum(x, y)),
        ("xp.fuse mean/std/max", lambda: fused_stats(x)),
        ("xp.fuse 2x+3y-1", lambda: fused_axpby(x, y)),
        ("xp.fuse row sums of A*v", lambda: fused_rows(m, v10)),
        ("xp.fuse column sums of (X-mu)**2", lambda: fused_colvar(m, v10)),
        ("xp.fuse cumulative_sum(x*y)", lambda: fused_scan(x, y)),
        # small eager steps, automatic fusion off and on (on: below MIN_SIZE, never deferred)
        ("x + y", lambda: x + y),
        ("exp(x)", lambda: xp.exp(x)),
        ("where(x>0)", lambda: xp.where(x > 0, x, 0.0)),
        ("fusion on: x + y", lambda: x + y),
        ("fusion on: exp(x)", lambda: xp.exp(x)),
        ("fusion on: where(x>0)", lambda: xp.where(x > 0, x, 0.0)),
        # plain code under automatic fusion on private arrays (deferred at every size here)
        ("plain sum(x*y+1)", lambda: xp.sum(px * py + 1)._array),
        ("plain mean/std/max", lambda: [r._array for r in _stats(px)]),
        ("plain 2x+3y-1", lambda: _axpby(px, py)._array),
        ("plain sum((x-mean(x))**2)", lambda: xp.sum((px - xp.mean(px)) ** 2)._array),
        ("plain row sums of A*v", lambda: xp.sum(pm * pv[None, :], axis=1)._array),
        # one-step expressions computed alone (what automatic fusion learns to run eagerly:
        # FORGE_ARRAY_FUSION_ALONE=0 keeps deferring them), and the same steps eagerly
        ("plain X - m alone", lambda: (pm - pv)._array),
        ("plain column sums alone", lambda: xp.sum(pm, axis=0)._array),
        ("X - m", lambda: (pm - pv)._array),
        ("column sums", lambda: xp.sum(pm, axis=0)._array),
    ]


def _sum_xy1(x, y):
    import forge_array as xp

    return xp.sum(x * y + 1)


def _stats(x):
    import forge_array as xp

    return xp.mean(x), xp.std(x), xp.max(x)


def _cumsum_xy(x, y):
    import forge_array as xp

    return xp.cumulative_sum(x * y)


def _rows(A, v):
    import forge_array as xp

    return xp.sum(A * v[None, :], axis=1)


def _colvar(X, mu):
    import forge_array as xp

    return xp.sum((X - mu) ** 2, axis=0)


def _axpby(x, y):
    return 2 * x + 3 * y - 1


def _square(a):
    return a * a


def stub_launch():
    """Make every simulated launch a no-op (and ``SimBuffer.of`` free)."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    from forge_array.runtime import memory

    FakeCUDAKernel.__getitem__ = lambda self, cfg: (lambda *a: None)
    memory.SimBuffer.of = classmethod(lambda cls, x: None)


def _fusion_for(label):
    """Automatic fusion on (every size, simulated CPU arrays) for the "plain" cases, on at its
    own threshold for the "fusion on" ones, off for the others; returns what restores the
    previous state."""
    from forge_array.fusion import auto

    plain = label.startswith("plain")
    on = plain or label.startswith("fusion on")
    old, size = auto.enable(on, simulated_cpu=on), auto.MIN_SIZE[0]
    auto.MIN_SIZE[0] = 0 if plain else size

    def restore():
        auto.MIN_SIZE[0] = size
        auto.enable(*old)

    return restore


def measure(n=1000, number=2000, repeat=7, only=None, clock="wall"):
    """{label: (best, median) µs per call over ``repeat`` runs of ``number`` calls}.  The
    best run is the figure to compare (timeit's advice: slower runs are other processes'
    interference); the median shows how noisy the machine was."""
    cs = [(k, f) for k, f in cases(n) if only is None or k in only]
    for label, f in cs:  # compile and cache with the real (simulated) launch
        restore = _fusion_for(label)
        f()
        restore()
    stub_launch()
    out = {}
    for label, f in cs:
        restore = _fusion_for(label)
        f()
        runs = timeit.repeat(f, number=number, repeat=repeat, timer=_TIMERS[clock])
        restore()
        out[label] = (min(runs) / number * 1e6, statistics.median(runs) / number * 1e6)
    return out


_TIMERS = {"wall": time.perf_counter, "cpu": time.process_time}


def profile(label, n=1000, number=20000):
    from bench.hosttime import profile_calls

    f = dict(cases(n))[label]
    restore = _fusion_for(label)
    f()
    stub_launch()
    profile_calls(f, number, 25, sync=False)
    restore()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="elements (float32); default 1000")
    ap.add_argument("--number", type=int, default=2000, help="calls per timing run")
    ap.add_argument("--repeat", type=int, default=7, help="timing runs (best and median shown)")
    ap.add_argument("--only", default=None, help="comma-separated labels")
    ap.add_argument("--clock", choices=sorted(_TIMERS), default="wall",
                    help="wall time, or this process's CPU time (steadier on a loaded machine)")
    ap.add_argument("--profile", default=None, metavar="LABEL", help="cProfile one case")
    args = ap.parse_args(argv)
    _setup_env()
    if args.profile:
        profile(args.profile, args.n)
        return
    only = set(args.only.split(",")) if args.only else None
    res = measure(args.n, args.number, args.repeat, only, args.clock)
    print(f"host time per call, launch stubbed (CPU, simulator branch), n={args.n} float32, "
          f"{args.clock} clock")
    print(f"{'call':26s} {'best':>8s} {'median':>8s}")
    for label, (best, med) in res.items():
        print(f"{label:26s} {best:5.2f} us {med:5.2f} us")
    import numpy as np

    from forge_array.runtime import data_address

    x = np.zeros(4)
    t = min(timeit.repeat(lambda: data_address(x), number=args.number, repeat=args.repeat,
                          timer=_TIMERS[args.clock]))
    print(f"(of which a NumPy array's address, once per array per call: {t / args.number * 1e6:.2f} us; "
          "a CuPy array's x.data.ptr costs a fraction of it)")


if __name__ == "__main__":
    main()
