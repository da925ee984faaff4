"""Run benchmark suites side by side: ``python -m bench.run --help``.

    python -m bench.run                              # all suites, full sizes
    python -m bench.run --suite reduce,scan --quick  # up to 10^8, fewer repetitions
    python -m bench.run --suite copy --sizes 1e6,1e8 --out "$OUT"
    python -m bench.run --dry-run                    # NumPy on the CPU, writes to /tmp

Results go to ``<out>/<device-slug>/``: ``<stem>.json`` (everything), ``<stem>.md``
(tables) and ``<stem>.png`` (bandwidth plots); ``<stem>`` is ``results`` for a run of
every suite, else ``results-<suites>``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

from . import harness
from .common import Sizes

SUITES = ("copy", "reduce", "scan", "matvec", "cupy_dropin", "fusion")
DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
DRY_RUN_OUT = "/tmp/forge_array_bench_dry_run"


def _parse_sizes(text: str | None) -> list[int] | None:
    if not text:
        return None
    out = []
    for tok in text.replace(" ", "").split(","):
        if not tok:
            continue
        out.append(int(float(tok)) if ("e" in tok.lower() or "." in tok) else int(tok))
    return sorted(set(out))


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", default=",".join(SUITES),
                   help=f"comma-separated suites (default: all of {','.join(SUITES)})")
    p.add_argument("--sizes", default=None,
                   help="sizes of the size sweeps, e.g. 1e3,1e6,1e9 (default 10^3..10^9)")
    p.add_argument("--quick", action="store_true",
                   help="stop at 10^8 elements and halve the repetitions")
    p.add_argument("--out", default=None,
                   help=f"results folder; files go to OUT/<device-slug>/ (default {DEFAULT_OUT})")
    p.add_argument("--stem", default=None, help="file name stem (default: results[-suites])")
    p.add_argument("--filter", default=None,
                   help="comma-separated substrings: run only cases whose label contains one")
    p.add_argument("--impls", default=None,
                   help="comma-separated substrings: run only matching implementations")
    p.add_argument("--reps-scale", type=float, default=1.0,
                   help="multiply the repetition counts (default 1)")
    p.add_argument("--no-check", action="store_true",
                   help="skip comparing each output with the reference implementation")
    p.add_argument("--no-plot", action="store_true", help="write JSON and markdown only")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--dry-run", action="store_true",
                   help=f"NumPy on the CPU with wall-clock timing and tiny sizes; "
                        f"writes to {DRY_RUN_OUT} unless --out is given")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    suites = [s.strip() for s in args.suite.split(",") if s.strip()]
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        print(f"unknown suite(s) {unknown}; choose from {SUITES}", file=sys.stderr)
        return 2
    if args.dry_run:
        ctx = harness.CpuBackend(quick=args.quick, reps_scale=args.reps_scale)
    else:
        try:
            ctx = harness.GpuBackend(quick=args.quick, reps_scale=args.reps_scale)
        except Exception as exc:
            print(f"no GPU backend ({harness._short_error(exc)}); use --dry-run on a machine "
                  "without CuPy", file=sys.stderr)
            return 2
    ctx.sizes = Sizes(ctx.dry_run, args.quick, _parse_sizes(args.sizes))

    filters = [f for f in (args.filter or "").split(",") if f]
    impls = [f for f in (args.impls or "").split(",") if f] or None
    runner = harness.Runner(ctx, check=not args.no_check, impl_filter=impls)
    t_start = time.perf_counter()
    extras = {}
    print(f"forge_array benchmarks on {ctx.device_name}: suites {','.join(suites)}"
          f"{' (quick)' if args.quick else ''}", flush=True)
    for suite in suites:
        mod = importlib.import_module(f"bench.suite_{suite}")
        try:
            cases = mod.cases(ctx)
        except Exception as exc:
            print(f"[{suite}] could not build cases: {harness._short_error(exc)}", flush=True)
            extras[suite] = {"error": harness._short_error(exc)}
            continue
        if filters:
            cases = [c for c in cases if any(f in c.label for f in filters)]
        print(f"[{suite}] {len(cases)} cases", flush=True)
        if args.list:
            for c in cases:
                print(f"  {c.label:<45} {c.bytes_moved / 1e6:12.3f} MB  "
                      f"{', '.join(c.impls)}")
            continue
        t0 = time.perf_counter()
        for case in cases:
            runner.run_case(case)
        if hasattr(mod, "extras") and not filters:
            try:
                extras[suite] = mod.extras(ctx)
            except Exception as exc:
                extras[suite] = {"error": harness._short_error(exc)}
        print(f"[{suite}] {time.perf_counter() - t0:.1f} s", flush=True)
    if args.list:
        return 0

    elapsed = time.perf_counter() - t_start
    meta = harness.metadata(ctx, vars(args), elapsed)
    meta["extras"] = extras
    out_root = args.out or (DRY_RUN_OUT if args.dry_run else DEFAULT_OUT)
    out_dir = os.path.join(out_root, harness.slug(ctx.device_name))
    stem = args.stem or ("results" if set(suites) == set(SUITES) else
                         "results-" + "-".join(suites))
    if args.no_plot:
        os.makedirs(out_dir, exist_ok=True)
        paths = {"json": os.path.join(out_dir, stem + ".json"),
                 "md": os.path.join(out_dir, stem + ".md")}
        harness.write_json(paths["json"], meta, runner.results)
        with open(paths["md"], "w") as f:
            f.write(harness.markdown(meta, runner.results))
    else:
        paths = harness.write_all(out_dir, stem, meta, runner.results)
    print(f"done in {elapsed:.1f} s; wrote " + ", ".join(paths.values()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
