"""moments: ``var`` / ``std`` along an axis of float32 matrices, by the shifted float64 sums and
by Welford triples, beside the copy roofline, CuPy and PyTorch, same run (GPU machine).

    python -m bench.suite_moments --out "$OUT"
    python -m bench.suite_moments --shapes 20000000x100,200000x128 --reps 20

Per shape ``(rows, cols)`` float32 (standard normal * 3 + 100), ``std(axis=0)`` and
``std(axis=1)`` timed as forge_array picks (``default``), with the shifted sums forced
(``shifted``: the ``moments`` tuning's ``shifted_min`` 0) and with Welford triples forced
(``welford``: ``shifted_min`` above the size), ``torch.std(correction=0)`` on the same
memory, CuPy's ``std`` and ``mean(axis=0)`` (forge_array's, one pass at the read rate).
CUDA-event medians of ``--reps`` calls after two warm-up calls, in µs; ``of copy`` is the
bytes read per second over a device-to-device copy's (read + write) rate of the same
matrix. ``err`` is the largest relative difference from the float64 result. The crossing of
``default`` between the two is the ``moments`` tuning's ``shifted_min``. Writes
``moments.json`` and ``moments.md`` under ``<out>/<device-slug>/``.
"""

from __future__ import annotations

import argparse
import json
import os

from .hosttime import event_us
from .report import write_named

SHAPES = ((20_000_000, 100), (1_000_000, 100), (200_000, 128), (1_000_000, 16), (100_000, 1000),
          (10_000, 100), (1000, 1000))


def _time(cp, fn, reps):
    """CUDA-event median µs of ``fn()`` after two warm-up calls."""
    for _ in range(2):
        fn()
    return event_us(fn, reps)


def measure(shapes, reps):
    """{shape label: {column: µs, ...}} for the shapes."""
    import cupy as cp

    import forge_array as xp

    try:
        import torch
    except ImportError:
        torch = None
    out = {}
    t = None
    for rows, cols in shapes:
        a = cp.random.default_rng(0).standard_normal((rows, cols), dtype=cp.float32) * 3 + 100
        x = xp.asarray(a)
        ref = {ax: a.astype(cp.float64).std(axis=ax) for ax in (0, 1)}
        copy_us = _time(cp, lambda: cp.copyto(cp.empty_like(a), a), reps)
        row = {"copy": copy_us}
        rate = 2 * a.nbytes / copy_us   # bytes per µs of the copy (read + write)
        for ax in (0, 1):
            for label, shifted_min in (("default", None), ("shifted", 0), ("welford", 1 << 62)):
                tuning = {} if shifted_min is None else {"moments": {"shifted_min": shifted_min}}
                with xp.flags(tuning=tuning):
                    us = _time(cp, lambda ax=ax: xp.std(x, axis=ax)._array, reps)
                    err = float(cp.max(cp.abs(xp.std(x, axis=ax)._array - ref[ax]) / ref[ax]))
                row[f"axis{ax} {label}"] = us
                row[f"axis{ax} {label} of copy"] = a.nbytes / us / rate
                row[f"axis{ax} {label} err"] = err
            row[f"axis{ax} cupy"] = _time(cp, lambda ax=ax: a.std(axis=ax), max(3, reps // 4))
            if torch is not None:
                t = torch.as_tensor(a, device="cuda")
                row[f"axis{ax} torch"] = _time(cp, lambda ax=ax: t.std(dim=ax, correction=0), reps)
            row[f"axis{ax} mean"] = _time(cp, lambda ax=ax: xp.mean(x, axis=ax)._array, reps)
        out[f"({rows}, {cols})"] = row
        print(f"({rows}, {cols})", json.dumps({k: round(v, 4) for k, v in row.items()}), flush=True)
        a = x = t = None   # the next shape's memory
        cp.get_default_memory_pool().free_all_blocks()
    return out


def report(res, device, commit):
    lines = [f"# var / std along an axis on {device}", "",
             f"`std(x, axis)` of float32 matrices, CUDA-event median µs (commit {commit}); "
             "`of copy`: bytes read per second over a device-to-device copy's rate; `err`: "
             "largest relative difference from float64.", "",
             "| shape | axis | default | shifted (of copy, err) | welford (of copy, err) | "
             "torch | cupy | mean |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for shape, r in res.items():
        for ax in (0, 1):
            p = f"axis{ax}"
            torch_us = r.get(f"{p} torch")
            lines.append(
                f"| {shape} | {ax} | {r[p + ' default']:.1f} | "
                f"{r[p + ' shifted']:.1f} ({r[p + ' shifted of copy']:.2f}, "
                f"{r[p + ' shifted err']:.1e}) | {r[p + ' welford']:.1f} "
                f"({r[p + ' welford of copy']:.2f}, {r[p + ' welford err']:.1e}) | "
                f"{'' if torch_us is None else f'{torch_us:.1f}'} | {r[p + ' cupy']:.1f} | "
                f"{r[p + ' mean']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--shapes", help="comma-separated ROWSxCOLS")
    ap.add_argument("--out", default="bench/results")
    a = ap.parse_args(argv)
    shapes = (tuple(tuple(int(v) for v in s.split("x")) for s in a.shapes.split(","))
              if a.shapes else SHAPES)
    import cupy as cp

    device = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    res = measure(shapes, a.reps)
    commit = os.environ.get("FORGE_ARRAY_GIT", "unknown")
    md = report(res, device, commit)
    print(md)
    write_named(a.out, device, "moments", {"device": device, "commit": commit, "reps": a.reps,
                                           "us": res}, md)


if __name__ == "__main__":
    main()
