"""linalg: forge_array's ``linalg`` against CuPy's and PyTorch's on one GPU, same run.

    python -m bench.suite_linalg --out "$OUT"            # GPU machine
    python -m bench.suite_linalg --only svd,eigh --reps 5
    python -m bench.suite_linalg --dry-run               # small sizes on the CPU (NumPy)

Cases: ``svd`` (reduced) of a tall (200000, 128), a square (2048, 2048), a wide
(128, 200000) float32 matrix, of a tall float64 one, of (100000, 1024) and (4096, 2048)
float32 ones (where the Jacobi SVD's cost grows with the columns), of a stack
(4096, 16, 16), of a small (4, 128) one (where the Jacobi path's host steps dominate) and of
a (128, 128) one (the ``R`` whose SVD a tall matrix's is made from); ``svdvals`` (tall,
square); ``qr`` (tall, square, (20000, 26) and (200000, 26): PCA's randomized solver's power
iterations, with their products ``matmul`` ``A @ Q`` and ``matmul_tn`` ``A.T @ P``); ``eigh`` (128, 2048, stack of
(4096, 32, 32)); ``lstsq`` (tall, one right-hand side); ``solve`` (2048 with 16
right-hand sides, stack of (4096, 32, 32) with one); ``inv`` (2048, stack); ``cholesky``
(2048, stack). Columns: ``forge_array`` (``xp.linalg``, on arrays wrapping the CuPy
inputs), ``cupy`` (``cupy.linalg``), ``torch`` (``torch.linalg`` on the same memory) and,
where cuSOLVER offers another routine through CuPy, that one (``cupyx gesvdj``,
``cupyx syevj``, ``cupyx gels``, ``cupyx gesv``). Wall time of a call with the device
synchronised before and after, median of ``--reps`` calls after two warm-up calls (fewer
calls for slow ones: about 3 s per cell, at least 3). ``err`` is the relative difference
from torch's result (from CuPy's without torch) of the value the case checks (singular
values, eigenvalues, ``|diag R|``, the solution, the inverse, the factor). A cell that
fails records its error and the run goes on. Writes ``linalg.json`` and ``linalg.md``
under ``<out>/<device-slug>/``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import traceback

import numpy as np

from .report import run_labels, write_named


class _Skip(Exception):
    pass


def _cases(dry):
    """(name, op, inputs spec) triples; shapes divided down in a dry run."""
    s = (lambda n: max(n // 1000, 8)) if dry else (lambda n: n)
    b = (lambda n: max(n // 256, 2)) if dry else (lambda n: n)
    tall, wide, sq = (s(200_000), 128), (128, s(200_000)), (s(2048), s(2048))
    if dry:
        tall, wide, sq = (2000, 16), (16, 2000), (64, 64)
    return [
        ("svd tall f32", "svd", dict(shape=tall, dtype="float32")),
        ("svd square f32", "svd", dict(shape=sq, dtype="float32")),
        ("svd wide f32", "svd", dict(shape=wide, dtype="float32")),
        ("svd tall f64", "svd", dict(shape=tall, dtype="float64")),
        ("svd (100000, 1024) f32", "svd",
         dict(shape=(s(100_000), 64 if dry else 1024), dtype="float32")),
        ("svd (4096, 2048) f32", "svd", dict(shape=(2 * sq[0], sq[0]), dtype="float32")),
        ("svd stack 16x16 f32", "svd", dict(shape=(b(4096), 16, 16), dtype="float32")),
        ("svd (4, 128) f32", "svd", dict(shape=(4, 128), dtype="float32")),
        # the R of a (200000, 128) matrix's QR, whose SVD the tall matrix's is made from
        ("svd (128, 128) f32", "svd", dict(shape=(128, 128) if not dry else (16, 16), dtype="float32")),
        ("svdvals tall f32", "svdvals", dict(shape=tall, dtype="float32")),
        ("svdvals square f32", "svdvals", dict(shape=sq, dtype="float32")),
        ("qr tall f32", "qr", dict(shape=tall, dtype="float32")),
        ("qr square f32", "qr", dict(shape=sq, dtype="float32")),
        # PCA(svd_solver="randomized")'s power iterations on (200000, 128): 16 components and 10
        # oversamples, each step a product with the data (as given and transposed) and a QR
        ("qr (200000, 26) f32", "qr", dict(shape=(tall[0], 26 if not dry else 4), dtype="float32")),
        # under a million elements Householder QR takes the matrix (linalg's tall-matrix route
        # would be about as fast)
        ("qr (20000, 26) f32", "qr", dict(shape=(s(20_000), 26 if not dry else 4), dtype="float32")),
        ("A @ Q (200000 x 128) f32", "matmul",
         dict(shape=tall, dtype="float32", rhs=(tall[1], 26 if not dry else 4))),
        ("A.T @ P (200000 x 128) f32", "matmul_tn",
         dict(shape=tall, dtype="float32", rhs=(tall[0], 26 if not dry else 4))),
        ("eigh 128 f32", "eigh", dict(shape=(128, 128), dtype="float32", kind="spd")),
        ("eigh 2048 f32", "eigh", dict(shape=sq, dtype="float32", kind="spd")),
        ("eigh stack 32x32 f32", "eigh",
         dict(shape=(b(4096), 32, 32), dtype="float32", kind="spd")),
        ("lstsq tall f32", "lstsq", dict(shape=tall, dtype="float32", rhs=(tall[0],))),
        ("solve 2048 f32", "solve",
         dict(shape=sq, dtype="float32", kind="spd", rhs=(sq[0], 16))),
        ("solve stack 32x32 f32", "solve",
         dict(shape=(b(4096), 32, 32), dtype="float32", kind="spd", rhs=(b(4096), 32, 1))),
        ("inv 2048 f32", "inv", dict(shape=sq, dtype="float32", kind="spd")),
        ("inv stack 32x32 f32", "inv", dict(shape=(b(4096), 32, 32), dtype="float32",
                                            kind="spd")),
        ("cholesky 2048 f32", "cholesky", dict(shape=sq, dtype="float32", kind="spd")),
        ("cholesky stack 32x32 f32", "cholesky",
         dict(shape=(b(4096), 32, 32), dtype="float32", kind="spd")),
    ]


def _inputs(m, spec, seed=0):
    """The case's arrays in module ``m`` (CuPy, or NumPy in a dry run)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(spec["shape"]).astype(spec["dtype"])
    if spec.get("kind") == "spd":   # symmetric positive definite, well conditioned
        n = a.shape[-1]
        a = (a @ np.swapaxes(a, -1, -2)) / n + np.eye(n, dtype=a.dtype)
        a = a.astype(spec["dtype"])
    out = [m.asarray(a)]
    if "rhs" in spec:
        out.append(m.asarray(rng.standard_normal(spec["rhs"]).astype(spec["dtype"])))
    return out


