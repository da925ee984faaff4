"""sklearn: scikit-learn estimators on GPU arrays through ``array_api_dispatch``, forge_array
with automatic fusion on and off, PyTorch beside them (GPU machine only).

    python -m bench.suite_sklearn                         # (200000, 128) float32
    python -m bench.suite_sklearn --rows 100000 --reps 5 --out "$OUT"

Per estimator (PCA ``svd_solver="full"`` and ``"covariance_eigh"``, StandardScaler, Ridge
``solver="svd"``): ``fit`` on the same data, wall time from the call to its results being
in GPU memory (the device synchronised), median of ``--reps`` runs after two warm-up fits.
``fusion on`` is forge_array as a user gets it (automatic fusion of steps on arrays of at
least ``MIN_SIZE`` elements), ``fusion off`` the same with ``FORGE_ARRAY_FUSION=0``'s
behaviour (:func:`forge_array.fusion.auto.enable`), alternated run by run; the fitted
attributes of both are compared with PyTorch's (allclose).  Writes ``sklearn.json`` and
``sklearn.md`` under ``<out>/<device-slug>/``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

from .backends import slug

# scikit-learn's array API support needs SciPy's, which is read when SciPy is imported
os.environ.setdefault("SCIPY_ARRAY_API", "1")

ESTIMATORS = ("PCA full", "PCA covariance_eigh", "StandardScaler", "Ridge svd")


def _estimator(name):
    from sklearn.decomposition import PCA
    from sklearn.linear_model import Ridge
    from sklearn.preprocessing import StandardScaler

    if name == "PCA full":
        return PCA(n_components=16, svd_solver="full")
    if name == "PCA covariance_eigh":
        return PCA(n_components=16, svd_solver="covariance_eigh")
    if name == "StandardScaler":
        return StandardScaler()
    return Ridge(alpha=1.0, solver="svd")


_ATTRS = {"PCA full": "explained_variance_", "PCA covariance_eigh": "explained_variance_",
          "StandardScaler": "scale_", "Ridge svd": "coef_"}


def _host(a):
    if hasattr(a, "cpu"):  # torch
        return a.cpu().numpy()
    import forge_array as xp

    return np.asarray(xp.asarray(a, device="cpu"))


def measure(rows=200_000, cols=128, reps=7):
    """{estimator: {"fusion on": ms, "fusion off": ms, "torch": ms, "match": bool}}."""
    import cupy as cp
    import sklearn
    import torch

    import forge_array as xp
    from forge_array.fusion import auto

    sklearn.set_config(array_api_dispatch=True)
    rng = cp.random.default_rng(0)
    cX = rng.standard_normal((rows, cols), dtype=cp.float32)
    cy = rng.standard_normal(rows, dtype=cp.float32)
    X, y = xp.asarray(cX, copy=True), xp.asarray(cy, copy=True)   # private: may be deferred
    tX, ty = torch.as_tensor(cX, device="cuda").clone(), torch.as_tensor(cy, device="cuda").clone()

    def fit(name, data, target):
        est = _estimator(name)
        t = time.perf_counter()
        if name == "Ridge svd":
            est.fit(data, target)
        else:
            est.fit(data)
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
            runs: dict = {"fusion on": [], "fusion off": [], "torch": []}
            vals = {}
            for _ in range(2):  # warm-up: kernels, plans, cuSOLVER handles
                for mode in runs:
                    auto.enable(mode == "fusion on")
                    fit(name, tX if mode == "torch" else X, ty if mode == "torch" else y)
            for _ in range(reps):
                for mode in runs:
                    auto.enable(mode == "fusion on")
                    ms, vals[mode] = fit(name, tX if mode == "torch" else X,
                                         ty if mode == "torch" else y)
                    runs[mode].append(ms)
            ref = _host(vals["torch"])
            match = all(np.allclose(_host(vals[m]), ref, rtol=1e-3, atol=1e-4)
                        for m in ("fusion on", "fusion off"))
            out[name] = {m: round(statistics.median(v), 2) for m, v in runs.items()}
            out[name]["match"] = bool(match)
    finally:
        auto.enable(*old)
    return out


def report(res, rows, cols, device, commit):
    lines = [f"# scikit-learn on {device}", "",
             f"`fit` of ({rows}, {cols}) float32 with `array_api_dispatch=True`, wall ms, median "
             f"(commit {commit}). `on/off` = fusion off ÷ fusion on (> 1: automatic fusion "
             "is faster).", "",
             "| estimator | forge_array, fusion on | fusion off | torch | on/off | matches torch |",
             "|---|---|---|---|---|---|"]
    for name, r in res.items():
        lines.append(f"| {name} | {r['fusion on']:.2f} | {r['fusion off']:.2f} | "
                     f"{r['torch']:.2f} | {r['fusion off'] / r['fusion on']:.2f} | "
                     f"{'yes' if r['match'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--cols", type=int, default=128)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", default="bench/results")
    a = ap.parse_args(argv)
    import cupy as cp

    device = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    res = measure(a.rows, a.cols, a.reps)
    commit = os.environ.get("FORGE_ARRAY_GIT", "unknown")
    md = report(res, a.rows, a.cols, device, commit)
    print(md)
    d = os.path.join(a.out, slug(device))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "sklearn.json"), "w") as f:
        json.dump({"device": device, "rows": a.rows, "cols": a.cols, "commit": commit,
                   "fit_ms": res}, f, indent=1)
    with open(os.path.join(d, "sklearn.md"), "w") as f:
        f.write(md)


if __name__ == "__main__":
    main()
