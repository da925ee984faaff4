"""Where small full reductions and mapreduce spend host time on the GPU machine (session 8
probe): host µs per call (synchronised before each call) and event-timed µs per call (the
bench's method) of our sum / mapreduce against CuPy, then a cProfile of our small sum."""
import cupy as cp

import forge_array as xp
from bench.hosttime import event_us, host_us, profile_calls
from forge_array import ops


def _square(v):
    return v * v


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
x = xp.asarray(cp.random.random(1000, dtype=cp.float32))
profile_calls(lambda: xp.sum(x), top=25)
