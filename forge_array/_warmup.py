"""Kernels built ahead: ``python -m forge_array warmup`` runs the standard reductions, scans and
matrix-vector products once per dtype and layout class on a device, so that their kernels are
compiled into the disk cache (``FORGE_ARRAY_CACHE_DIR``) and a later process's first calls load
them instead of compiling. It reports the kernels it compiled and where they are stored. The
CPU device runs the standard operations on NumPy: there is nothing to build for it, and on a
machine without a GPU the command says so and builds nothing (in numba's CUDA simulator it runs
the simulated kernels, which are not stored).

Layout classes: 1-D arrays of each of ``sizes`` (full reductions and 1-D scans), a matrix of
each of ``shapes`` reduced and scanned along axis 0 and axis 1, and ``A @ v`` / ``v @ A`` with
it; with ``views`` also a misaligned, a strided and a reversed 1-D view, and transposed,
column-offset and row-strided views of each matrix.

>>> import forge_array as xp
>>> import io
>>> r = warmup(dtypes=("float64",), ops=("sum",), device=xp.cpu, sizes=(8,), shapes=[(4, 6)], out=io.StringIO())
>>> r["calls"], r["skipped"]
(3, 0)
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from typing import NamedTuple

OPS = ("sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin", "any", "all",
       "cumulative_sum", "cumulative_prod", "matmul", "unique", "operators")
DTYPES = ("float32", "float64", "int32", "int64")
#: every dtype of the standard (``--dtypes all``)
ALL_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float32", "float64", "complex64", "complex128")
SIZES = (10**3, 10**6)
SHAPE = (1000, 1000)

DESCRIPTION = ("Compile the standard operations' kernels (reductions, scans, matrix-vector "
               "products) into the disk cache, so that later processes load them instead of "
               "compiling. The CPU device runs these operations on NumPy: nothing is built "
               "for it.")


def _views_1d(xp, dt, device, n):
    """A misaligned, a strided and a reversed view of ``n`` elements."""
    base = xp.ones(2 * n + 1, dtype=dt, device=device)
    return [(f"x[1:] n={n}", base[1:n + 1]), (f"x[::2] n={n}", base[:2 * n:2]),
            (f"x[::-1] n={n}", base[n - 1::-1] if n else base[:0])]


def _matrices(xp, dt, device, shape, views):
    """The matrix of ``shape`` and, with ``views``, its transposed, column-offset and
    row-strided views of the same shape."""
    m, k = shape
    out = [(f"{shape}", xp.ones(shape, dtype=dt, device=device))]
    if views:
        out += [(f"{shape} transposed", xp.ones((k, m), dtype=dt, device=device).T),
                (f"{shape} [:, 1:]", xp.ones((m, k + 1), dtype=dt, device=device)[:, 1:]),
                (f"{shape} [::2]", xp.ones((2 * m, k), dtype=dt, device=device)[::2])]
    return out


class Layouts(NamedTuple):
    """What a warmup runs each operation on: 1-D arrays of each of ``sizes``, matrices of each
    of ``shapes``, with ``views`` their strided, misaligned, reversed and transposed views,
    with ``row_classes`` (on a GPU) ``A @ v`` of the shapes of ``_row_class_shapes`` too."""

    sizes: tuple = SIZES
    shapes: tuple = (SHAPE,)
    views: bool = False
    row_classes: bool = False


def _calls(xp, op, dtype, device, layouts: Layouts):
    """``(label, call)`` of every layout class of ``layouts`` for ``op`` and ``dtype``."""
    from forge_array import _devices
    from forge_array.runtime import config

    sizes, shapes, views = layouts.sizes, layouts.shapes, layouts.views
    dt = getattr(xp, dtype)
    out = []
    if op == "operators":
        return _operator_calls(xp, dt, device, sizes, shapes)
    if op == "matmul":
        for shape in shapes:
            v, w = xp.ones(shape[1], dtype=dt, device=device), xp.ones(shape[0], dtype=dt, device=device)
            for label, A in _matrices(xp, dt, device, shape, views):
                out += [(f"A @ v {label}", lambda A=A, v=v: A @ v), (f"v @ A {label}", lambda A=A, w=w: w @ A)]
        # the row classes only fill a GPU's kernel cache (the simulator stores nothing)
        gpu = layouts.row_classes and _devices.as_device(device).is_cuda and not config.SIMULATE
        for shape in _row_class_shapes() if gpu else ():   # allocated when run: large matrices
            out.append((f"A @ v {shape}", lambda shape=shape: xp.ones(shape, dtype=dt, device=device)
                        @ xp.ones(shape[1], dtype=dt, device=device)))
        return out
    if op == "unique":   # the compaction: unique_* (run starts, selection, ranks), nonzero, row masks
        for n in sizes:
            x = xp.ones(n, dtype=dt, device=device)
            out += [(f"unique_all n={n}", lambda x=x: xp.unique_all(x)),
                    (f"unique_values n={n}", lambda x=x: xp.unique_values(x)),
                    (f"nonzero n={n}", lambda x=x: xp.nonzero(x))]
        M = xp.ones((64, 32), dtype=dt, device=device)   # rows long enough for the row gather
        rows = xp.ones(64, dtype=xp.bool, device=device)
        out.append(("x[row mask] (64, 32)", lambda M=M, rows=rows: M[rows]))
        return out
    fn = getattr(xp, op)
    for n in sizes:
        x = xp.ones(n, dtype=dt, device=device)
        out.append((f"n={n}", lambda x=x: fn(x)))
    if views and sizes:
        out += [(label, lambda x=x: fn(x)) for label, x in _views_1d(xp, dt, device, max(sizes))]
    for shape in shapes:
        for label, M in _matrices(xp, dt, device, shape, views):
            for axis in (0, 1):
                out.append((f"axis={axis} {label}", lambda axis=axis, M=M: fn(M, axis=axis)))
                if op in ("var", "std") and dtype == "float32":
                    # the shifted sums large arrays take (the "moments" tuning's shifted_min)
                    out.append((f"axis={axis} {label} shifted", lambda axis=axis, M=M: _shifted(xp, fn, M, axis)))
    return out


def _shifted(xp, fn, M, axis):
    """``fn(M, axis=axis)`` by the shifted sums whatever ``M``'s size."""
    with xp.flags(tuning={"moments": {"shifted_min": 0}}):
        return fn(M, axis=axis)


