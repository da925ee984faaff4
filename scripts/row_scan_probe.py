"""Session 15: which kernel should take the rows of a batched scan? Axis-1 cumulative_sum of
float32 and float64 (ROW_PROBE_DTYPES; int32: summed into int64, the copy then of the input's
bytes only) matrices of ~10^8 elements with rows of ROW_PROBE_COLS elements
(default 1 500 to 10^5), for each tuning configuration of ROW_PROBE_CONFIGS (JSON list of
[name, overrides]; default: values of ``scan.pipe_row_tiles``, rows shorter than that many
pipelined tiles keep the tile scan), each in a fresh process; median µs of 20 event-timed
calls after warm-up, next to a device-to-device copy of the same bytes timed in the same
process (fraction of copy), and the kernel that ran. ROW_PROBE_CALLS (JSON list of keyword
dicts of ``xp.accumulate(xp.ops.add, x, axis=1, **kw)``, e.g. ``[{"include_initial": true},
{"reverse": true}]``; default: the plain cumulative_sum) adds call variants, each timed on
every shape."""
import json
import os
import subprocess
import sys

CODE = r"""
import cupy as cp, numpy as np
import forge_array as xp
from forge_array.primitives import scan as pscan
def med(f):
    for _ in range(3):
        f()
    a, b = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(20):
        a.record(); f(); b.record(); b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b) * 1e3)
    return sorted(ts)[10]
for dt in @DTYPES@:
    for cols in @COLS@:
        rows = 10**8 // cols
        if dt.startswith("int"):   # the namespace's default: int32 rows summed into int64
            x = xp.asarray(cp.random.randint(-100, 100, (rows, cols)).astype(dt))
        else:
            x = xp.asarray(cp.random.standard_normal((rows, cols)).astype(dt))
        y = cp.empty_like(x._array if hasattr(x, "_array") else x)
        src = x._array if hasattr(x, "_array") else x
        c = med(lambda: cp.copyto(y, src))
        for kw in @CALLS@:
            if kw is None:
                t = med(lambda: xp.cumulative_sum(x, axis=1))
            else:
                t = med(lambda: xp.accumulate(xp.ops.add, x, axis=1, **kw))
            p = list(pscan._fast_plans().values())[-1]
            name = "+".join(k for k, v in (kw or {}).items() if v) or "plain"
            print(f"{dt} ({rows},{cols}) {name:16s} {p.kernel.name:22s} {t:8.1f} us  copy {c:7.1f}"
                  f"  of copy {c / t:.2f}", flush=True)
            pscan._fast_plans().clear()
        del x, y, src
        pscan._fast_plans().clear()
"""

COLS = os.environ.get("ROW_PROBE_COLS", "1500,3000,5000,7000,10000,20000,100000")
DTYPES = os.environ.get("ROW_PROBE_DTYPES", "float32,float64").split(",")
CALLS = json.loads(os.environ.get("ROW_PROBE_CALLS", "null")) or [None]
CONFIGS = json.loads(os.environ.get("ROW_PROBE_CONFIGS", "null")) or [
    [f"pipe_row_tiles={t}", {"scan": {"pipe_row_tiles": t}}] for t in (16, 1, 0.5, 0.25)]
for name, cfg in CONFIGS:
    env = dict(os.environ, FORGE_ARRAY_TUNING=json.dumps(cfg))
    try:
        code = (CODE.replace("@COLS@", f"({COLS},)").replace("@DTYPES@", repr(tuple(DTYPES)))
                .replace("@CALLS@", repr(CALLS)))
        out = subprocess.run([sys.executable, "-c", code], env=env,
                             capture_output=True, text=True, timeout=150)
        lines = (out.stdout + out.stderr[-2000:]).strip().splitlines()
    except subprocess.TimeoutExpired:
        lines = ["timeout"]
    for line in lines:
        print(f"{name:24s}", line, flush=True)