def _impls(op, ctx):
    """{column: builder(inputs) -> zero-argument callable returning the checked value}."""
    xp, cp, torch, cpx = ctx["xp"], ctx["cp"], ctx["torch"], ctx["cupyx"]

    def fa(*arrs):
        return [xp.asarray(a) for a in arrs]

    def th(*arrs):
        if torch is None:
            raise _Skip("torch is not installed")
        dev = "cuda" if ctx["gpu"] else "cpu"
        return [torch.as_tensor(a, device=dev) for a in arrs]

    def cols(f_fa, f_cp, f_th, extra=None):
        d = {"forge_array": lambda ins: (lambda a=fa(*ins): (lambda: f_fa(*a)))(),
             "cupy": lambda ins: (lambda: f_cp(*ins)),
             "torch": lambda ins: (lambda t=th(*ins): (lambda: f_th(*t)))()}
        if extra:
            d.update(extra)
        return d

    def need_cupyx(name):
        if cpx is None:
            raise _Skip("no cupyx.cusolver (CPU run)")
        return getattr(cpx, name)

    if op == "svd":
        def cpx_svd(ins):
            f = need_cupyx("gesvdj")
            a = ins[0]
            if a.ndim == 3 and max(a.shape[-2:]) > 32:
                raise _Skip("gesvdjBatched takes matrices of at most 32 x 32")
            if a.shape[-2] < a.shape[-1]:
                return lambda: f(a.T, full_matrices=False)[1]
            return lambda: f(a, full_matrices=False)[1]
        return cols(lambda a: xp.linalg.svd(a, full_matrices=False).S,
                    lambda a: cp.linalg.svd(a, full_matrices=False)[1],
                    lambda a: torch.linalg.svd(a, full_matrices=False).S,
                    {"cupyx gesvdj": cpx_svd})
    if op == "svdvals":
        return cols(lambda a: xp.linalg.svdvals(a),
                    lambda a: cp.linalg.svd(a, compute_uv=False),
                    lambda a: torch.linalg.svdvals(a))
    if op == "qr":
        return cols(lambda a: xp.abs(xp.linalg.diagonal(xp.linalg.qr(a).R)),
                    lambda a: cp.abs(cp.diagonal(cp.linalg.qr(a)[1])),
                    lambda a: torch.linalg.qr(a).R.diagonal().abs())
    if op == "matmul":
        return cols(lambda a, b: a @ b, lambda a, b: a @ b, lambda a, b: a @ b)
    if op == "matmul_tn":
        return cols(lambda a, b: a.T @ b, lambda a, b: a.T @ b, lambda a, b: a.T @ b)
    if op == "eigh":
        def cpx_eigh(ins):
            f = need_cupyx("syevj")
            return lambda: f(ins[0], with_eigen_vector=True)[0]
        return cols(lambda a: xp.linalg.eigh(a).eigenvalues,
                    lambda a: cp.linalg.eigh(a)[0],
                    lambda a: torch.linalg.eigh(a).eigenvalues,
                    {"cupyx syevj": cpx_eigh})
    if op == "lstsq":
        def fa_lstsq(ins):
            f = getattr(xp.linalg, "lstsq", None)
            if f is None:
                raise _Skip("forge_array.linalg has no lstsq (not in the standard)")
            a, b = fa(*ins)
            return lambda: f(a, b)[0]

        def cpx_gels(ins):
            f = need_cupyx("gels")
            return lambda: f(ins[0], ins[1])
        d = cols(None, lambda a, b: cp.linalg.lstsq(a, b, rcond=None)[0],
                 lambda a, b: torch.linalg.lstsq(a, b[:, None]).solution[:, 0],
                 {"cupyx gels": cpx_gels})
        d["forge_array"] = fa_lstsq
        return d
    if op == "solve":
        def cpx_gesv(ins):
            f = need_cupyx("gesv")
            if ins[0].ndim > 2:
                raise _Skip("cupyx.cusolver.gesv takes one matrix")
            return lambda: f(ins[0], ins[1])
        return cols(lambda a, b: xp.linalg.solve(a, b),
                    lambda a, b: cp.linalg.solve(a, b),
                    lambda a, b: torch.linalg.solve(a, b),
                    {"cupyx gesv": cpx_gesv})
    if op == "inv":
        return cols(lambda a: xp.linalg.inv(a), lambda a: cp.linalg.inv(a),
                    lambda a: torch.linalg.inv(a))
    if op == "cholesky":
        return cols(lambda a: xp.linalg.cholesky(a), lambda a: cp.linalg.cholesky(a),
                    lambda a: torch.linalg.cholesky(a))
    raise ValueError(op)


