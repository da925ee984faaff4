import json, os, subprocess, sys, tempfile
SCRIPT = r'''
import time, sys, json
t0 = time.perf_counter()
import forge_array as xp, cupy as cp, numpy as np
from forge_array import _routing
from forge_array.runtime import stored, kernel_files, STATS
mode = sys.argv[1]
if mode == "hold":
    _routing.layer_ready = lambda: False
T = {}
def timed(name, fn):
    def w(*a, **k):
        t = time.perf_counter(); r = fn(*a, **k); T[name] = T.get(name, 0) + time.perf_counter() - t; return r
    return w
stored.environment = timed("environment", stored.environment)
stored._read_index = timed("read_index", stored._read_index)
kernel_files.load_function = timed("load_function", kernel_files.load_function)
stored.StoredLaunch.__call__ = timed("call", stored.StoredLaunch.__call__)
_routing._stored = timed("routing_stored", _routing._stored)
N = 10**5
rng = np.random.default_rng(0)
def arr(h): return xp.asarray(cp.asarray(h))
x32 = arr(rng.random(N, dtype=np.float32)); x64 = arr(rng.random(N))
side = int(N ** 0.5)
A = arr(rng.random((side, side), dtype=np.float32)); v = arr(rng.random(side, dtype=np.float32))
cp.cuda.runtime.deviceSynchronize()
calls = [("sum f32", lambda: xp.sum(x32)), ("sum f64", lambda: xp.sum(x64)), ("max", lambda: xp.max(x32)),
         ("mean+std", lambda: (xp.mean(x32), xp.std(x32))), ("cumulative_sum", lambda: xp.cumulative_sum(x32)),
         ("sum(axis=0)", lambda: xp.sum(A, axis=0)), ("sum(axis=1)", lambda: xp.sum(A, axis=1)),
         ("A @ v", lambda: A @ v), ("argmax", lambda: xp.argmax(x32))]
first = {}
for name, call in calls:
    t = time.perf_counter(); call(); cp.cuda.runtime.deviceSynchronize(); first[name] = round((time.perf_counter() - t) * 1e3, 2)
print(json.dumps({"mode": mode, "first_ms": first, "T_ms": {k: round(v * 1e3, 2) for k, v in T.items()},
                  "stored": STATS["stored_launches"], "numba": "numba" in sys.modules}))
'''
root = tempfile.mkdtemp()
env = dict(os.environ, FORGE_ARRAY_CACHE_DIR=os.path.join(root, "f"), CUPY_CACHE_DIR=os.path.join(root, "c"))
def run(mode, **extra):
    e = dict(env, **extra)
    r = subprocess.run([sys.executable, "-c", SCRIPT, mode], env=e, capture_output=True, text=True, timeout=300)
    print(r.stdout.strip() or r.stderr[-2000:], flush=True)
run("fill", FORGE_ARRAY_COMPILE="sync")
for _ in range(2):
    run("default")
    run("hold")
