"""Kernels built ahead: ``python -m forge_array warmup`` runs the standard reductions, scans and
matrix-vector products once per dtype and layout class on a device, so that their kernels are
compiled into the disk cache (``FORGE_ARRAY_CACHE_DIR``) and a later process's first calls load
them instead of compiling.

Layout classes: 1-D arrays of each of ``sizes`` (full reductions and 1-D scans), a matrix of
``shape`` reduced and scanned along axis 0 and axis 1, and ``A @ v`` / ``v @ A`` with it.

>>> import forge_array as xp
>>> import io
>>> r = warmup(dtypes=("float64",), ops=("sum",), device=xp.cpu, sizes=(8,), shape=(4, 6), out=io.StringIO())
>>> r["calls"], r["skipped"]
(3, 0)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

OPS = ("sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin", "any", "all",
       "cumulative_sum", "cumulative_prod", "matmul")
DTYPES = ("float32", "float64", "int32", "int64")
SIZES = (10**3, 10**6)
SHAPE = (1000, 1000)

_SCANS = ("cumulative_sum", "cumulative_prod")


def _calls(xp, op, dtype, device, sizes, shape):
    """``(label, call)`` of every layout class of ``op`` for ``dtype``."""
    dt = getattr(xp, dtype)
    out = []
    if op == "matmul":
        A = xp.ones(shape, dtype=dt, device=device)
        v, w = xp.ones(shape[1], dtype=dt, device=device), xp.ones(shape[0], dtype=dt, device=device)
        return [(f"A @ v {shape}", lambda: A @ v), (f"v @ A {shape}", lambda: w @ A)]
    fn = getattr(xp, op)
    for n in sizes:
        x = xp.ones(n, dtype=dt, device=device)
        out.append((f"n={n}", lambda x=x: fn(x)))
    M = xp.ones(shape, dtype=dt, device=device)
    for axis in (0, 1):
        out.append((f"axis={axis} {shape}", lambda axis=axis: fn(M, axis=axis)))
    return out


def warmup(dtypes=DTYPES, ops=OPS, device=None, sizes=SIZES, shape=SHAPE, out=None, jobs=1) -> dict:
    """Run every ``op`` of ``ops`` once per dtype of ``dtypes`` and layout class on ``device``
    (default: the default device), printing one progress line per call to ``out`` (default
    stderr). Combinations the standard rejects (``mean`` of integers) are skipped. With
    ``jobs`` > 1 the (operation, dtype) pairs are shared among that many processes (compiling
    is CPU-bound, one core per process). Kernels are built in the calling thread
    (``FORGE_ARRAY_COMPILE=sync``). Returns ``{"calls", "skipped", "seconds", "compiled",
    "disk_hits"}`` (kernels compiled and loaded from the disk cache during the run).
    """
    out = sys.stderr if out is None else out
    unknown = [o for o in ops if o not in OPS]
    if unknown:
        raise ValueError(f"warmup: unknown operations {unknown}; choose from {', '.join(OPS)}")
    import forge_array as xp

    bad = [d for d in dtypes if not hasattr(xp, d)]
    if bad:
        raise ValueError(f"warmup: unknown dtypes {bad}")
    todo = [(op, d) for d in dtypes for op in ops]
    if jobs > 1 and len(todo) > 1:
        return _in_processes(todo, device, sizes, shape, out, jobs)
    return _pairs(xp, todo, device, sizes, shape, out)


def _pairs(xp, todo, device, sizes, shape, out) -> dict:
    from forge_array.runtime import STATS, background

    device = xp.__array_namespace_info__().default_device() if device is None else device
    old = background.set_mode("sync")
    before = dict(STATS)
    t0 = time.perf_counter()
    calls = skipped = 0
    try:
        for k, (op, d) in enumerate(todo, 1):
            for label, call in _calls(xp, op, d, device, sizes, shape):
                t = time.perf_counter()
                try:
                    r = call()
                    r = r[0] if isinstance(r, tuple) else r
                    r.to_device(xp.cpu)        # the kernel has run
                    calls += 1
                    status = f"{time.perf_counter() - t:.2f} s"
                except TypeError:              # not a combination the standard defines
                    skipped += 1
                    status = "skipped"
                print(f"[{k}/{len(todo)}] {op} {d} {label}: {status}", file=out, flush=True)
    finally:
        background.set_mode(old)
    return {"calls": calls, "skipped": skipped, "seconds": time.perf_counter() - t0,
            "compiled": STATS["compiled"] - before["compiled"],
            "disk_hits": STATS["disk_hits"] - before["disk_hits"]}


def _in_processes(todo, device, sizes, shape, out, jobs) -> dict:
    t0 = time.perf_counter()
    shares = [todo[i::jobs] for i in range(min(jobs, len(todo)))]
    procs = []
    for share in shares:
        cmd = [sys.executable, "-m", "forge_array", "warmup", "--pairs",
               ",".join(f"{op}:{d}" for op, d in share), "--sizes", ",".join(map(str, sizes)),
               "--shape", ",".join(map(str, shape)), "--summary-json"]
        if device is not None:
            cmd += ["--device", str(device)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    total = {"calls": 0, "skipped": 0, "compiled": 0, "disk_hits": 0}
    failed = []
    for p in procs:
        stdout, stderr = p.communicate()
        out.write(stderr)
        out.flush()
        if p.returncode != 0:
            failed.append(stderr.strip().splitlines()[-1] if stderr.strip() else f"exit {p.returncode}")
            continue
        r = json.loads(stdout.strip().splitlines()[-1])
        for k in total:
            total[k] += r[k]
    if failed:
        raise RuntimeError("warmup: a worker process failed: " + "; ".join(failed))
    total["seconds"] = time.perf_counter() - t0
    return total


def main(argv) -> int:
    """``python -m forge_array warmup [--dtypes ...] [--ops ...] [--device ...] [--jobs N]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m forge_array warmup",
                                 description="Compile the standard operations' kernels into the disk cache.")
    ap.add_argument("--dtypes", default=",".join(DTYPES), help=f"comma-separated (default {','.join(DTYPES)})")
    ap.add_argument("--ops", default=",".join(OPS), help="comma-separated (default: all of them)")
    ap.add_argument("--device", default=None, help="e.g. cuda:0 (default: the default device)")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="1-D sizes (default 1000,1000000)")
    ap.add_argument("--shape", default="1000,1000", help="matrix shape (default 1000,1000)")
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1),
                    help="processes compiling side by side (default: the cores, at most 8)")
    ap.add_argument("--pairs", default=None, help=argparse.SUPPRESS)          # op:dtype,... (a worker)
    ap.add_argument("--summary-json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(","))
    shape = tuple(int(s) for s in args.shape.split(","))
    if args.pairs:
        import forge_array as xp

        todo = [tuple(p.split(":")) for p in args.pairs.split(",")]
        r = _pairs(xp, todo, args.device, sizes, shape, sys.stderr)
    else:
        r = warmup(dtypes=tuple(args.dtypes.split(",")), ops=tuple(args.ops.split(",")), device=args.device,
                   sizes=sizes, shape=shape, jobs=args.jobs)
    if args.summary_json:
        print(json.dumps(r))
    else:
        print(f"warmup: {r['calls']} calls ({r['skipped']} skipped) in {r['seconds']:.1f} s; "
              f"{r['compiled']} kernels compiled, {r['disk_hits']} loaded from the cache")
    return 0
