"""Host time of small element-wise calls with automatic fusion on and off, CuPy beside them
(GPU machine only).

Each call's result is then used by an operation that does not fuse (``flip``), so that a
deferred step cannot hide its work: what is timed is the step, its settlement and its
launch.  Per case: median host µs per call with the GPU synchronised before each call
(:func:`bench.hosttime.host_us`), fusion on, fusion off and CuPy, measured in alternating
rounds in one process.  Also ``sum(x*y+1)`` at the same size, where fusion saves two launches.

    python -m bench.fusion_host                    # n = 1000
    python -m bench.fusion_host --n 100000 --json out.json

``--break-even`` measures where deferral pays (what :data:`forge_array.fusion.auto.MIN_SIZE`
is chosen by): plain-code expressions at several sizes, CUDA-event µs of one call from an
idle GPU as the bench times them (host work before the launch counts), deferred at every
size (steps computed alone included: :data:`~forge_array.fusion.auto.ALONE_LIMIT` 0),
eager, and under ``xp.fuse``:

    python -m bench.fusion_host --break-even --sizes 1e5,1e6,3e6,1e7,1e8
"""

from __future__ import annotations

import argparse
import json

from .hosttime import host_us


def cases(n):
    """(label, forge_array call on arrays, CuPy call on arrays) of the timed steps."""
    import cupy as cp

    import forge_array as xp

    rng = cp.random.default_rng(0)
    cx, cy = rng.random(n, dtype=cp.float32), rng.random(n, dtype=cp.float32)
    x, y = xp.asarray(cx, copy=True), xp.asarray(cy, copy=True)   # private: may be deferred

    def use(r):
        return xp.flip(r)

    return [
        ("x + y", lambda: use(x + y), lambda: cp.flip(cx + cy)),
        ("exp(x)", lambda: use(xp.exp(x)), lambda: cp.flip(cp.exp(cx))),
        ("where(x > 0, x, 0)", lambda: use(xp.where(x > 0.5, x, 0.0)),
         lambda: cp.flip(cp.where(cx > 0.5, cx, 0.0))),
        ("sum(x*y+1)", lambda: float(xp.sum(x * y + 1)), lambda: float(cp.sum(cx * cy + 1))),
        ("flip alone", lambda: use(x), lambda: cp.flip(cx)),
    ]


_MODES = ("fusion on", "fusion off", "cupy")


