import os
os.environ["SCIPY_ARRAY_API"] = "1"; os.environ["FORGE_ARRAY_COMPILE"] = "sync"
import cProfile, pstats, time, statistics
import cupy as cp, sklearn, forge_array as xp
from forge_array.fusion import auto, evaluate
from forge_array.runtime import STATS
from sklearn.preprocessing import StandardScaler
sklearn.set_config(array_api_dispatch=True)
rng = cp.random.default_rng(0)
X = xp.asarray(rng.standard_normal((200000, 128), dtype=cp.float32), copy=True)
W = [0]
full = evaluate._settle_nodes
def walk(n, r):
    W[0] += 1
    return full(n, r)
evaluate._settle_nodes = walk
def fit():
    StandardScaler().fit(X).scale_._array
    cp.cuda.Device().synchronize()
for on in (True, False, True, False):
    auto.enable(on)
    for _ in range(3): fit()
    ts = []
    W[0] = 0; l0 = STATS["launches"]
    for _ in range(10):
        t = time.perf_counter(); fit(); ts.append((time.perf_counter() - t) * 1e3)
    print("fusion", on, "ms", round(statistics.median(ts), 2), "walks/fit", W[0] / 10, "our launches/fit", (STATS["launches"] - l0) / 10)
for on in (True, False):
    auto.enable(on)
    pr = cProfile.Profile(); pr.enable()
    for _ in range(20): fit()
    pr.disable()
    print("==== fusion", on)
    pstats.Stats(pr).sort_stats("tottime").print_stats(18)
