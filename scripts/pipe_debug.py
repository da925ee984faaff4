"""Session 12: run the pipelined scan with dynamic shared memory once and print any error."""
import json
import os
import traceback

os.environ["FORGE_ARRAY_TUNING"] = json.dumps({"scan": {"pipeline": True, "pipe_stages": 4}})
import cupy as cp  # noqa: E402

import forge_array as xp  # noqa: E402

try:
    x = cp.random.standard_normal(10**6, dtype=cp.float32)
    r = xp.cumulative_sum(xp.asarray(x))
    cp.cuda.runtime.deviceSynchronize()
    print("maxerr", float(cp.abs(r - cp.cumsum(x.astype(cp.float64))).max()))
except Exception:
    traceback.print_exc()
