"""dask_reductions: several reductions of one ``dask.array`` in one graph
(``forge_array.dask.reductions``) against Dask's own reductions computed together
(``dask.compute(x.sum(axis), x.max(axis), x.std(axis))``), with CuPy patched and plain.

    python -m bench.dask_reductions --out "$OUT"                  # GPU: CuPy chunks
    python -m bench.dask_reductions --out /tmp/d --dry-run        # NumPy chunks, tiny

A ``(rows, 100)`` float32 array in chunks of ``rows // 10`` rows, persisted; the threaded
scheduler; wall time from the call to the device idle, median of ``--reps`` after two
unrecorded runs. Writes ``dask-reductions.json`` and ``.md`` under ``<out>/<device-slug>/``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from .backends import slug

NAMES = ["sum", "max", "std"]


def _timed(fn, sync, reps):
    ts = []
    for i in range(reps + 2):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        if i >= 2:
            ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.dask_reductions", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="results folder (a folder per device below it)")
    p.add_argument("--rows", type=float, default=2e7, help="rows of the (rows, 100) array")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--dry-run", action="store_true", help="NumPy chunks on the CPU, 10^4 rows")
    a = p.parse_args(argv)
    import dask
    import dask.array as da

    import forge_array.dask as fdask

    rows = 10**4 if a.dry_run else int(a.rows)
    if a.dry_run:
        import numpy as bk

        device = "cpu-dry-run"
        x = da.random.RandomState(1).random_sample((rows, 100), chunks=(rows // 10, 100))

        def sync():
            return None
    else:
        import cupy as bk

        device = bk.cuda.runtime.getDeviceProperties(0)["name"].decode()
        rs = da.random.RandomState(seed=1, RandomState=bk.random.RandomState)
        x = rs.random_sample((rows, 100), chunks=(rows // 10, 100))

        def sync():
            bk.cuda.Device().synchronize()
    x = x.astype("float32").persist()
    recs = []
    for axis in (0, None):
        def own():
            return dask.compute(*(getattr(x, n)(axis=axis) for n in NAMES), scheduler="threads")

        def ours():
            return dask.compute(*fdask.reductions(x, NAMES, axis=axis), scheduler="threads")

        row = {"axis": axis, "dask_plain_ms": _timed(own, sync, a.reps)}
        with fdask.patched():
            row["dask_patched_ms"] = _timed(own, sync, a.reps)
            row["reductions_ms"] = _timed(ours, sync, a.reps)
        recs.append(row)
        print(f"[dask_reductions] axis={axis}: " + ", ".join(f"{k} {v:.1f}" for k, v in row.items()
                                                          if k != "axis"), flush=True)
    meta = {"device": device, "command": "python -m bench.dask_reductions " + " ".join(argv or sys.argv[1:]),
            "shape": [rows, 100], "chunks": rows // 10, "reductions": NAMES}
    folder = os.path.join(a.out, slug(device))
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "dask-reductions.json"), "w") as f:
        json.dump({"meta": meta, "results": recs}, f, indent=1)
    lines = [f"# Several reductions of one dask.array on {device}", "",
             f"`{meta['command']}`: `sum`, `max`, `std` of a ({rows}, 100) float32 array in chunks "
             f"of {rows // 10} rows, threaded scheduler, ms (median).", "",
             "| axis | Dask's own, plain CuPy | Dask's own, CuPy patched | `forge_array.dask.reductions` |",
             "|---|---:|---:|---:|"]
    for r in recs:
        lines.append(f"| {r['axis']} | {r['dask_plain_ms']:.1f} | {r['dask_patched_ms']:.1f} | "
                     f"{r['reductions_ms']:.1f} |")
    with open(os.path.join(folder, "dask-reductions.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
