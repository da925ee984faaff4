import cProfile, pstats, time
import cupy as cp
import forge_array as xp
from bench import suite_fusion as sf

x = xp.asarray(cp.random.rand(10**6, dtype=cp.float32))
y = xp.asarray(cp.random.rand(10**6, dtype=cp.float32))
fs = {name: xp.fuse(lambda *a, fn=fn: fn(xp, *a)) for name, fn in
      [("sum_xy1", sf._sum_xy1), ("lse", sf._logsumexp), ("centred", sf._centred),
       ("stats", sf._stats), ("axpby", sf._axpby)]}
args = {"sum_xy1": (x, y), "lse": (x,), "centred": (x,), "stats": (x,), "axpby": (x, y)}
def host(fn, n=3000):
    for _ in range(50): fn()
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(n): fn()
    t1 = time.perf_counter()
    cp.cuda.Device().synchronize()
    return (t1 - t0) / n * 1e6
print("plain sum", host(lambda: xp.sum(x)))
print("cupy broadcast_to 0-d", host(lambda: cp.broadcast_to(x._array[0], (10**6,))))
print("cupy empty", host(lambda: cp.empty(1, cp.float32)))
for k, f in fs.items():
    a = args[k]
    print(k, host(lambda: f(*a)))
for k in ("sum_xy1", "lse"):
    f, a = fs[k], args[k]
    pr = cProfile.Profile(); pr.enable()
    for _ in range(3000): f(*a)
    pr.disable(); cp.cuda.Device().synchronize()
    pstats.Stats(pr).sort_stats("tottime").print_stats(14)