def measure(n=1000, calls=400, min_size=None, rounds=8):
    """{label: {"fusion on": µs, "fusion off": µs, "cupy": µs}}: the median over ``rounds``
    rounds, each timing ``calls / rounds`` calls of every mode in turn (so that drifts of
    the machine fall on all modes alike); ``min_size`` sets
    :data:`forge_array.fusion.auto.MIN_SIZE` for the "fusion on" runs."""
    import statistics

    from forge_array.fusion import auto

    def timed(mode, f, k):
        old = auto.enable(mode == "fusion on")
        size = auto.MIN_SIZE[0]
        if min_size is not None and mode == "fusion on":
            auto.MIN_SIZE[0] = min_size
        try:
            return host_us(f, k)
        finally:
            auto.MIN_SIZE[0] = size
            auto.enable(*old)

    out = {}
    for label, ours, theirs in cases(n):
        fns = {m: (theirs if m == "cupy" else ours) for m in _MODES}
        for m in _MODES:
            timed(m, fns[m], 20)  # compile, plans, caches
        runs: dict = {m: [] for m in _MODES}
        for _ in range(rounds):
            for m in _MODES:
                runs[m].append(timed(m, fns[m], max(1, calls // rounds)))
        out[label] = {m: round(statistics.median(v), 2) for m, v in runs.items()}
    return out


def break_even(sizes, calls=300):
    """{case: {n: {"deferred": µs, "eager": µs, "fuse": µs or None}}} (see the module
    docstring)."""
    import cupy as cp

    import forge_array as xp
    from forge_array.fusion import auto

    from .hosttime import event_us

    fsum = xp.fuse(lambda x, y: xp.sum(x * y + 1))
    fchain = xp.fuse(lambda x, y: 2 * x + 3 * y - 1)
    fstats = xp.fuse(lambda x: (xp.mean(x), xp.std(x), xp.max(x)))
    out: dict = {}
    old, size0, alone0 = auto.enable(True), auto.MIN_SIZE[0], auto.ALONE_LIMIT[0]
    auto.ALONE_LIMIT[0] = 0   # deferred means deferred: no step learnt to run eagerly
    try:
        for n in sizes:
            rng = cp.random.default_rng(0)
            x = xp.asarray(rng.random(n, dtype=cp.float32), copy=True)   # private
            y = xp.asarray(rng.random(n, dtype=cp.float32), copy=True)
            cases = [
                ("sum(x*y+1)", lambda: xp.sum(x * y + 1)._array, lambda: fsum(x, y)._array),
                ("2x+3y-1", lambda: (2 * x + 3 * y - 1)._array, lambda: fchain(x, y)._array),
                ("flip(x+y)", lambda: xp.flip(x + y)._array, None),
                ("mean,std,max", lambda: [v._array for v in (xp.mean(x), xp.std(x), xp.max(x))],
                 lambda: [v._array for v in fstats(x)]),
            ]
            for label, plain, fused in cases:
                row = {}
                for mode, limit in (("deferred", 0), ("eager", 1 << 62)):
                    auto.MIN_SIZE[0] = limit
                    event_us(plain, 20)
                    row[mode] = round(event_us(plain, calls), 1)
                auto.MIN_SIZE[0] = size0
                if fused is not None:
                    event_us(fused, 20)
                row["fuse"] = round(event_us(fused, calls), 1) if fused is not None else None
                out.setdefault(label, {})[n] = row
    finally:
        auto.MIN_SIZE[0] = size0
        auto.ALONE_LIMIT[0] = alone0
        auto.enable(*old)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--min-size", type=int, default=None,
                    help="automatic fusion's MIN_SIZE for the 'fusion on' runs (default: as set)")
    ap.add_argument("--json", default=None, help="write the figures here too")
    ap.add_argument("--break-even", action="store_true",
                    help="deferred vs eager vs xp.fuse at --sizes (GPU-event µs per call)")
    ap.add_argument("--sizes", default="1e5,1e6,3e6,1e7,3e7,1e8",
                    help="comma-separated element counts for --break-even")
    a = ap.parse_args(argv)
    if a.break_even:
        sizes = [int(float(v)) for v in a.sizes.split(",")]
        res = break_even(sizes)
        print("CUDA-event µs per call from an idle GPU, float32: deferred / eager / xp.fuse")
        print(f"{'case':14s} " + " ".join(f"{n:>22.0e}" for n in sizes))
        for label, row in res.items():
            cells = [f"{r['deferred']:6.1f} {r['eager']:6.1f} "
                     + (f"{r['fuse']:6.1f}" if r["fuse"] is not None else "     -")
                     for r in (row[n] for n in sizes)]
            print(f"{label:14s} " + " ".join(f"{c:>22s}" for c in cells))
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"break_even_us": {k: {str(n): r for n, r in v.items()}
                                             for k, v in res.items()}}, f, indent=1)
        return
    res = measure(a.n, a.calls, a.min_size)
    print(f"host µs per call, n={a.n} float32 (median of {a.calls}, GPU idle before each)")
    print(f"{'case':22s} {'fusion on':>10s} {'fusion off':>10s} {'cupy':>8s}")
    for label, row in res.items():
        print(f"{label:22s} {row['fusion on']:10.2f} {row['fusion off']:10.2f} {row['cupy']:8.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"n": a.n, "min_size": a.min_size, "host_us": res}, f, indent=1)


if __name__ == "__main__":
    main()
