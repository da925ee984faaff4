"""Session 14: the timeline of one pipelined 1-D scan (FORGE_ARRAY_SCAN_TRACE=1: every tile
stamps %globaltimer when its ticket is taken, when its state is published, when its look-back
ends and when its store has left the buffer). Where do the ~20 µs go that the kernel takes
beyond its bandwidth slope (237 µs at 1e8 float32 under ncu, 2.21 ms at 1e9)? Prints, per
case: the timer's resolution, the kernel's span against the event time of the same call,
the phases of a tile (first wave, steady state, last wave), when the first stores complete,
how the end drains, and the bytes stored per 10 µs window (TB/s)."""
import os
import sys

os.environ["FORGE_ARRAY_SCAN_TRACE"] = "1"
os.environ.setdefault("FORGE_ARRAY_CACHE_DIR", "/tmp/forge-array-trace-cache")

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

import forge_array as xp  # noqa: E402
from forge_array.kernels import scan as kscan  # noqa: E402
from forge_array.kernels import scan_pipeline as kpipe  # noqa: E402
from forge_array.primitives import scan as pscan  # noqa: E402

assert kpipe.TRACE


def pct(a, q):
    return float(np.percentile(a, q)) / 1e3 if len(a) else float("nan")


def phases(name, s):
    if not len(s):
        return
    lat = [s[:, 1] - s[:, 0], s[:, 2] - s[:, 1], s[:, 3] - s[:, 2], s[:, 3] - s[:, 0]]
    cells = "  ".join(f"{pct(v, 50):6.2f}/{pct(v, 90):6.2f}" for v in lat)
    print(f"  {name:12s} ticket->published  published->prefix  prefix->stored  ticket->stored "
          f"(median/p90 µs)\n  {'':12s} {cells}")


def run(n, dt, rounds=3):
    x = xp.asarray(cp.random.standard_normal(n).astype(dt))
    for _ in range(3):
        xp.cumulative_sum(x)
    cp.cuda.runtime.deviceSynchronize()
    plan = [p for p in pscan._fast_plans().values() if "pipeline" in p.kernel.name]
    if not plan:
        print(f"n={n:.0e} {dt}: no pipelined plan (tables: pipe_min?)")
        return
    p = plan[-1]
    ntiles, grid = p.tail[0], p.grid
    tile = n // ntiles + 1
    a, b = cp.cuda.Event(), cp.cuda.Event()
    for r in range(rounds):
        a.record()
        xp.cumulative_sum(x)
        b.record()
        b.synchronize()
        ev = cp.cuda.get_elapsed_time(a, b) * 1e3
        c = p.state.counter.get()
        s = c[kscan.STAT_WORDS:kscan.STAT_WORDS + kpipe.TRACE_STAMPS * ntiles].reshape(ntiles, -1)
        blk = s[:, 4].astype(np.int64)
        st = s[:, :4].astype(np.int64)
        t0 = st[:, 0].min()
        st = st - t0
        span = st[:, 3].max()
        allst = np.sort(st[:, :4].ravel())
        d = np.diff(allst)
        res = d[d > 0].min() if (d > 0).any() else 0
        print(f"\nn={n:.0e} {dt} round {r}: {ntiles} tiles of ~{tile}, grid {grid}; event {ev:.1f} µs, "
              f"stamped span {span / 1e3:.1f} µs (timer step {res} ns)")
        ids = np.arange(ntiles)
        phases("first wave", st[ids < grid])
        phases("steady", st[(ids >= grid) & (ids < ntiles - grid)])
        phases("last wave", st[ids >= ntiles - grid])
        first_store = np.array([st[blk == k, 3].min() for k in range(grid) if (blk == k).any()])
        last_store = np.array([st[blk == k, 3].max() for k in range(grid) if (blk == k).any()])
        per_block = np.bincount(blk, minlength=grid)
        print(f"  first store of a block: min {first_store.min() / 1e3:.2f} median "
              f"{np.median(first_store) / 1e3:.2f} max {first_store.max() / 1e3:.2f} µs; "
              f"first published at {st[:, 1].min() / 1e3:.2f}, first prefix (t>0) "
              f"{st[1:, 2].min() / 1e3:.2f}")
        print(f"  last ticket taken at {st[:, 0].max() / 1e3:.2f} µs; blocks end between "
              f"{last_store.min() / 1e3:.2f} and {last_store.max() / 1e3:.2f} (median "
              f"{np.median(last_store) / 1e3:.2f}); tiles per block {per_block.min()}..{per_block.max()}")
        order = np.argsort(st[:, 3])[::-1][:6]
        print("  latest stores: " + "; ".join(
            f"tile {t} blk {blk[t]} @ {st[t, 0] / 1e3:.1f}/{st[t, 1] / 1e3:.1f}/{st[t, 2] / 1e3:.1f}/"
            f"{st[t, 3] / 1e3:.1f}" for t in order))
        late = blk[order[0]]
        mine = np.nonzero(blk == late)[0][-6:]
        print(f"  block {late}'s last tiles (ticket/published/prefix/stored µs): " + "; ".join(
            f"{t}: {st[t, 0] / 1e3:.1f}/{st[t, 1] / 1e3:.1f}/{st[t, 2] / 1e3:.1f}/{st[t, 3] / 1e3:.1f}"
            for t in mine))
        lat = st[:, 3] - st[:, 0]
        print(f"  ticket->stored max {lat.max() / 1e3:.1f} µs (tile {lat.argmax()}), p99 "
              f"{pct(lat, 99):.1f}; tiles ending after the median block end: "
              f"{int((st[:, 3] > np.median(last_store)).sum())}")
        w = 10_000
        edges = np.arange(0, span + w, w)
        stored = np.histogram(st[:, 3], edges)[0] * tile * np.dtype(dt).itemsize * 2
        print("  TB/s (read+write of the tiles stored) per 10 µs: "
              + " ".join(f"{v / w * 1e-3:.2f}" for v in stored))


CASES = [(int(float(a)), b) for a, b in (c.split(":") for c in os.environ.get(
    "TRACE_CASES", "1e8:float32,1e9:float32,1e8:float64").split(","))]
for n, dt in CASES:
    try:
        run(n, dt, rounds=2 if n >= 10**9 else 3)
    except Exception as exc:  # a probe: report and go on
        print(f"n={n:.0e} {dt}: {type(exc).__name__}: {exc}", file=sys.stderr)