def _host(v, ctx):
    if hasattr(v, "detach"):
        return v.detach().cpu().numpy()
    if isinstance(v, ctx["xp"].Array):
        return np.asarray(ctx["xp"].asarray(v, device="cpu"))
    if ctx["gpu"] and not isinstance(v, np.ndarray):
        return v.get()
    return np.asarray(v)


def _time(fn, sync, reps, budget_s=3.0):
    for _ in range(2):
        out = fn()
        sync()
    times = []
    t_end = time.perf_counter() + budget_s
    for i in range(reps):
        sync()
        t = time.perf_counter()
        out = fn()
        sync()
        times.append((time.perf_counter() - t) * 1e3)
        if i >= 2 and time.perf_counter() > t_end:
            break
    return statistics.median(times), len(times), out


def measure(reps=10, only=None, dry=False):
    """{case: {column: {"ms": median, "n": calls, "err": rel. diff} or {"error": msg}}}."""
    import forge_array as xp

    ctx = {"xp": xp, "gpu": not dry, "torch": None, "cupyx": None}
    try:
        import torch
        ctx["torch"] = torch if (dry or torch.cuda.is_available()) else None
    except ImportError:
        pass
    if dry:
        ctx["cp"] = np
        # the "cupy" column is NumPy; forge_array arrays live on the CPU
        xp_asarray = xp.asarray
        ctx["xp"] = type("xpcpu", (), {})()
        for k in ("linalg", "abs", "Array"):
            setattr(ctx["xp"], k, getattr(xp, k))
        ctx["xp"].asarray = lambda a, **kw: xp_asarray(a, device=kw.pop("device", "cpu"), **kw)

        def sync():
            pass
    else:
        import cupy as cp
        import cupyx.cusolver as cpx

        ctx["cp"], ctx["cupyx"] = cp, cpx
        torch = ctx["torch"]

        def sync():
            cp.cuda.Device().synchronize()
            if torch is not None:
                torch.cuda.synchronize()

    out = {}
    for name, op, spec in _cases(dry):
        if only and op not in only:
            continue
        row = {}
        try:
            ins = _inputs(ctx["cp"], spec)
        except Exception as e:  # noqa: BLE001  (out of memory: the case is left out)
            out[name] = {"error": f"{type(e).__name__}: {e}"}
            continue
        vals = {}
        for col, build in _impls(op, ctx).items():
            try:
                fn = build(ins)
                ms, n, val = _time(fn, sync, reps)
                row[col] = {"ms": round(ms, 3), "n": n}
                vals[col] = _host(val, ctx)
            except _Skip as e:
                row[col] = {"skip": str(e)}
            except Exception as e:  # noqa: BLE001  (recorded; the run goes on)
                row[col] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
                if os.environ.get("BENCH_TRACEBACK"):
                    traceback.print_exc()
        ref = vals.get("torch", vals.get("cupy"))
        for col, v in vals.items():
            if ref is not None and v.shape == ref.shape:
                scale = float(np.max(np.abs(ref))) or 1.0
                row[col]["err"] = float(np.max(np.abs(v.astype(np.float64) - ref)) / scale)
            elif ref is not None:
                row[col]["err"] = f"shape {v.shape} vs {ref.shape}"
        out[name] = row
        print(name, json.dumps(row), flush=True)
        del ins, vals
        if not dry:
            ctx["cp"].get_default_memory_pool().free_all_blocks()
            if ctx["torch"] is not None:
                ctx["torch"].cuda.empty_cache()
    return out