#: columns of the matrices of ``_row_class_shapes``: one chunk per row group, and enough for
#: the groups to split across blocks
ROW_CLASS_COLUMNS = (512, 1 << 16)


def _row_class_shapes() -> list:
    """Matrix shapes whose ``A @ v`` takes each number of rows per block the multi-row
    kernel of the GPU here can take (``row_multi`` of the ``rowcol`` tuning: the largest
    divisor of the row count up to it), each unsplit and split across blocks
    (:data:`ROW_CLASS_COLUMNS`): ``r * p`` rows for ``r = 2 .. row_multi`` and ``p`` the
    first prime above ``row_multi``, so that ``r`` is that divisor.

    >>> shapes = _row_class_shapes()
    >>> all(len(s) == 2 for s in shapes)
    True
    """
    from forge_array.runtime import tuning

    most = int(tuning.params("rowcol").get("row_multi", 0))
    p = most + 1
    while any(p % d == 0 for d in range(2, p)):
        p += 1
    return [(r * p, cols) for r in range(2, most + 1) for cols in ROW_CLASS_COLUMNS]


# stand-ins for a user's operators: their kernels' skeletons (runtime.linking) let a user's own
# operators of the same types link instead of a full build


def _user_plus(a, b):
    return a + b


def _user_larger(a, b):
    return a if a > b else b


def _user_square(v):
    return v * v


#: the dtypes of the stand-ins' kernels (the dtypes a user's own operators mostly meet)
OPERATOR_DTYPES = ("int32", "int64", "float32", "float64")
#: most matrix shapes of the stand-ins' matrix-vector products
OPERATOR_SHAPES = 3


