"""Session 13: how deep do the look-backs of the 1-D scans go? For each configuration (a
fresh process with FORGE_ARRAY_SCAN_COUNT=1, so the kernels count look-back windows that
found no PREFIX and reads of unpublished predecessors), the windows and spins per tile and
per call, next to the median µs of 10 event-timed calls (slowed by the counting atomics:
compare the counts, not the times, with bench runs)."""
import json
import os
import subprocess
import sys

CODE = r"""
import cupy as cp, numpy as np
import forge_array as xp
from forge_array.primitives import scan as pscan
n, dt = @N@, np.dtype(@DT@)
x = xp.asarray(cp.random.standard_normal(n).astype(dt))
for _ in range(3):
    xp.cumulative_sum(x)
cp.cuda.runtime.deviceSynchronize()
s0 = pscan.scan_statistics()
a, b = cp.cuda.Event(), cp.cuda.Event()
ts = []
for _ in range(10):
    a.record(); xp.cumulative_sum(x); b.record(); b.synchronize()
    ts.append(cp.cuda.get_elapsed_time(a, b) * 1e3)
s1 = pscan.scan_statistics()
p = list(pscan._fast_plans().values())[0]
tiles = p.tail[0] if getattr(p, "tail", None) else getattr(p, "ntiles", 0)
agg = (s1["agg_steps"] - s0["agg_steps"]) / 10
spins = (s1["spins"] - s0["spins"]) / 10
print(f"{p.kernel.name:28s} grid {p.grid:6d} tiles {tiles:8d} windows/tile {agg / max(tiles, 1):7.3f} "
      f"spins/tile {spins / max(tiles, 1):8.3f} median {sorted(ts)[5]:8.1f} us")
"""

CONFIGS = [
    ("tables", {}),
    ("pipeline 9x4", {"scan": {"pipe_min": 0}}),
    ("pipeline 13x4", {"scan": {"pipe_min": 0, "pipe_vectors": 13}}),
    ("pipeline 9x6", {"scan": {"pipe_min": 0, "pipe_stages": 6}}),
]
for n in (10**8, 10**9):
    for dt in ("float32",):
        for name, cfg in CONFIGS:
            env = dict(os.environ, FORGE_ARRAY_TUNING=json.dumps(cfg), FORGE_ARRAY_SCAN_COUNT="1",
                       FORGE_ARRAY_CACHE_DIR="/tmp/forge-array-count-cache")
            code = CODE.replace("@N@", str(n)).replace("@DT@", repr(dt))
            try:
                out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                     text=True, timeout=150)
                line = (out.stdout + out.stderr).strip().splitlines()[-1:]
            except subprocess.TimeoutExpired:
                line = ["timeout"]
            print(f"n={n:.0e} {dt} {name:18s}", *line, flush=True)
