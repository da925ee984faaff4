"""compile, part ``operators``: what a new user operator costs to compile.

A script of generic operations with the user's own Python operators (``reduce``,
``accumulate``, ``mapreduce``, ``matvec`` / ``vecmat`` with a Python map; float32, float64,
int32, int64; operators that return their operands' type and ones that widen it) runs in a
fresh process with an empty kernel cache and ``FORGE_ARRAY_COMPILE=sync``, once per row:

- ``linked, shipped skeletons``: the default (operator linking on, the package's archive
  with the skeletons of the warmup's stand-in operators);
- ``linked, no archive``: ``FORGE_ARRAY_PREBUILT=0``: skeletons only from this process's own
  full builds (the first operator of a kernel builds in full, later ones link);
- ``full builds``: ``FORGE_ARRAY_LINK=0``: every specialisation a full numba build.

Per call: wall seconds of the first call, the kernels it built (``runtime.STATS``'s
``compiled``), how many of them were linked, their compile seconds, and a checksum of the
result, which must agree in every row (a linked kernel's PTX is the full build's).
The summary is the median compile seconds per new specialisation; results must agree exactly
for integers and within 1e-6 for floats (a float scan's decoupled look-back may combine the
same values in another order from run to run).

    python -m bench.suite_compile --parts operators
"""

from __future__ import annotations

import statistics
import tempfile

_SCRIPT = r'''
import json, sys, time
import numpy as np
import cupy as cp
import forge_array as xp
from forge_array import ops
from forge_array.runtime import STATS
rng = np.random.default_rng(0)

def vec(n, dt):
    return xp.asarray(cp.asarray((rng.random(n) * 8 + 1).astype(dt)))

def mat(shape, dt):
    return xp.asarray(cp.asarray((rng.random(shape) * 8 + 1).astype(dt)))

k = 0.5
n, shape = 1_000_000, (1000, 1000)
cases = [
    ("reduce a+b", "float32", lambda x: xp.reduce(lambda a, b: a + b, x)),
    ("reduce max", "float32", lambda x: xp.reduce(lambda a, b: max(a, b), x)),
    ("reduce absmax", "float32", lambda x: xp.reduce(lambda a, b: a if abs(a) > abs(b) else b, x)),
    ("reduce a+b", "float64", lambda x: xp.reduce(lambda a, b: a + b, x)),
    ("reduce min", "float64", lambda x: xp.reduce(lambda a, b: min(a, b), x)),
    ("reduce a+b", "int32", lambda x: xp.reduce(lambda a, b: a + b, x)),
    ("reduce xor", "int64", lambda x: xp.reduce(lambda a, b: a ^ b, x)),
    ("reduce a+k*b (widens)", "float32", lambda x: xp.reduce(lambda a, b: a + k * b, x)),
    ("reduce a*k+b (widens)", "float32", lambda x: xp.reduce(lambda a, b: a * k + b, x)),
    ("accumulate a+b", "float32", lambda x: xp.accumulate(lambda a, b: a + b, x)),
    ("accumulate max", "float32", lambda x: xp.accumulate(lambda a, b: max(a, b), x)),
    ("accumulate a*b", "float64", lambda x: xp.accumulate(lambda a, b: a * b, x)),
    ("accumulate or", "int64", lambda x: xp.accumulate(lambda a, b: a | b, x)),
    ("mapreduce v*v, a+b", "float32", lambda x: xp.mapreduce(lambda v: v * v, lambda a, b: a + b, x)),
    ("mapreduce |v|, max", "float64", lambda x: xp.mapreduce(lambda v: abs(v), lambda a, b: max(a, b), x)),
    ("matvec min-plus", "float32", lambda A: xp.matvec(A, A[0], f=lambda w, v: w + v, op=ops.minimum)),
    ("vecmat min-plus", "float64", lambda A: xp.vecmat(A[0], A, f=lambda w, v: w + v, op=ops.minimum)),
    ("matvec sum of w*v*v", "float32", lambda A: xp.matvec(A, A[0], f=lambda w, v: w * v * v, op=ops.add)),
    ("matvec max-times", "float32", lambda A: xp.matvec(A, A[0], f=lambda w, v: w * v, op=ops.maximum)),
]
out = []
t_all = time.perf_counter()
for label, dt, call in cases:
    x = mat(shape, dt) if label.startswith(("matvec", "vecmat")) else vec(n, dt)
    c0, l0, s0 = STATS["compiled"], STATS["linked"], STATS["compile_seconds"]
    t = time.perf_counter()
    r = call(x)
    host = np.from_dlpack(xp.asarray(r, device="cpu")).astype(np.float64)
    wall = time.perf_counter() - t
    out.append({"case": label, "dtype": dt, "wall_s": wall, "kernels": STATS["compiled"] - c0,
                "linked": STATS["linked"] - l0, "compile_s": STATS["compile_seconds"] - s0,
                "checksum": float(np.sum(host[np.isfinite(host)])) if host.size else 0.0})
print(json.dumps({"calls": out, "script_s": time.perf_counter() - t_all,
                  "link_failures": STATS["link_failures"], "prebuilt_hits": STATS["prebuilt_hits"]}))
'''