def _operator_calls(xp, dt, device, sizes, shapes):
    """``(label, call)`` of the generic operations with Python operators for a dtype of
    :data:`OPERATOR_DTYPES`: ``reduce``, ``accumulate`` and ``mapreduce`` of a 1-D array of
    each of ``sizes`` (those over 1), ``matvec`` / ``vecmat`` with a Python map and a min /
    maximum / sum reduction of the first :data:`OPERATOR_SHAPES` matrices of ``shapes``."""
    from forge_array import ops

    out = []
    if str(dt) not in OPERATOR_DTYPES:
        return out
    for n in (n for n in sizes if n > 1):
        x = xp.ones(n, dtype=dt, device=device)
        for op in (_user_plus, _user_larger):
            out += [(f"reduce({op.__name__}) n={n}", lambda x=x, op=op: xp.reduce(op, x)),
                    (f"accumulate({op.__name__}) n={n}", lambda x=x, op=op: xp.accumulate(op, x))]
        out.append((f"mapreduce(_user_square, _user_plus) n={n}",
                    lambda x=x: xp.mapreduce(_user_square, _user_plus, x)))
    for shape in shapes[:OPERATOR_SHAPES]:
        A = xp.ones(shape, dtype=dt, device=device)
        v, w = xp.ones(shape[1], dtype=dt, device=device), xp.ones(shape[0], dtype=dt, device=device)
        for op in (ops.minimum, ops.maximum, ops.add):
            out += [(f"matvec(f=_user_plus, op={op.name}) {shape}",
                     lambda A=A, v=v, op=op: xp.matvec(A, v, f=_user_plus, op=op)),
                    (f"vecmat(f=_user_plus, op={op.name}) {shape}",
                     lambda A=A, w=w, op=op: xp.vecmat(w, A, f=_user_plus, op=op))]
    return out


