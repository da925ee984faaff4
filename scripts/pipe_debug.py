"""Session 12: run the pipelined scan under several settings once each and print errors."""
import json
import subprocess
import sys

CODE = """
import cupy as cp, traceback
import forge_array as xp
from forge_array.primitives import scan as pscan
try:
    x = cp.random.standard_normal(N, dtype=cp.float32)
    r = xp.cumulative_sum(xp.asarray(x))
    cp.cuda.runtime.deviceSynchronize()
    p = list(pscan._fast_plans().values())[0]
    err = float(cp.abs(r - cp.cumsum(x.astype(cp.float64))).max())
    print("maxerr", err, p.kernel.name, p.shared, p.grid, p.block, dict(p.kernel._dyn))
except Exception as e:
    print("ERROR", repr(e)[:300])
"""
for cfg, n in [({"pipe_stages": 3}, 10**6), ({"pipe_stages": 3, "pipe_dynamic": True}, 10**6),
               ({"pipe_stages": 3, "pipe_dynamic": True}, 3000), ({"pipe_stages": 4}, 3000),
               ({"pipe_stages": 4}, 10**6), ({"pipe_stages": 4, "pipe_blocks_per_sm": 1}, 10**6)]:
    env = {"FORGE_ARRAY_TUNING": json.dumps({"scan": dict(cfg, pipeline=True)})}
    import os
    out = subprocess.run([sys.executable, "-c", CODE.replace("N", str(n))], env=dict(os.environ, **env),
                         capture_output=True, text=True, timeout=120)
    print(cfg, n, (out.stdout + out.stderr).strip().splitlines()[-1:])
