"""Sweep launch parameters on a GPU: run chosen bench cases once per tuning configuration.

Each configuration runs ``python -m bench.run`` in a fresh process with ``FORGE_ARRAY_TUNING``
set (see :mod:`forge_array.runtime.tuning`), so compiled kernels and launch plans never leak
from one configuration into the next; only forge_array's implementation is timed (add
``--check`` to time the reference too and compare outputs). Prints one row per case and
configuration and writes ``tune-<name>.json`` and ``.md`` to ``--out``.

Usage (on the GPU machine)::

    python -m bench.tune --suite scan --filter "cumulative_sum float32" --sizes 1e8,1e9 \\
        --grid '{"scan": {"item_bytes": [32, 64, 128], "block": [128, 256]}}'
    python -m bench.tune --suite copy --filter misaligned --sizes 1e8 \\
        --configs '[{}, {"copy": {"items": 8}}]'

``--grid`` takes the cartesian product of the lists (per kind, across kinds); ``--configs``
an explicit list of override dicts; both may be given (the union is run, ``{}`` being the
tables' own values).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time


def expand_grid(grid: dict) -> list[dict]:
    """All override dicts of a grid ``{kind: {param: [values]}}``.

    >>> expand_grid({"scan": {"block": [128, 256]}, "copy": {"items": [4]}})
    [{'scan': {'block': 128}, 'copy': {'items': 4}}, {'scan': {'block': 256}, 'copy': {'items': 4}}]
    """
    axes = [(kind, key, vals if isinstance(vals, list) else [vals])
            for kind, params in grid.items() for key, vals in params.items()]
    out = []
    for combo in itertools.product(*[vals for _, _, vals in axes]):
        cfg: dict = {}
        for (kind, key, _), val in zip(axes, combo):
            cfg.setdefault(kind, {})[key] = val
        out.append(cfg)
    return out


def label(cfg: dict) -> str:
    """A short name of one configuration.

    >>> label({"scan": {"block": 128, "items_max": 8}})
    'scan.block=128 scan.items_max=8'
    >>> label({})
    'tables'
    """
    parts = [f"{kind}.{k}={v}" for kind, params in cfg.items() for k, v in params.items()]
    return " ".join(parts) or "tables"


def run_config(cfg: dict, args, workdir: str, index: int) -> list[dict]:
    env = dict(os.environ, FORGE_ARRAY_TUNING=json.dumps(cfg))
    stem = f"cfg{index}"
    cmd = [sys.executable, "-m", "bench.run", "--suite", args.suite, "--no-plot", "--out", workdir,
           "--stem", stem, "--reps-scale", str(args.reps_scale)]
    if args.filter:
        cmd += ["--filter", args.filter]
    if args.sizes:
        cmd += ["--sizes", args.sizes]
    if args.dry_run:
        cmd += ["--dry-run"]
    if not args.check:
        cmd += ["--impls", "forge_array", "--no-check"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    rows = []
    path = None
    for root, _, files in os.walk(workdir):
        if stem + ".json" in files:
            path = os.path.join(root, stem + ".json")
    if proc.returncode != 0 or path is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return [{"config": label(cfg), "case": "-", "error": " | ".join(tail)}]
    with open(path) as f:
        data = json.load(f)
    for case in data["cases"]:
        for impl, r in case["impls"].items():
            if not impl.startswith("forge_array"):
                continue
            rows.append({"config": label(cfg), "overrides": cfg, "case": case["label"], "impl": impl,
                         "median_us": r.get("median_us"), "roofline_frac": r.get("roofline_frac"),
                         "check": r.get("check"), "error": r.get("error") if r.get("status") != "ok" else None})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.tune", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", required=True, help="one bench suite (copy, reduce, scan, matvec)")
    p.add_argument("--filter", default=None, help="as bench.run --filter")
    p.add_argument("--sizes", default=None, help="as bench.run --sizes")
    p.add_argument("--grid", default=None, help='JSON {kind: {param: [values]}}: cartesian product')
    p.add_argument("--configs", default=None, help="JSON list of override dicts")
    p.add_argument("--check", action="store_true", help="also run the reference and compare outputs")
    p.add_argument("--dry-run", action="store_true", help="as bench.run --dry-run (NumPy on the CPU)")
    p.add_argument("--reps-scale", type=float, default=0.5)
    p.add_argument("--timeout", type=float, default=240, help="seconds per configuration")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds for the whole sweep: no configuration starts after it is spent")
    p.add_argument("--no-warmup", action="store_true",
                   help="do not run the first configuration once, unrecorded, before the sweep "
                        "(the first configuration of a sweep measured up to 30%% slower "
                        "than the same one later, in cases no parameter of it touched)")
    p.add_argument("--name", default=None, help="output name (default: the suite)")
    p.add_argument("--out", default=".", help="folder for tune-<name>.json/.md")
    args = p.parse_args(argv)

    configs: list[dict] = []
    if args.configs:
        configs += json.loads(args.configs)
    if args.grid:
        configs += expand_grid(json.loads(args.grid))
    if not configs:
        configs = [{}]
    rows: list[dict] = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as workdir:
        if not args.no_warmup and not args.dry_run:
            try:
                run_config(configs[0], args, workdir, len(configs))
            except subprocess.TimeoutExpired:
                pass
        for i, cfg in enumerate(configs):
            if args.budget is not None and time.monotonic() - t0 > args.budget:
                print(f"budget of {args.budget} s spent: {len(configs) - i} configurations not run", flush=True)
                break
            try:
                got = run_config(cfg, args, workdir, i)
            except subprocess.TimeoutExpired:
                got = [{"config": label(cfg), "case": "-", "error": f"timeout after {args.timeout} s"}]
            for r in got:
                if r.get("error"):
                    print(f"{r['config']:<60} {r['case']:<45} ERROR {r['error']}", flush=True)
                else:
                    frac = r["roofline_frac"]
                    print(f"{r['config']:<60} {r['case']:<45} {r['median_us']:10.1f} us"
                          + (f"  {frac:.2f} of copy" if frac else "") + (f"  {r['check']}" if r["check"] else ""),
                          flush=True)
            rows += got
    name = args.name or args.suite
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"tune-{name}.json"), "w") as f:
        json.dump(rows, f, indent=1)
    with open(os.path.join(args.out, f"tune-{name}.md"), "w") as f:
        f.write("| configuration | case | median µs | of copy |\n|---|---|---:|---:|\n")
        for r in rows:
            us = "error" if r.get("error") else f"{r['median_us']:.1f}"
            frac = r.get("roofline_frac")
            f.write(f"| {r['config']} | {r['case']} | {us} | {'' if not frac else f'{frac:.2f}'} |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