def warmup(dtypes=DTYPES, ops=OPS, device=None, sizes=SIZES, shapes=(SHAPE,), out=None, jobs=1,
           views=False, row_classes=False) -> dict:
    """Run every ``op`` of ``ops`` once per dtype of ``dtypes`` and layout class on ``device``
    (default: the default device), printing one progress line per call to ``out`` (default
    stderr). With ``row_classes``, ``A @ v`` also takes every number of rows per block of the
    multi-row kernel (``_row_class_shapes``). Combinations the standard rejects (``mean``
    of integers) are skipped. With ``jobs`` > 1 that many worker processes take the
    (operation, dtype) pairs from one queue, the heaviest first (compiling is CPU-bound, one
    core per process). Kernels are built in the calling thread
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
    nothing = nothing_to_build(device)
    if nothing is not None:
        return {"calls": 0, "skipped": 0, "seconds": 0.0, "compiled": 0, "disk_hits": 0,
                "kernels": {}, "note": nothing}
    todo = [(op, d) for d in dtypes for op in ops]
    layouts = Layouts(tuple(sizes), tuple(shapes), views, row_classes)
    if jobs > 1 and len(todo) > 1:
        return _in_processes(todo, device, layouts, out, jobs)
    return _pairs(xp, todo, device, layouts, out)


def nothing_to_build(device=None):
    """Why a warmup on ``device`` (default: the default device) builds nothing, or None when
    it builds kernels there: the CPU device runs the standard operations on NumPy (unless
    numba's CUDA simulator runs our kernels on it).

    ```python
    from forge_array._warmup import nothing_to_build

    print(nothing_to_build("cpu"))    # on a machine without a GPU: "no GPU here ..."
    ```
    """
    import forge_array as xp
    from forge_array import _devices
    from forge_array.runtime import config

    dev = _devices.as_device(device)
    if dev.is_cuda or (config.SIMULATE and config.KERNELS_ENABLED):
        return None
    if not config.KERNELS_ENABLED:
        return ("our kernels are turned off (FORGE_ARRAY_KERNELS=0): every operation runs on "
                "CuPy or NumPy, nothing to build")
    gpus = [d for d in xp.__array_namespace_info__().devices() if d.is_cuda]
    if not gpus:
        return ("no GPU here (CuPy is not installed or sees none): nothing to build for the "
                "GPU. The CPU device runs the standard operations on NumPy, so nothing was "
                "compiled or stored for it either")
    return (f"the CPU device runs the standard operations on NumPy: nothing to build for it "
            f"(the GPUs here: {', '.join(map(str, gpus))}; pass --device cuda:N, or no "
            "--device for the default one)")


def _pairs(xp, todo, device, layouts, out, part=(0, 1), position=None) -> dict:
    """Run the calls of each (operation, dtype) of ``todo`` on ``layouts`` (with ``part =
    (i, n)`` the calls ``i::n`` of each), one progress line per call to ``out`` (numbered by
    ``position = (k, of)`` when given, else by the place in ``todo``)."""
    from forge_array.runtime import STATS, background, compiler

    device = xp.__array_namespace_info__().default_device() if device is None else device
    old = background.set_mode("sync")
    before = dict(STATS)
    built = len(compiler.COMPILES)
    t0 = time.perf_counter()
    calls = skipped = 0
    try:
        for k, (op, d) in enumerate(todo, 1):
            at = f"[{position[0]}/{position[1]}]" if position else f"[{k}/{len(todo)}]"
            for label, call in _calls(xp, op, d, device, layouts)[part[0]::part[1]]:
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
                print(f"{at} {op} {d} {label}: {status}", file=out, flush=True)
    finally:
        background.set_mode(old)
    kernels: dict = {}
    for name, _ops, _seconds in compiler.COMPILES[built:] if len(compiler.COMPILES) >= built else ():
        kernels[name] = kernels.get(name, 0) + 1
    return {"calls": calls, "skipped": skipped, "seconds": time.perf_counter() - t0,
            "compiled": STATS["compiled"] - before["compiled"],
            "disk_hits": STATS["disk_hits"] - before["disk_hits"], "kernels": kernels,
            "device": str(device)}


#: the operations whose (operation, dtype) pairs hold the most compiling, taken first; SPLIT:
#: those cut into parts that worker processes take separately. From the per-call seconds that
#: ``python -m forge_array prebuild`` logs (H100, 16 jobs): the stand-ins' pairs 32-50 s each,
#: ``matmul`` with the row classes up to 99 s, the scans 12-30 s, the other pairs under 12 s
HEAVY = ("operators", "matmul", "cumulative_prod", "cumulative_sum")
SPLIT = {"operators": 4, "matmul": 4}


def _units(todo) -> list:
    """``todo``'s (operation, dtype) pairs as work units ``(op, dtype, part, parts)``, the
    heaviest operations first (a worker that takes the last unit should not be left with a
    long one) and the heaviest pairs cut into parts."""
    rank = {op: i for i, op in enumerate(HEAVY)}
    ordered = sorted(todo, key=lambda pd: rank.get(pd[0], len(HEAVY)))
    return [(op, d, i, SPLIT.get(op, 1)) for op, d in ordered for i in range(SPLIT.get(op, 1))]


def _in_processes(todo, device, layouts, out, jobs) -> dict:
    """Share ``todo`` among ``jobs`` worker processes (``warmup --serve``), each taking the
    next unit of :func:`_units` when it is done with one; their progress lines go to ``out``."""
    t0 = time.perf_counter()
    units = _units(todo)
    work: queue.Queue = queue.Queue()
    for k, unit in enumerate(units, 1):
        work.put((k, unit))
    cmd = [sys.executable, "-m", "forge_array", "warmup", "--serve", "--sizes", ",".join(map(str, layouts.sizes)),
           "--shape", _shapes_text(layouts.shapes)]
    cmd += ["--views"] * layouts.views + ["--row-classes"] * layouts.row_classes
    if device is not None:
        cmd += ["--device", str(device)]
    total = {"calls": 0, "skipped": 0, "compiled": 0, "disk_hits": 0, "kernels": {}}
    failed: list = []
    lock = threading.Lock()

    def forward(stream):
        for line in stream:
            with lock:
                out.write(line)
                out.flush()

    def drive():
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, bufsize=1)
        errors = threading.Thread(target=forward, args=(p.stderr,), daemon=True)
        errors.start()
        try:
            while not failed:
                try:
                    k, (op, d, i, n) = work.get_nowait()
                except queue.Empty:
                    break
                p.stdin.write(f"{op} {d} {i} {n} {k} {len(units)}\n")
                p.stdin.flush()
                line = p.stdout.readline()
                if not line:
                    with lock:
                        failed.append(f"a worker exited during {op} {d} (part {i + 1} of {n})")
                    break
                r = json.loads(line)
                with lock:
                    for key in ("calls", "skipped", "compiled", "disk_hits"):
                        total[key] += r[key]
                    for name, m in r.get("kernels", {}).items():
                        total["kernels"][name] = total["kernels"].get(name, 0) + m
                    total["device"] = r.get("device")
        finally:
            p.stdin.close()
            p.wait()
            errors.join()
            if p.returncode not in (0, None):
                with lock:
                    failed.append(f"exit {p.returncode}")

    drivers = [threading.Thread(target=drive) for _ in range(min(jobs, len(units)))]
    for t in drivers:
        t.start()
    for t in drivers:
        t.join()
    if failed:
        raise RuntimeError("warmup: a worker process failed: " + "; ".join(failed))
    total["seconds"] = time.perf_counter() - t0
    return total


def serve(layouts, device, inp=None, out=None, progress=None) -> None:
    """A worker of :func:`_in_processes`: for each line ``op dtype part parts k of`` of
    ``inp`` (default stdin), run that unit and write its summary as one JSON line to ``out``
    (default stdout), its progress to ``progress`` (default stderr)."""
    import forge_array as xp

    inp, out = inp or sys.stdin, out or sys.stdout
    for line in inp:
        op, d, i, n, k, of = line.split()
        r = _pairs(xp, [(op, d)], device, layouts, progress or sys.stderr, (int(i), int(n)), (k, of))
        out.write(json.dumps(r) + "\n")
        out.flush()


def add_arguments(ap) -> None:
    """The ``warmup`` command's options on the ``argparse`` parser ``ap``.

    ```python
    import argparse
    from forge_array._warmup import add_arguments

    ap = argparse.ArgumentParser()
    add_arguments(ap)
    ap.parse_args(["--ops", "sum,max", "--jobs", "2"]).ops     # 'sum,max'
    ```
    """
    import argparse

    ap.add_argument("--dtypes", default=",".join(DTYPES), help=f"comma-separated, or all (default "
                    f"{','.join(DTYPES)})")
    ap.add_argument("--ops", default=",".join(OPS), help="comma-separated (default: all of them)")
    ap.add_argument("--device", default=None, help="e.g. cuda:0 (default: the default device)")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="1-D sizes (default 1000,1000000)")
    ap.add_argument("--shape", default="1000,1000", help="matrix shape (default 1000,1000), or several: "
                    "1000x1000,8x300")
    ap.add_argument("--views", action="store_true", help="also strided, misaligned, reversed and "
                    "transposed views (every layout class the dispatch picks)")
    ap.add_argument("--row-classes", action="store_true", help="also A @ v of every number of rows "
                    "per block of the multi-row kernel (matrices of 2p .. row_multi*p rows)")
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1),
                    help="processes compiling side by side (default: the cores, at most 8)")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)   # a worker of --jobs


def run(args, out=None) -> int:
    """Run the ``warmup`` command with parsed arguments (see :func:`add_arguments`); print
    what it did and where to ``out`` (default stdout), the progress to stderr. Returns the
    exit status.

    ```python
    from forge_array.__main__ import parser
    from forge_array._warmup import run

    run(parser().parse_args(["warmup", "--ops", "sum", "--dtypes", "float32"]))
    ```
    """
    out = sys.stdout if out is None else out
    try:
        sizes = tuple(int(s) for s in args.sizes.split(","))
        shapes = parse_shapes(args.shape)
    except ValueError:
        print("warmup: --sizes and --shape take comma-separated integers", file=sys.stderr)
        return 2
    layouts = Layouts(sizes, tuple(shapes), args.views, args.row_classes)
    if args.serve:
        serve(layouts, args.device)
        return 0
    try:
        dtypes = ALL_DTYPES if args.dtypes == "all" else tuple(args.dtypes.split(","))
        r = warmup(dtypes=dtypes, ops=tuple(args.ops.split(",")), device=args.device, sizes=sizes,
                   shapes=shapes, jobs=args.jobs, views=args.views, row_classes=args.row_classes)
    except ValueError as e:       # unknown operations, dtypes or devices
        msg = str(e)
        print(msg if msg.startswith("warmup:") else f"warmup: {msg}", file=sys.stderr)
        return 2
    print(report(r), file=out)
    return 0


def parse_shapes(text: str) -> list:
    """``"1000,1000"`` -> ``[(1000, 1000)]``; ``"1000x1000,8x300"`` -> two shapes.

    >>> parse_shapes("1000x1000,8x300")
    [(1000, 1000), (8, 300)]
    """
    if "x" in text:
        return [tuple(int(v) for v in part.split("x")) for part in text.split(",")]
    return [tuple(int(v) for v in text.split(","))]


def _shapes_text(shapes) -> str:
    return ",".join("x".join(map(str, s)) for s in shapes)


def report(r) -> str:
    """What a :func:`warmup` result says: the calls, the kernels compiled (by kind), those
    loaded from the cache and the cache's directory; or why nothing was built.

    ```python
    from forge_array._warmup import report

    print(report({"calls": 0, "skipped": 0, "seconds": 0.0, "compiled": 0, "disk_hits": 0,
                  "kernels": {}, "note": "nothing to build"}))
    ```
    """
    from forge_array.runtime import config

    if r.get("note"):
        return f"warmup: {r['note']}."
    where = f" on {r['device']}" if r.get("device") else ""
    lines = [f"warmup: {r['calls']} calls ({r['skipped']} skipped){where} in {r['seconds']:.1f} s; "
             f"{r['compiled']} kernels compiled, {r['disk_hits']} loaded from the cache"]
    kinds = r.get("kernels") or {}
    if kinds:
        lines.append("  compiled: " + ", ".join(f"{name} x{n}" for name, n in sorted(kinds.items())))
    if config.SIMULATE:
        lines.append("  the kernels ran in numba's CUDA simulator, whose kernels are not stored "
                     "on disk: nothing was written to the cache")
    else:
        lines.append(f"  cache: {config.CACHE_DIR} (one file per kernel; FORGE_ARRAY_CACHE_DIR "
                     "moves it)")
    return "\n".join(lines)


def main(argv) -> int:
    """``python -m forge_array warmup [--dtypes ...] [--ops ...] [--device ...] [--jobs N]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m forge_array warmup", description=DESCRIPTION)
    add_arguments(ap)
    return run(ap.parse_args(argv))


# ----------------------------------------------------------------------------- prebuild

#: what ``prebuild`` runs: every standard dtype, sizes around the small/large plans, and views;
#: short rows of an odd length (read element by element) and of 32 elements (read as 128-bit
#: vectors, ``x`` of ``A @ x`` held in registers) beside those of 8 and 64; 200 columns scanned
#: along axis 0 by the narrow kernel's blocks for more columns than ``narrow_block``
PREBUILD_WARMUP = ["--dtypes", "all", "--sizes", "1,1000,1000000",
                   "--shape", "1000x1000,8x300,300x8,300x7,300x32,64x64,2x1000,1000x2,300x200", "--views",
                   "--row-classes"]


#: the dispatch modules that name their kernels' factories (:mod:`.runtime.factories`): the
#: fingerprint table the prebuild ships covers theirs
FACTORY_USERS = ("forge_array.dispatch.reduce", "forge_array.dispatch.axis_reduce.plan",
                 "forge_array.dispatch.scan.plan")


def write_factory_table(out_dir: str | None = None) -> int:
    """Write the fingerprints of the factories of :data:`FACTORY_USERS` for this Python and
    numba into ``out_dir`` (default: the package's ``prebuilt/`` folder), the table with
    which a process finds their shipped kernels without numba; returns how many.  Needs
    numba, not a GPU."""
    import importlib  # noqa: PLC0415

    from forge_array.runtime import factories, prebuilt  # noqa: PLC0415

    for name in FACTORY_USERS:
        importlib.import_module(name)
    entries = factories.table_entries(factories.known())
    out_dir = out_dir or os.path.dirname(prebuilt.ARCHIVE)
    factories.write_table(os.path.join(out_dir, os.path.basename(factories.TABLE)), entries)
    return len(entries)


def prebuild(jobs: int, out_dir: str | None = None, device: str | None = None, out=None,
             commit: str | None = None, skeletons_only: bool = False, work: str | None = None,
             extend: bool = False) -> dict:
    """Build the shipped kernels (``python -m forge_array prebuild``, on a GPU machine): once
    per compile target of :data:`.runtime.prebuilt.TARGETS`, run the ``operators`` part of
    :data:`PREBUILD_WARMUP` into an empty cache of its own (the stand-in user operators, each
    building in full and leaving its skeleton: :mod:`.runtime.linking`), then the standard
    operations into another; link the cubins of :data:`.runtime.prebuilt.CUBIN_TARGETS`' kernels
    (:func:`.runtime.prebuilt.make_cubins`); pack the kernel files, their cubins and the stand-ins' skeletons into
    ``out_dir`` (default: the package's ``prebuilt/`` folder) beside the factories' fingerprint
    table (:func:`write_factory_table`), then check the archive in a
    fresh process on an empty cache. With ``skeletons_only`` the kernels are those of the
    shipped archive (which must match this install's kernel sources) and only the skeletons
    are built anew. Returns the manifest (with the check's counts under ``"check"``).
    ``commit`` is recorded in the manifest (default: the checkout's ``git rev-parse HEAD``).
    ``work``: the folder of the build's caches (default: temporary ones); a build stopped on
    the way resumes there, the kernels it already built loading from the disk. ``extend``:
    the warmups look the shipped archive up, so that the kernels whose keys it still holds
    (the kernel families whose sources did not change since it was made,
    :mod:`.runtime.kernel_sources`) load into the cache and only the others compile: after an
    edit of one kernel family, its kernels alone are built again; the manifest records the
    commit it extends.

    ```python
    from forge_array._warmup import prebuild

    m = prebuild(jobs=16)            # on a GPU machine: a few minutes
    print(m["kernels"], m["skeletons"], m["archive_bytes"])
    ```
    """
    import platform
    import tempfile

    import numba

    from forge_array.runtime import backend, compiler, config, kernel_sources, prebuilt

    out = sys.stderr if out is None else out
    if config.SIMULATE or nothing_to_build(device) is not None or backend.device_info()["cc"] < prebuilt.BASE_CC:
        raise ValueError("prebuild: needs a GPU of compute capability "
                         f"{prebuilt.BASE_CC[0]}.{prebuilt.BASE_CC[1]} or later")
    shipped = prebuilt.manifest() or {}
    if skeletons_only and shipped.get("source_hash") != kernel_sources.source_hash():
        raise ValueError("prebuild --skeletons-only: the shipped kernels do not match this install's kernel sources")
    out_dir = out_dir or os.path.dirname(prebuilt.ARCHIVE)
    standard = ",".join(o for o in OPS if o != "operators")
    with contextlib.ExitStack() as stack:
        if work is None:
            cache = stack.enter_context(tempfile.TemporaryDirectory(prefix="forge-prebuild-"))
            skeletons = stack.enter_context(tempfile.TemporaryDirectory(prefix="forge-prebuild-operators-"))
        else:
            cache, skeletons = os.path.join(work, "kernels"), os.path.join(work, "operators")
            os.makedirs(cache, exist_ok=True)
            os.makedirs(skeletons, exist_ok=True)
        t0 = time.perf_counter()
        if skeletons_only:
            n = prebuilt.unpack_kernels(cache)
            print(f"kernels of the shipped archive: {n}", file=out)
        for target in prebuilt.TARGETS:
            if target > backend.device_info()["cc"]:
                raise ValueError(f"prebuild: the GPU here cannot run sm_{target[0]}{target[1]} kernels")
            runs = [("operators", skeletons)] + ([] if skeletons_only else [(standard, cache)])
            for ops, folder in runs:
                # extending: the standard operations' kernels still current load from the
                # shipped archive into the cache, each made for this very target (the
                # stand-ins always build in full)
                reuse = extend and folder == cache
                env = dict(os.environ, FORGE_ARRAY_CACHE_DIR=folder, FORGE_ARRAY_PREBUILT="exact" if reuse else "0",
                           FORGE_ARRAY_COMPILE="sync", FORGE_ARRAY_TARGET_CC="%d.%d" % target)
                cmd = [sys.executable, "-m", "forge_array", "warmup", *PREBUILD_WARMUP, "--ops", ops,
                       "--jobs", str(jobs)]
                if device:
                    cmd += ["--device", device]
                done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=_stream(out), text=True)
                if done.stderr:
                    out.write(done.stderr)
                if done.returncode != 0:
                    raise RuntimeError(f"prebuild: the warmup for sm_{target[0]}{target[1]} failed "
                                       f"(exit {done.returncode})")
                print(f"sm_{target[0]}{target[1]}: {done.stdout}", file=out, end="")
        t1 = time.perf_counter()
        linked = prebuilt.make_cubins(cache, jobs)
        print(f"cubins linked: {linked} ({time.perf_counter() - t1:.1f} s)", file=out)
        meta = {"command": "python -m forge_array prebuild" + (" --extend" if extend else ""),
                "warmup": " ".join(PREBUILD_WARMUP),
                "commit": commit or _commit(), "date": time.strftime("%Y-%m-%d"), "gpu": backend.device_info()["name"],
                "python": platform.python_version(), "numba": numba.__version__,
                "numba_cuda": compiler._NUMBA_CUDA_VERSION, "source_hash": kernel_sources.source_hash(),
                "module_hashes": kernel_sources.module_hashes(),
                "build_seconds": round(time.perf_counter() - t0, 1)}
        meta["factories"] = write_factory_table(out_dir)
        if extend:
            meta = dict(meta, extends=shipped.get("commit"))
        if skeletons_only:
            meta = dict(meta, commit=shipped.get("commit"), skeletons_commit=commit or _commit(),
                        build_seconds=shipped.get("build_seconds"))
        m = prebuilt.pack(cache, out_dir, meta, skeleton_dirs=(skeletons,))
    m["check"] = _check_archive(os.path.join(out_dir, "kernels.zip"), device)
    return m


