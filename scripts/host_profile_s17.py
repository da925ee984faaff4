"""Session 17 probe: where our host time goes on the GPU machine (cProfile of repeated calls,
by own time) for a small full sum and the n*p = 10^7 products that trail PyTorch by a few µs,
then event-timed µs (idle GPU / behind a busy GPU / host) of the same calls beside PyTorch."""
import cupy as cp
import torch

import forge_array as xp
from bench.hosttime import event_us, host_us, matvec_calls, profile_calls

x = xp.asarray(cp.random.random(1000, dtype=cp.float32))
tx = torch.as_tensor(cp.asarray(x), device="cuda")
cases = [("sum 1e3", lambda: xp.sum(x), lambda: tx.sum())]
for n, p in ((10**3, 10**4), (10**4, 10**3), (10**5, 100)):
    cases += [(f"{lab} ({n:.0e},{p:.0e})", ours, theirs) for lab, ours, theirs in matvec_calls(n, p)]
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
