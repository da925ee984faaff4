"""Session 17 probe: where our host time goes on the GPU machine (cProfile of repeated calls,
by own time) for a small full sum and the n*p = 10^7 products that trail PyTorch by a few µs,
then event-timed µs (idle GPU / behind a busy GPU / host) of the same calls beside PyTorch."""
import itertools

import cupy as cp
import torch

import forge_array as xp
from bench.hosttime import event_us, host_us, profile_calls

x = xp.asarray(cp.random.random(1000, dtype=cp.float32))
tx = torch.as_tensor(cp.asarray(x), device="cuda")
cases = [("sum 1e3", lambda: xp.sum(x), lambda: tx.sum())]
for n, p in ((10**3, 10**4), (10**4, 10**3), (10**5, 100)):
    cAs = [cp.random.random((n, p), dtype=cp.float32) for _ in range(4)]
    cv, cu = cp.random.random(p, dtype=cp.float32), cp.random.random(n, dtype=cp.float32)
    As = itertools.cycle([xp.asarray(a) for a in cAs])
    tAs = itertools.cycle([torch.as_tensor(a, device="cuda") for a in cAs])
    v, u = xp.asarray(cv), xp.asarray(cu)
    tv, tu = torch.as_tensor(cv, device="cuda"), torch.as_tensor(cu, device="cuda")
    cases.append((f"A@x ({n:.0e},{p:.0e})", lambda As=As, v=v: next(As) @ v, lambda tAs=tAs, tv=tv: next(tAs) @ tv))
    cases.append((f"x@A ({n:.0e},{p:.0e})", lambda As=As, u=u: u @ next(As), lambda tAs=tAs, tu=tu: tu @ next(tAs)))
for label, ours, _ in cases:
    print(f"== cProfile {label}", flush=True)
    profile_calls(ours, 4000, 22)
print(f"{'case':24s} {'idle':>7s} {'busy':>7s} {'host':>7s}   torch {'idle':>7s} {'busy':>7s} {'host':>7s}")
for label, ours, theirs in cases:
    row = []
    for f in (ours, theirs):
        f()
        f()
        row += [event_us(f), event_us(f, busy=True), host_us(f)]
    print(f"{label:24s} {row[0]:7.1f} {row[1]:7.1f} {row[2]:7.1f}         {row[3]:7.1f} {row[4]:7.1f} {row[5]:7.1f}",
          flush=True)
