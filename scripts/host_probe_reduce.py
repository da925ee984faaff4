"""Where small full reductions and mapreduce spend host time on the GPU machine (session 8
probe): host µs per call (synchronised before each call) and event-timed µs per call (the
bench's method) of our sum / mapreduce against CuPy, then a cProfile of our small sum."""
import cProfile
import pstats
import statistics
import time

import cupy as cp

import forge_array as xp
from forge_array import ops


def _square(v):
    return v * v


def host_us(f, n=200):
    ts = []
    for _ in range(n):
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t) * 1e6)
    cp.cuda.Device().synchronize()
    return statistics.median(ts)


def event_us(f, n=200):
    s, e = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(n):
        s.record()
        f()
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e) * 1e3)
    return statistics.median(ts)


for n in (10**3, 10**5, 10**6, 10**8):
    c = cp.random.random(n, dtype=cp.float32)
    x = xp.asarray(c)
    cases = {"xp.sum": lambda: xp.sum(x), "cupy sum": lambda: c.sum(),
             "xp.mapreduce sq": lambda: xp.mapreduce(_square, ops.add, x),
             "cupy.empty": lambda: cp.empty((), cp.float32)}
    for name, f in cases.items():
        f()
        f()
        print(f"n={n:.0e} {name:16s} host {host_us(f):7.1f} us  event {event_us(f):7.1f} us")
c = cp.random.random(1000, dtype=cp.float32)
x = xp.asarray(c)
xp.sum(x)
pr = cProfile.Profile()
pr.enable()
for _ in range(3000):
    xp.sum(x)
pr.disable()
cp.cuda.Device().synchronize()
pstats.Stats(pr).sort_stats("tottime").print_stats(25)
