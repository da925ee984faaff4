"""sklearn: scikit-learn estimators on GPU arrays through ``array_api_dispatch``, forge_array
with automatic fusion on and off, CuPy and PyTorch beside them (GPU machine only).

    python -m bench.suite_sklearn                         # (200000, 128) float32
    python -m bench.suite_sklearn --rows 100000 --reps 5 --out "$OUT"
    python -m bench.suite_sklearn --only "PCA full,Ridge svd"

Per estimator (PCA ``svd_solver="full"``, ``"covariance_eigh"`` and ``"randomized"``,
StandardScaler, MinMaxScaler, Ridge ``solver="svd"`` and ``"cholesky"``,
LinearDiscriminantAnalysis on four classes made from the data): ``fit`` on the same data,
wall time from the call to its results being in GPU memory (the device synchronised),
median over ``--reps`` rounds after warm-up rounds, each followed by a wait for the kernel
builds it queued, until a round ran every call on our kernels (the steady state of a program
that fits again; a fused path built in the background can need further kernels); in each round every mode runs
three fits in a row and the last two are recorded (a fit right after another library's
meets the memory pools and caches that library's fits left, which slows these host-bound
fits: a program fits with one library). ``fusion on`` is forge_array as a user
gets it (automatic fusion of steps on arrays of at least ``MIN_SIZE`` elements),
``fusion off`` the same with ``FORGE_ARRAY_FUSION=0``'s behaviour
(:func:`forge_array.fusion.auto.enable`), ``cupy`` scikit-learn on CuPy arrays (through
array-api-compat), ``torch`` on PyTorch tensors, in rounds; the fitted
attribute of each is compared with PyTorch's (allclose; CuPy's where torch failed). A fit
that raises records its error in its cell and the run goes on (scikit-learn 1.9 takes only
``solver="svd"`` for Ridge under array API dispatch: ``Ridge cholesky`` records that error
for every library but NumPy, until a later release adds it). Writes ``sklearn.json``
and ``sklearn.md`` under ``<out>/<device-slug>/``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

from .report import run_labels, write_named

# scikit-learn's array API support needs SciPy's, which is read when SciPy is imported
os.environ.setdefault("SCIPY_ARRAY_API", "1")

ESTIMATORS = ("PCA full", "PCA covariance_eigh", "PCA randomized", "StandardScaler",
              "MinMaxScaler", "Ridge svd", "Ridge cholesky", "LinearDiscriminantAnalysis")
MODES = ("fusion on", "fusion off", "cupy", "torch")
#: consecutive fits of one mode in a round; the first of each block is not recorded (it
#: meets the memory pools and caches the other libraries' fits left)
BLOCK = 3
#: warm-up rounds at most (each followed by a wait for the kernels it queued)
MAX_WARMUP = 12
#: the fitted attribute compared across libraries
_ATTRS = {"PCA full": "explained_variance_", "PCA covariance_eigh": "explained_variance_",
          "PCA randomized": "explained_variance_", "StandardScaler": "scale_",
          "MinMaxScaler": "scale_", "Ridge svd": "coef_", "Ridge cholesky": "coef_",
          "LinearDiscriminantAnalysis": "coef_"}
#: what ``fit`` takes besides X: nothing, the real target or the class labels
_TARGET = {"Ridge svd": "y", "Ridge cholesky": "y", "LinearDiscriminantAnalysis": "classes"}


def _estimator(name):
    from sklearn.decomposition import PCA
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.linear_model import Ridge
    from sklearn.preprocessing import MinMaxScaler, StandardScaler

    if name.startswith("PCA"):
        solver = name.split()[1]
        return PCA(n_components=16, svd_solver=solver,
                   **({"random_state": 0, "power_iteration_normalizer": "QR"}
                      if solver == "randomized" else {}))
    if name == "StandardScaler":
        return StandardScaler()
    if name == "MinMaxScaler":
        return MinMaxScaler()
    if name.startswith("Ridge"):
        return Ridge(alpha=1.0, solver=name.split()[1])
    return LinearDiscriminantAnalysis()


def _host(a):
    if hasattr(a, "detach"):  # torch
        return a.detach().cpu().numpy()
    if hasattr(a, "get"):     # cupy
        return a.get()
    import forge_array as xp

    if isinstance(a, xp.Array):
        return np.asarray(xp.asarray(a, device="cpu"))
    return np.asarray(a)


def _short(e):
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"


def measure(rows=200_000, cols=128, reps=7, only=None):
    """{estimator: {mode: ms or {"error": msg}, "match": {mode: bool}}} for the modes
    ``fusion on``, ``fusion off``, ``cupy``, ``torch``."""
    import cupy as cp
    import sklearn
    import torch

    import forge_array as xp
    from forge_array.fusion import auto
    from forge_array.runtime import STATS, background

    sklearn.set_config(array_api_dispatch=True)
    rng = cp.random.default_rng(0)
    cX = rng.standard_normal((rows, cols), dtype=cp.float32)
    cy = rng.standard_normal(rows, dtype=cp.float32)
    # four classes, told apart by the first two features
    cc = ((cX[:, 0] > 0).astype(cp.int64) + 2 * (cX[:, 1] > 0).astype(cp.int64))
    data = {
        "fusion on": (xp.asarray(cX, copy=True), xp.asarray(cy, copy=True),
                      xp.asarray(cc, copy=True)),   # private: may be deferred
        "cupy": (cX.copy(), cy.copy(), cc.copy()),
        "torch": tuple(torch.as_tensor(a, device="cuda").clone() for a in (cX, cy, cc)),
    }
    data["fusion off"] = data["fusion on"]

    def fit(name, mode):
        X, y, c = data[mode]
        est = _estimator(name)
        target = _TARGET.get(name)
        t = time.perf_counter()
        if target is None:
            est.fit(X)
        else:
            est.fit(X, y if target == "y" else c)
        val = getattr(est, _ATTRS[name])
        if isinstance(val, xp.Array):
            val = val._array   # computed
        cp.cuda.Device().synchronize()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) * 1e3, val

    out = {}
    old = auto.enable(True)
    try:
        for name in ESTIMATORS:
            if only and name not in only:
                continue
            runs: dict = {m: [] for m in MODES}
            errors: dict = {}
            vals = {}
            def round_(record):
                for mode in MODES:
                    if mode in errors:
                        continue
                    auto.enable(mode == "fusion on")
                    for k in range(BLOCK):
                        try:
                            ms, vals[mode] = fit(name, mode)
                        except Exception as e:  # noqa: BLE001  (recorded; the run goes on)
                            errors[mode] = _short(e)
                            break
                        if record and k > 0:
                            runs[mode].append(ms)

            # warm-up rounds (kernels, plans, cuSOLVER handles) until one ran every call on
            # our kernels: a kernel built in the background can reveal the next one a fused
            # path needs, so one wait for the builds the first rounds queued is not enough
            for warm in range(MAX_WARMUP):
                before = STATS["deferred"]
                round_(False)
                background.wait(300)
                if warm >= 1 and STATS["deferred"] == before:
                    break
            rounds = warm + 1
            for _ in range(reps):
                round_(True)
            row: dict = {m: ({"error": errors[m]} if m in errors else
                             round(statistics.median(runs[m]), 2)) for m in MODES}
            ref_mode = "torch" if "torch" in vals else ("cupy" if "cupy" in vals else None)
            match = {}
            if ref_mode is not None:
                ref = _host(vals[ref_mode])
                for m, v in vals.items():
                    if m == ref_mode:
                        continue
                    try:
                        h = _host(v)
                        match[m] = bool(h.shape == ref.shape and
                                        np.allclose(h, ref, rtol=1e-3, atol=1e-4))
                    except Exception as e:  # noqa: BLE001
                        match[m] = _short(e)
            row["match"] = match
            row["warm-up rounds"] = rounds
            row["reference"] = ref_mode
            out[name] = row
            print(name, json.dumps(row), flush=True)
    finally:
        auto.enable(*old)
    return out


def _ms(v):
    return f"{v:.2f}" if isinstance(v, (int, float)) else "error"


def report(res, rows, cols, device, commit):
    lines = [f"# scikit-learn on {device}", "",
             f"`fit` of ({rows}, {cols}) float32 with `array_api_dispatch=True`, wall ms, median "
             f"(commit {commit}). `on/off` = fusion off ÷ fusion on (> 1: automatic fusion "
             "is faster); `best/on` = the fastest of CuPy and torch ÷ fusion on (< 1: another "
             "library is faster). `matches` lists what differs from the reference (torch's "
             "fitted attribute, or CuPy's where torch failed); `warm-up rounds`: rounds of fits "
             "until one ran every call on our kernels.", "",
             "| estimator | forge_array, fusion on | fusion off | cupy | torch | on/off | "
             "best/on | matches | warm-up rounds |",
             "|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for name, r in res.items():
        on, off = r["fusion on"], r["fusion off"]
        num = lambda v: isinstance(v, (int, float))  # noqa: E731
        onoff = f"{off / on:.2f}" if num(on) and num(off) else ""
        peers = [r[m] for m in ("cupy", "torch") if num(r[m])]
        best = f"{min(peers) / on:.2f}" if num(on) and peers else ""
        bad = [m for m, ok in r["match"].items() if ok is not True]
        matches = ("no reference" if r["reference"] is None else
                   "yes" if not bad else "NO: " + ", ".join(bad))
        lines.append(f"| {name} | {_ms(on)} | {_ms(off)} | {_ms(r['cupy'])} | "
                     f"{_ms(r['torch'])} | {onoff} | {best} | {matches} | {r.get('warm-up rounds', '')} |")
        notes += [f"- {name}, {m}: {r[m]['error']}" for m in MODES if not num(r[m])]
    if notes:
        lines += ["", "Errors:", ""] + notes
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--cols", type=int, default=128)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--only", help="comma-separated estimator names (see ESTIMATORS)")
    ap.add_argument("--out", default="bench/results")
    a = ap.parse_args(argv)
    only = set(a.only.split(",")) if a.only else None
    device, commit = run_labels()
    res = measure(a.rows, a.cols, a.reps, only)
    md = report(res, a.rows, a.cols, device, commit)
    print(md)
    write_named(a.out, device, "sklearn", {"device": device, "rows": a.rows, "cols": a.cols,
                                           "commit": commit, "fit_ms": res}, md)


if __name__ == "__main__":
    main()
