"""Where the n*p = 10^7 matrix-vector time goes (session 16 probe): per shape and product,
event-timed µs from an idle GPU (the bench's method), behind a busy GPU (the kernels alone)
and host µs, for ours and PyTorch; the calls rotate over 4 copies of the matrix (160 MB) so
that, as in the bench, no call finds its input in L2."""
from bench.hosttime import event_us, host_us, matvec_calls

shapes = ((10, 10**6), (100, 10**5), (10**3, 10**4), (10**4, 10**3), (10**5, 100), (10**6, 10))
print(f"{'case':24s} {'idle':>7s} {'busy':>7s} {'host':>7s}   torch {'idle':>7s} {'busy':>7s} {'host':>7s}")
for n, p in shapes:
    for label, ours, theirs in matvec_calls(n, p):
        row = []
        for f in (ours, theirs):
            f()
            f()
            row += [event_us(f), event_us(f, busy=True), host_us(f)]
        print(f"({n:.0e},{p:.0e}) {label:10s} {row[0]:7.1f} {row[1]:7.1f} {row[2]:7.1f}   "
              f"      {row[3]:7.1f} {row[4]:7.1f} {row[5]:7.1f}", flush=True)
