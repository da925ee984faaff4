"""A real CuPy workload run unchanged with ``cupy`` and with ``forge_array.cupy``.

A running-statistics pipeline over an (n, 100) float32 matrix ``X`` and a weight vector
``w`` -- the kind of script people already have::

    mu = cp.mean(X, axis=0); sd = cp.std(X, axis=0)     # per-column statistics
    Z = (X - mu) / sd                                    # normalisation (CuPy's own)
    score = cp.matmul(Z, w)                              # matrix-vector product
    best = cp.argmax(X, axis=1)                          # per-row argmax
    run = cp.cumsum(score)                               # running sum of the signal
    hi, lo, total = cp.max(run), cp.min(run), cp.sum(X)

:func:`pipeline` takes the array module ``cp`` as its argument and is called with
``cupy``, with ``forge_array.cupy``, and with ``cupy`` while ``forge_array.cupy.patched()``
is in effect. :func:`run` times the pipeline and each step with CUDA events;
``python -m bench.cupy_workload [--out DIR] [--rows 1e4,1e5,1e6]`` checks that all give
the same results (allclose) and prints and writes a table (JSON + markdown).
``--dry-run`` runs on the CPU: NumPy against the same drop-in code over NumPy in numba's
CUDA simulator, at tiny sizes.

The bench harness runs it too (``python -m bench.run --suite cupy_dropin``) through
:func:`cases`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

NAME = "stats pipeline"
COLS = 100
ROWS = [10**4, 10**5, 10**6]

# --------------------------------------------------------------------------- the script


def _mean_cols(cp, X, w):
    return cp.mean(X, axis=0)


def _std_cols(cp, X, w):
    return cp.std(X, axis=0)


def _normalise(cp, X, w):
    return (X - cp.mean(X, axis=0)) / cp.std(X, axis=0)


def _matvec(cp, X, w):
    return cp.matmul(X, w)


def _argmax_rows(cp, X, w):
    return cp.argmax(X, axis=1)


def _cumsum(cp, X, w):
    return cp.cumsum(X[:, 0])


def _sum_all(cp, X, w):
    return cp.sum(X)


#: the pipeline's steps on their own (name, fn(cp, X, w)), timed one by one
STEPS = [
    ("mean(X, axis=0)", _mean_cols),
    ("std(X, axis=0)", _std_cols),
    ("matmul(X, w)", _matvec),
    ("argmax(X, axis=1)", _argmax_rows),
    ("cumsum(X[:, 0])", _cumsum),
    ("sum(X)", _sum_all),
]


def pipeline(cp, X, w):
    """The whole script, written against the array module ``cp``; returns its results
    (a tuple of arrays).

    >>> import numpy as np
    >>> X = np.arange(12, dtype=np.float32).reshape(4, 3); w = np.ones(3, np.float32)
    >>> [np.asarray(r).shape for r in pipeline(np, X, w)]
    [(3,), (3,), (4,), (4,), (4,), (), (), ()]
    """
    mu = cp.mean(X, axis=0)
    sd = cp.std(X, axis=0)
    Z = (X - mu) / sd
    score = cp.matmul(Z, w)
    best = cp.argmax(X, axis=1)
    run = cp.cumsum(score)
    hi = cp.max(run)
    lo = cp.min(run)
    total = cp.sum(X)
    return (mu, sd, score, best, run, hi, lo, total)


def bytes_moved(rows, cols=COLS, itemsize=4):
    """Minimal memory traffic of :func:`pipeline` (X read by mean, std, the normalisation,
    argmax and sum; Z written once and read once; vectors negligible).

    >>> bytes_moved(10, 10)
    2800
    """
    return 7 * rows * cols * itemsize


# --------------------------------------------------------------------------- data, checks


def make_data(xp, rows, cols=COLS, seed=0):
    """``X`` (rows, cols) float32 with column offsets and scales, and ``w`` (cols,).

    >>> X, w = make_data(np, 5, 3); X.shape, X.dtype.name, w.shape
    ((5, 3), 'float32', (3,))
    """
    rs = xp.random.RandomState(seed)
    X = rs.standard_normal((rows, cols)).astype(np.float32)
    X *= xp.linspace(0.5, 2.0, cols, dtype=np.float32)
    X += xp.linspace(-1.0, 1.0, cols, dtype=np.float32)
    w = rs.standard_normal(cols).astype(np.float32)
    return X, w


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def compare(outs, refs, rtol=1e-3):
    """Worst normwise relative error ``max|a - b| / max|b|`` over the results, and whether
    every result matches (integers exactly, floats within ``rtol``).

    >>> compare((np.ones(3), np.arange(3)), (np.ones(3), np.arange(3)))
    (0.0, True)
    """
    worst, ok = 0.0, True
    for a, b in zip(outs, refs):
        a, b = _host(a), _host(b)
        if a.shape != b.shape:
            return float("inf"), False
        if a.dtype.kind in "iub":
            if not np.array_equal(a, b):
                ok = False
                worst = max(worst, float(np.mean(a != b)))
            continue
        scale = float(np.max(np.abs(b))) if b.size else 1.0
        err = float(np.max(np.abs(a.astype(np.float64) - b))) / (scale or 1.0) if b.size else 0.0
        worst = max(worst, err)
        ok = ok and err <= rtol
    return worst, ok


def check_pipeline(outs, refs, rtol=1e-3):
    """Compare two runs of :func:`pipeline` as :func:`compare` does, except for the grand total
    ``sum(X)``: its error is measured against the sum of magnitudes ``sum|X|`` (the scale of
    the summation error bound; estimated per column from the reference mean and std), because
    the columns' offsets cancel, so ``|sum(X)|`` is ~10^4 times smaller than ``sum|X|`` and two
    float32 summation orders legitimately differ by ~1e-3 of ``|sum(X)|`` at 10^8 elements.

    >>> X, w = make_data(np, 50, 4)
    >>> r = pipeline(np, X, w)
    >>> check_pipeline(r, r)
    (0.0, True)
    """
    worst, ok = compare(outs[:5], refs[:5], rtol)
    # hi / lo are extremes of the running sum: their error is that of the running sum, so
    # measure it on the running sum's scale (lo is a small value at 10^6 rows: on its own
    # scale CuPy's float32 lo differs from the float64 one by 8.5e-4, ours by 2.6e-4)
    run_scale = float(np.max(np.abs(_host(refs[4]).astype(np.float64)))) or 1.0
    for k in (5, 6):
        e = abs(float(_host(outs[k])) - float(_host(refs[k]))) / run_scale
        worst, ok = max(worst, e), ok and e <= rtol
    total, ref_total = float(_host(outs[7])), float(_host(refs[7]))
    mu, sd = _host(refs[0]).astype(np.float64), _host(refs[1]).astype(np.float64)
    rows = _host(refs[2]).shape[0]
    magnitude = rows * float(np.sum(np.sqrt(mu * mu + sd * sd))) or 1.0
    err = abs(total - ref_total) / magnitude
    return max(worst, err), ok and err <= rtol * 1e-2


# --------------------------------------------------------------------------- timing


class _Timer:
    """CUDA events on the current stream (GPU) or wall clock (CPU)."""

    def __init__(self, cupy):
        self.cupy = cupy

    def __call__(self, fn, reps, warmup=2):
        for _ in range(warmup):
            fn()
        if self.cupy is None:
            ts = []
            for _ in range(reps):
                t0 = time.perf_counter()
                fn()
                ts.append((time.perf_counter() - t0) * 1e3)
            return statistics.median(ts)
        cp = self.cupy
        stream = cp.cuda.get_current_stream()
        ts = []
        for _ in range(reps):
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record(stream)
            fn()
            e1.record(stream)
            e1.synchronize()
            ts.append(cp.cuda.get_elapsed_time(e0, e1))
        return statistics.median(ts)


def run(cp, sizes, *, reps=10, data=None, timer=None):
    """Run :func:`pipeline` and each of :data:`STEPS` with array module ``cp`` (``cupy``,
    ``forge_array.cupy``, or ``numpy`` on the CPU) for each row count in ``sizes``; returns
    ``[{"rows", "pipeline_ms", "steps_ms": {...}, "out": results}]`` (median times).

    ``data``: rows -> (X, w) to reuse inputs across modules (default: made here).

    >>> r = run(np, [8], reps=1)
    >>> r[0]["rows"], sorted(r[0]["steps_ms"])[0]
    (8, 'argmax(X, axis=1)')
    """
    if timer is None:
        timer = _Timer(sys.modules.get("cupy") if _on_gpu(cp) else None)
    results = []
    for rows in sizes:
        X, w = data[rows] if data is not None else make_data(_base(cp), rows)
        out = pipeline(cp, X, w)
        rec = {"rows": int(rows), "cols": int(X.shape[1]), "out": out,
               "pipeline_ms": timer(lambda: pipeline(cp, X, w), reps), "steps_ms": {}}
        for name, fn in STEPS:
            rec["steps_ms"][name] = timer(lambda fn=fn: fn(cp, X, w), reps)
        results.append(rec)
    return results


def _base(cp):
    """The plain array module under ``cp`` (for making data)."""
    return getattr(cp, "_xp", None) or (sys.modules.get("cupy") if _on_gpu(cp) else np)


def _on_gpu(cp):
    name = getattr(cp, "__name__", "")
    return name in ("cupy", "forge_array.cupy")


# --------------------------------------------------------------------------- bench harness


def cases(ctx):
    """Cases for ``bench/suite_cupy_dropin.py``: the pipeline with ``cupy`` (reference),
    ``forge_array.cupy``, and ``cupy`` under ``forge_array.cupy.patched()``."""
    from .harness import Case, Impl, Skip

    rows_list = [max(10, r // 10**3) for r in ROWS] if ctx.dry_run else ROWS

    def fa_module():
        if ctx.dry_run:
            raise Skip("forge_array.cupy needs CuPy and a GPU")
        import importlib

        return importlib.import_module("forge_array.cupy")

    def fa_builder(X, w):
        cp = fa_module()
        return lambda: pipeline(cp, X, w)

    def patched_builder(X, w):
        fcp = fa_module()
        import cupy

        def fn():
            with fcp.patched():
                return pipeline(cupy, X, w)

        return fn

    def ref_builder(X, w):
        return lambda: pipeline(ctx.xp, X, w)

    out = []
    for rows in rows_list:
        def make(k, rows=rows):
            return make_data(ctx.xp, rows, COLS, seed=k)

        out.append(Case(
            "cupy_dropin", NAME, rows * COLS, bytes_moved(rows), make,
            {"forge_array": Impl(fa_builder, note="import forge_array.cupy as cp"),
             "cupy+patch()": Impl(patched_builder, note="cupy under forge_array.cupy.patched()"),
             ctx.ref: ref_builder},
            shape=(rows, COLS), dtype="float32", reference=ctx.ref,
            input_bytes=4 * rows * (COLS + 1), mem_bytes=16 * rows * COLS, checker=check_pipeline,
        ))
    return out


# --------------------------------------------------------------------------- main


def _table(rows_out, names):
    lines = []
    head = ("| step | rows | " + " | ".join(f"{n} ms" for n in names)
            + f" | {names[1]} speed-up |")
    lines += [head, "|" + "---|" * (len(names) + 3)]
    for i, rec in enumerate(rows_out[names[0]]):
        for step in ["pipeline"] + [s for s, _ in STEPS]:
            ts = []
            for n in names:
                r = rows_out[n][i]
                ts.append(r["pipeline_ms"] if step == "pipeline" else r["steps_ms"][step])
            sp = ts[0] / ts[1] if len(ts) > 1 and ts[1] else float("nan")
            lines.append(f"| {step} | {rec['rows']:,} | " + " | ".join(f"{t:.3f}" for t in ts)
                         + f" | {sp:.2f}x |")
    return "\n".join(lines)


def _accuracy(xp, data, results):
    """Normwise relative error of each module's float32 results against float64 (column
    mean and std, the grand total, and the running sum computed from the float64 score)."""
    acc = {}
    for i, rows in enumerate(sorted(data)):
        X, w = data[rows]
        X64, w64 = X.astype(np.float64), w.astype(np.float64)
        mu, sd = X64.mean(axis=0), X64.std(axis=0)
        score = ((X64 - mu) / sd) @ w64
        ref = {"mean": mu, "std": sd, "score": score, "cumsum": xp.cumsum(score), "sum": X64.sum()}
        for name, rs in results.items():
            out = rs[i]["out"]
            got = {"mean": out[0], "std": out[1], "score": out[2], "cumsum": out[4], "sum": out[7]}
            acc.setdefault(name, {})[str(rows)] = {
                k: float(np.max(np.abs(_host(got[k]).astype(np.float64) - _host(ref[k])))
                         / max(float(np.max(np.abs(_host(ref[k])))), 1e-300)) for k in ref}
    return acc


def _accuracy_md(acc):
    keys = ["mean", "std", "score", "cumsum", "sum"]
    lines = ["accuracy: normwise relative error against float64", "",
             "| module | rows | " + " | ".join(keys) + " |", "|" + "---|" * (len(keys) + 2)]
    for name, per in acc.items():
        for rows, errs in per.items():
            lines.append(f"| {name} | {int(rows):,} | " + " | ".join(f"{errs[k]:.1e}" for k in keys) + " |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.cupy_workload", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None, help="folder for cupy_workload.json / .md")
    p.add_argument("--rows", default=None, help="row counts, e.g. 1e4,1e6 (default 1e4,1e5,1e6)")
    p.add_argument("--reps", type=int, default=10, help="timed repetitions (median)")
    p.add_argument("--dry-run", action="store_true",
                   help="CPU: NumPy vs the drop-in over NumPy in the simulator, tiny sizes")
    args = p.parse_args(argv)
    sizes = ([int(float(t)) for t in args.rows.split(",")] if args.rows
             else ([16] if args.dry_run else ROWS))
    if args.dry_run:
        os.environ.setdefault("FORGE_ARRAY_SIMULATE", "1")
        from forge_array._dropin import namespace

        mods = {"numpy": np, "forge_array (simulated)": namespace(np)}
        base, timer, device = np, _Timer(None), "CPU (numba CUDA simulator)"
        reps = 1
    else:
        import cupy

        import forge_array.cupy as fcp

        mods = {"cupy": cupy, "forge_array.cupy": fcp}
        base, timer, reps = cupy, _Timer(cupy), args.reps
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        device = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    data = {r: make_data(base, r) for r in sizes}
    results = {}
    for name, cp in mods.items():
        print(f"running with {name} ...", flush=True)
        results[name] = run(cp, sizes, reps=reps, data=data, timer=timer)
    if not args.dry_run:
        print("running with cupy under forge_array.cupy.patched() ...", flush=True)
        with fcp.patched():
            results["cupy + patch()"] = run(cupy, sizes, reps=reps, data=data, timer=timer)
    names = list(results)
    ref = names[0]
    checks = {}
    for n in names[1:]:
        for a, b in zip(results[n], results[ref]):
            err, ok = check_pipeline(a["out"], b["out"])
            checks[f"{n} rows={a['rows']}"] = {"max_rel_err": err, "ok": ok}
            assert ok, f"{n} differs from {ref} at rows={a['rows']}: max rel err {err:.3g}"
    accuracy = _accuracy(base, data, results)
    table = _table(results, names)
    head = (f"# forge_array.cupy drop-in: running-statistics pipeline\n\n"
            f"device: {device}; X: (rows, {COLS}) float32; median of {reps} runs, "
            f"{'wall clock' if args.dry_run else 'CUDA events'}; all results allclose "
            f"(max rel err {max(c['max_rel_err'] for c in checks.values()):.2g}).\n")
    acc_md = _accuracy_md(accuracy)
    print()
    print(head)
    print(table)
    print()
    print(acc_md)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        doc = {"device": device, "cols": COLS, "reps": reps, "python": platform.python_version(),
               "checks": checks, "accuracy_vs_float64": accuracy,
               "results": {n: [{k: v for k, v in r.items() if k != "out"} for r in rs]
                           for n, rs in results.items()}}
        with open(os.path.join(args.out, "cupy_workload.json"), "w") as f:
            json.dump(doc, f, indent=1)
        with open(os.path.join(args.out, "cupy_workload.md"), "w") as f:
            f.write(head + "\n" + table + "\n\n" + acc_md + "\n")
        print(f"\nwrote {args.out}/cupy_workload.json and .md")
    return results


if __name__ == "__main__":
    main()
