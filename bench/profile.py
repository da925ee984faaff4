"""Profile chosen bench cases under Nsight Compute: one call of each implementation.

Builds the cases of ``bench.run`` (same inputs, same builders), warms every chosen
implementation up (compilation, plans, temporary storage) and then runs each once between
``cudaProfilerStart`` / ``cudaProfilerStop``, so that ``ncu --profile-from-start off``
profiles exactly those kernels. Without ncu it still runs (a smoke test of the selection).

Usage (on the GPU machine)::

    ncu --profile-from-start off --clock-control none --section LaunchStats \\
        --section Occupancy --section SpeedOfLight --section WarpStateStats \\
        python -m bench.profile --suite scan --filter "cumulative_sum float32" \\
        --sizes 1e8 --impls forge_array,torch,cuda.compute

    python -m bench.profile --list --suite matvec --sizes 1e8
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import harness
from .common import Sizes


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", required=True, help="comma-separated suites of bench.run")
    p.add_argument("--sizes", default=None, help="sizes of the size sweeps, e.g. 1e8")
    p.add_argument("--filter", default=None,
                   help="semicolon-separated substrings: cases whose label contains one")
    p.add_argument("--exact", action="store_true", help="--filter names whole labels")
    p.add_argument("--impls", default="forge_array",
                   help="comma-separated implementation names (default forge_array)")
    p.add_argument("--calls", type=int, default=1, help="profiled calls of each (default 1)")
    p.add_argument("--list", action="store_true", help="list the selected cases and exit")
    p.add_argument("--timing", action="store_true",
                   help="no profiler: per implementation, the median µs of a call timed alone "
                        "(events around one call, then a sync: bench.run's way), of a call "
                        "in a back-to-back stream of calls, and of the host's time per call")
    return p.parse_args(argv)


def select(cases, filt: str | None, exact: bool):
    """The cases whose label matches one of the semicolon-separated ``filt`` (all if None):
    labels hold commas, e.g. ``sum axis=0 float32 (1e4,1e4)``.

    >>> from bench.harness import Case
    >>> cs = [Case("s", "sum float32", 10, 40, None, {}), Case("s", "max float32", 10, 40, None, {})]
    >>> [c.label for c in select(cs, "sum", False)], [c.label for c in select(cs, "max", True)]
    (['sum float32 n=10'], [])
    """
    if not filt:
        return list(cases)
    keys = [f.strip() for f in filt.split(";") if f.strip()]
    if exact:
        return [c for c in cases if c.label in keys]
    return [c for c in cases if any(k in c.label for k in keys)]


def timings(ctx, fn, reps: int = 30):
    """Median µs of one call timed alone (events, then a sync), of one call in a stream of
    ``reps`` back-to-back calls (host and GPU overlap), and of the host's part of a call."""
    import statistics
    import time

    cp = ctx.xp
    start, end = cp.cuda.Event(), cp.cuda.Event()
    alone = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        alone.append(cp.cuda.get_elapsed_time(start, end) * 1e3)
    streams = []
    for _ in range(3):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        streams.append(cp.cuda.get_elapsed_time(start, end) * 1e3 / reps)
    host = []
    for _ in range(reps):
        ctx.sync()
        t0 = time.perf_counter()
        fn()
        host.append((time.perf_counter() - t0) * 1e6)
    ctx.sync()
    return statistics.median(alone), statistics.median(streams), statistics.median(host)


def main(argv=None) -> int:
    args = parse_args(argv)
    ctx = harness.GpuBackend(quick=False)
    sizes = [int(float(s)) for s in args.sizes.split(",")] if args.sizes else None
    ctx.sizes = Sizes(dry_run=False, quick=False, override=sizes)
    cases = []
    for suite in args.suite.split(","):
        mod = importlib.import_module(f"bench.suite_{suite.strip()}")
        cases += mod.cases(ctx)
    cases = select(cases, args.filter, args.exact)
    impls = [s.strip() for s in args.impls.split(",") if s.strip()]
    if args.list:
        for c in cases:
            print(c.label, "|", ", ".join(c.impls))
        return 0
    runtime = ctx.xp.cuda.runtime
    if args.timing:
        print(f"{'case':45s} {'impl':14s} {'alone µs':>9s} {'stream µs':>9s} {'host µs':>8s}")
    for case in cases:
        inputs = case.make_inputs(0)
        fns = []
        for name in impls:
            if name not in case.impls:
                continue
            impl = case.impls[name]
            builder = impl.builder if isinstance(impl, harness.Impl) else impl
            try:
                fn = builder(*inputs)
            except harness.Skip as exc:
                print(f"{case.label} | {name}: skipped ({exc})")
                continue
            for _ in range(3):
                fn()
            fns.append((name, fn))
        ctx.sync()
        if args.timing:
            for name, fn in fns:
                alone, stream, host = timings(ctx, fn)
                print(f"{case.label:45s} {name:14s} {alone:9.1f} {stream:9.1f} {host:8.1f}", flush=True)
            del inputs, fns
            ctx.release()
            continue
        runtime.profilerStart()
        for name, fn in fns:
            for _ in range(args.calls):
                fn()
            ctx.sync()
            print(f"profiled: {case.label} | {name}", flush=True)
        runtime.profilerStop()
        del inputs, fns
        ctx.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