ROWS = (("linked, shipped skeletons", {}), ("linked, no archive", {"FORGE_ARRAY_PREBUILT": "0"}),
        ("full builds", {"FORGE_ARRAY_LINK": "0"}))


def run_operators(_args=None) -> dict:
    """Run the script once per row in fresh processes with empty caches."""
    from .common import fresh_env, run_script

    rows = {}
    for label, extra in ROWS:
        with tempfile.TemporaryDirectory() as root:
            r = run_script(_SCRIPT, [], fresh_env(root, FORGE_ARRAY_COMPILE="sync", **extra))
        per = [c["compile_s"] / c["kernels"] for c in r["calls"] if c["kernels"]]
        r["median_per_kernel_s"] = statistics.median(per) if per else None
        r["kernels"] = sum(c["kernels"] for c in r["calls"])
        r["linked"] = sum(c["linked"] for c in r["calls"])
        rows[label] = r
        print(f"operators {label}: {r['kernels']} kernels ({r['linked']} linked), median "
              f"{(r['median_per_kernel_s'] or 0):.3f} s per kernel, script {r['script_s']:.1f} s", flush=True)
    base = rows["full builds"]["calls"]
    for label, r in rows.items():
        # integers exact; floats within 1e-6 (a float scan's look-back may combine the same
        # values in another order from run to run)
        r["same_results"] = all(abs(a["checksum"] - b["checksum"])
                                <= (1e-6 * max(1.0, abs(b["checksum"])) if b["dtype"].startswith("float") else 0)
                                for a, b in zip(r["calls"], base))
    return {"rows": rows}


def report_operators(res: dict) -> list:
    """The markdown section of the part's results."""
    rows = res["rows"]
    labels = list(rows)
    lines = ["## A new user operator", "",
             "A script of generic operations with the user's own Python operators, fresh process, empty kernel "
             "cache, `FORGE_ARRAY_COMPILE=sync`; per call: compile seconds (kernels built, of them linked).", "",
             "| call | dtype | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    for i, c in enumerate(rows[labels[0]]["calls"]):
        cells = []
        for label in labels:
            d = rows[label]["calls"][i]
            cells.append(f"{d['compile_s']:.2f} ({d['kernels']}, {d['linked']} linked)")
        lines.append(f"| {c['case']} | {c['dtype']} | " + " | ".join(cells) + " |")
    lines += ["", "| row | kernels | linked | median s per kernel | script s | same results as full builds | "
              "link failures |", "|---|---|---|---|---|---|---|"]
    for label, r in rows.items():
        med = r["median_per_kernel_s"]
        lines.append(f"| {label} | {r['kernels']} | {r['linked']} | {'-' if med is None else f'{med:.3f}'} | "
                     f"{r['script_s']:.1f} | {'yes' if r['same_results'] else 'NO'} | {r['link_failures']} |")
    return lines + [""]
