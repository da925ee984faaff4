"""Where the 10^8 float32 cumulative_sum loses time outside its kernel (session 5 probe).

Session 4: the kernel takes 257 µs under ncu, a call 317 µs in a back-to-back stream and
61.6 µs of host time. This times, on one GPU, in one process (medians, µs per call):

- the kernel alone: the call's launch plan replayed on a preallocated output;
- the call, its result dropped at once / kept alive until the next call;
- cupy.empty of the output size, torch.cumsum and cuda.compute's scan (when installed);

each as "alone" (event, call, event, sync), "stream" (30 calls back to back between two
events) and "host" (wall time of one call after a sync).  Run on the GPU machine:
``python scripts/scan_gap_probe.py``.
"""
import statistics

import cupy as cp

import forge_array as xp
from bench.hosttime import event_us, host_us
from forge_array.primitives import scan as pscan


def timings(fn, reps=30):
    start, end = cp.cuda.Event(), cp.cuda.Event()
    stream = []
    for _ in range(5):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        stream.append(cp.cuda.get_elapsed_time(start, end) * 1e3 / reps)
    return event_us(fn, reps), statistics.median(stream), host_us(fn, reps)


def main():
    n = 10**8
    raw = cp.random.random(n, dtype=cp.float32) + 0.5
    x = xp.asarray(raw)
    xp.cumulative_sum(x)  # compiles and leaves the plan
    plans = pscan._fast_plans()
    plan = next(p for p in plans.values() if p.shape == (n,))
    out = cp.empty(n, dtype=cp.float32)
    src = (pscan._buf_at(raw, plan.in_off),)
    dst = (pscan._buf_at(out, plan.out_off),)
    kept = [None]

    def keep():
        kept[0] = xp.cumulative_sum(x)

    cases = [
        ("kernel only (plan.launch, preallocated)", lambda: plan.launch(src, dst)),
        ("xp.cumulative_sum, result dropped", lambda: xp.cumulative_sum(x)),
        ("xp.cumulative_sum, result kept", keep),
        ("cupy.empty(n, float32)", lambda: cp.empty(n, dtype=cp.float32)),
        ("cupy.cumsum", lambda: cp.cumsum(raw)),
    ]
    try:
        import torch

        t = torch.as_tensor(raw, device="cuda")
        tout = torch.empty_like(t)
        cases.append(("torch.cumsum", lambda: torch.cumsum(t, 0)))
        cases.append(("torch.cumsum(out=)", lambda: torch.cumsum(t, 0, out=tout)))
    except ImportError:
        pass
    try:
        from bench import common, harness

        ctx = harness.GpuBackend(quick=False)
        cases.append(("cuda.compute inclusive_scan (bench builder)",
                      common.cc_inclusive_scan(ctx, "PLUS")(raw)))
    except Exception as e:  # noqa: BLE001
        print("cuda.compute unavailable:", type(e).__name__, e)
    print(f"{'case':48s} {'alone':>8s} {'stream':>8s} {'host':>8s}  (µs)")
    for name, fn in cases:
        try:
            for _ in range(3):
                fn()
            a, s, h = timings(fn)
            print(f"{name:48s} {a:8.1f} {s:8.1f} {h:8.1f}", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"{name:48s} failed: {type(e).__name__}: {e}", flush=True)
    print("plan: grid", plan.grid, "block", plan.block, "ntiles", plan.ntiles)


if __name__ == "__main__":
    main()