_CHECK = r"""
import json, sys
import forge_array as xp
from forge_array.runtime import STATS, background, prebuilt
prebuilt.use_archive(sys.argv[1])
background.set_mode("sync")
dev = sys.argv[2] if len(sys.argv) > 2 else None
x = xp.ones(100000, dtype=xp.float32, device=dev)
A = xp.ones((250, 400), dtype=xp.float32, device=dev)
for r in (xp.sum(x), xp.max(x), xp.std(x), xp.cumulative_sum(x), xp.sum(A, axis=0), xp.sum(A, axis=1),
          A @ xp.ones(400, dtype=xp.float32, device=dev), xp.argmax(x)):
    r.to_device(xp.cpu)
print(json.dumps({k: STATS[k] for k in ("compiled", "disk_hits", "prebuilt_hits", "cubin_loads")}))
"""


def _check_archive(archive: str, device) -> dict:
    """Standard calls in a fresh process on an empty cache with ``archive``: how many kernels
    came from it and how many still compiled."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="forge-prebuild-check-") as cache:
        env = dict(os.environ, FORGE_ARRAY_CACHE_DIR=cache)
        cmd = [sys.executable, "-c", _CHECK, archive] + ([device] if device else [])
        done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise RuntimeError("prebuild: the check of the archive failed: " + done.stderr.strip()[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def _stream(out):
    """``out`` where a child process can write to it directly (live progress), else a pipe."""
    try:
        out.fileno()
    except (AttributeError, OSError, ValueError):
        return subprocess.PIPE
    return out


def _commit() -> str:
    """The git commit of the package's checkout (``+dirty`` with uncommitted changes), or
    ``"unknown"``."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "forge_array"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")