COLUMNS = ("forge_array", "cupy", "torch", "cupyx gesvdj", "cupyx syevj", "cupyx gels",
           "cupyx gesv")


def _cell(c):
    if c is None:
        return ""
    if "ms" in c:
        err = c.get("err")
        e = f" ({err:.0e})" if isinstance(err, float) and err > 1e-6 else (
            f" ({err})" if isinstance(err, str) else "")
        return f"{c['ms']:.2f}{e}"
    if "skip" in c:
        return "–"
    return "error"


def report(res, device, commit):
    used = [c for c in COLUMNS if any(c in r for r in res.values())]
    lines = [f"# linalg on {device}", "",
             f"Wall ms per call, median, device synchronised (commit {commit}). In "
             "parentheses: relative difference from torch's result when above 1e-6. "
             "`best/forge` = the fastest column ÷ forge_array (< 1: another library is "
             "faster).", "",
             "| case | " + " | ".join(used) + " | best/forge |",
             "|---|" + "---|" * (len(used) + 1)]
    notes = []
    for name, r in res.items():
        if "error" in r and isinstance(r["error"], str):
            lines.append(f"| {name} | " + " | ".join("" for _ in used) + " | |")
            notes.append(f"- {name}: {r['error']}")
            continue
        times = [r[c]["ms"] for c in used if c in r and "ms" in r[c]]
        fa = r.get("forge_array", {}).get("ms")
        ratio = f"{min(times) / fa:.2f}" if fa and times else ""
        lines.append(f"| {name} | " + " | ".join(_cell(r.get(c)) for c in used)
                     + f" | {ratio} |")
        for c in used:
            if c in r and "error" in r[c]:
                notes.append(f"- {name}, {c}: {r[c]['error']}")
    if notes:
        lines += ["", "Errors:", ""] + notes
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--only", help="comma-separated ops (svd,svdvals,qr,eigh,lstsq,solve,"
                                   "inv,cholesky)")
    ap.add_argument("--dry-run", action="store_true", help="small sizes on the CPU")
    ap.add_argument("--out", default="bench/results")
    a = ap.parse_args(argv)
    only = set(a.only.split(",")) if a.only else None
    device, commit = run_labels(a.dry_run)
    res = measure(a.reps, only, a.dry_run)
    md = report(res, device, commit)
    print(md)
    write_named(a.out, device, "linalg", {"device": device, "commit": commit, "reps": a.reps,
                                          "ms": res}, md)


if __name__ == "__main__":
    main()
