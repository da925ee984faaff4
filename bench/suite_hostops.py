"""hostops: the small steps of scikit-learn's fits, one call at a time, forge_array against
PyTorch and CuPy on one GPU, same run.

    python -m bench.suite_hostops --out "$OUT"            # GPU machine
    python -m bench.suite_hostops --only "unique,X[mask]" --reps 60
    python -m bench.suite_hostops --dry-run               # small sizes on the CPU (NumPy)
    python -m bench.suite_hostops --only take --profile 25  # where its host time goes

The fits of ``bench.suite_sklearn`` on a (200000, 128) float32 matrix are host-bound: their
GPU time is level with PyTorch's, their wall time is not. This suite times the steps they
are made of, each call with the device synchronised before and after (so a step that waits
for the GPU inside pays for it), median µs of ``--reps`` calls after five warm-up calls, on
the same data for each library: label sets (``unique_values`` / ``unique_inverse`` /
``unique_counts`` of 200,000 int64 labels, of 4 labels and of 4,096), boolean masks (``X[c == 1]``, the comparison,
``x[x == 0] = 1.0``), index arrays (``take``), the column statistics (``mean`` / ``std``
along axis 0), centring and the Gram matrix, small ``svd`` and ``eigh``, ``sign``,
``argmax`` of ``abs``, the finiteness check, creation (``zeros``, ``ones``, a Python scalar
on the device), a row write and in-place updates (svd_flip's ``U *= signs`` on the
F-ordered ``U`` a GPU SVD returns, centring ``W -= mean``). ``forge_array`` runs
with automatic fusion off (each step eager, as the fits' small steps are), ``torch`` on
tensors of the same values, ``cupy`` on CuPy arrays through array-api-compat's namespace (as
scikit-learn calls it). The ratio column is forge_array's time over PyTorch's (above 1:
slower). A cell that fails records its error and the run goes on. Writes ``hostops.json``
and ``hostops.md`` under ``<out>/<device-slug>/``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from .report import run_labels, write_named

ROWS, COLS = 200_000, 128


def _data(dry):
    """{library: {name: array}}: the same values for every library."""
    rows = 2_000 if dry else ROWS
    rng = np.random.default_rng(0)
    X = rng.standard_normal((rows, COLS), dtype=np.float32)
    c = (X[:, 0] > 0).astype(np.int64) + 2 * (X[:, 1] > 0).astype(np.int64)
    C = (X[:1000].T @ X[:1000]).astype(np.float32)
    s = np.abs(X[0]).copy()
    s[::7] = 0
    host = {"X": X, "c": c, "C": C, "v": X[:128, :16].copy(), "small": X[:4].copy(),
            "i": np.arange(16, dtype=np.int64) * 16, "s": s, "labels": np.arange(4, dtype=np.int64),
            "c4k": c[:4096].copy(), "U": np.asfortranarray(X), "signs": np.sign(X[0]),
            "W": X.copy(), "m": X.mean(axis=0)}
    import forge_array as xp

    if dry:
        out = {"forge_array": {k: xp.asarray(a, copy=True) for k, a in host.items()}}
        return out
    import cupy as cp

    out = {"forge_array": {k: xp.asarray(cp.asarray(a), copy=True) for k, a in host.items()}}
    import array_api_compat.cupy as cpx

    out["cupy"] = {k: cp.asarray(a) for k, a in host.items()}
    out["_namespaces"] = {"forge_array": xp, "cupy": cpx}
    try:
        import torch

        if torch.cuda.is_available():
            out["torch"] = {k: torch.as_tensor(a, device="cuda") for k, a in host.items()}
            out["_namespaces"]["torch"] = torch
    except ImportError:
        pass
    return out


def _cases():
    """{step: {library: function(namespace, data)}}; a library without its own entry runs
    ``"*"`` (the array API spelling)."""
    def torch_unique(**kw):
        return lambda t, d: t.unique(d["c"], **kw)

    def fill(ns, d):
        s = d["s"]
        s[s == 0] = 1.0

    return {
        "unique_values(c)": {"*": lambda ns, d: ns.unique_values(d["c"]), "torch": torch_unique()},
        "unique_inverse(c)": {"*": lambda ns, d: ns.unique_inverse(d["c"]),
                              "torch": torch_unique(return_inverse=True)},
        "unique_counts(c)": {"*": lambda ns, d: ns.unique_counts(d["c"]),
                             "torch": torch_unique(return_counts=True)},
        "unique_values(4 labels)": {"*": lambda ns, d: ns.unique_values(d["labels"]),
                                    "torch": lambda t, d: t.unique(d["labels"])},
        "unique_inverse(4,096 values)": {"*": lambda ns, d: ns.unique_inverse(d["c4k"]),
                                         "torch": lambda t, d: t.unique(d["c4k"], return_inverse=True)},
        "c == 1": {"*": lambda ns, d: d["c"] == 1},
        "X[c == 1]": {"*": lambda ns, d: d["X"][d["c"] == 1]},
        "s[s == 0] = 1.0": {"*": fill},
        "take(v flat, i)": {"*": lambda ns, d: ns.take(ns.reshape(d["v"], (-1,)), d["i"]),
                            "torch": lambda t, d: t.take(d["v"], d["i"])},
        "mean(X, axis=0)": {"*": lambda ns, d: ns.mean(d["X"], axis=0),
                            "torch": lambda t, d: t.mean(d["X"], dim=0)},
        "std(X, axis=0)": {"*": lambda ns, d: ns.std(d["X"], axis=0),
                           "torch": lambda t, d: t.std(d["X"], dim=0, correction=0)},
        "X - mean(X, axis=0)": {"*": lambda ns, d: d["X"] - ns.mean(d["X"], axis=0),
                                "torch": lambda t, d: d["X"] - t.mean(d["X"], dim=0)},
        "X.T @ X": {"*": lambda ns, d: d["X"].T @ d["X"]},
        "svd(4 x 128)": {"*": lambda ns, d: ns.linalg.svd(d["small"], full_matrices=False)},
        "eigh(128 x 128)": {"*": lambda ns, d: ns.linalg.eigh(d["C"])},
        "sign(v)": {"*": lambda ns, d: ns.sign(d["v"])},
        "argmax(abs(v), axis=0)": {"*": lambda ns, d: ns.argmax(ns.abs(d["v"]), axis=0),
                                   "torch": lambda t, d: t.argmax(t.abs(d["v"]), dim=0)},
        "any(isinf(X))": {"*": lambda ns, d: bool(ns.any(ns.isinf(d["X"])))},
        "float(sum(X))": {"*": lambda ns, d: float(ns.sum(d["X"]))},
        "zeros((4, 128))": {"*": lambda ns, d: ns.zeros((4, COLS), dtype=ns.float32, device=_device(d["X"])),
                            "torch": lambda t, d: t.zeros((4, COLS), device="cuda")},
        "C[1, :] = C[0, :]": {"*": lambda ns, d: d["C"].__setitem__((1, slice(None)), d["C"][0, :])},
        "U *= signs (U F-ordered)": {"*": lambda ns, d: d["U"].__imul__(d["signs"][None, :])},
        "W -= mean (W C-ordered)": {"*": lambda ns, d: d["W"].__isub__(d["m"])},
        "ones(128)": {"*": lambda ns, d: ns.ones(COLS, dtype=ns.float32, device=_device(d["X"])),
                      "torch": lambda t, d: t.ones(COLS, device="cuda")},
        "asarray(5e-6)": {"*": lambda ns, d: ns.asarray(5e-6, dtype=ns.float32, device=_device(d["X"])),
                          "torch": lambda t, d: t.asarray(5e-6, dtype=t.float32, device="cuda")},
    }


def _device(a):
    return a.device


def _sync(dry):
    if dry:
        return lambda: None
    import cupy as cp

    try:
        import torch

        torch_sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    except ImportError:
        def torch_sync():
            return None

    def sync():
        cp.cuda.Device().synchronize()
        torch_sync()
    return sync


def _median_us(call, sync, reps):
    """(median µs of a call with the device synchronised after it, median µs of the call
    alone: the host's part, the device synchronised outside the timing)."""
    for _ in range(5):
        call()
    sync()
    ts, host = [], []
    for _ in range(reps):
        t = time.perf_counter()
        call()
        sync()
        ts.append((time.perf_counter() - t) * 1e6)
    for _ in range(reps):
        t = time.perf_counter()
        call()
        host.append((time.perf_counter() - t) * 1e6)
        sync()
    return statistics.median(ts), statistics.median(host)


def _launches(call, sync):
    """forge_array's kernel launches in one call (CuPy's and cuBLAS's are not counted)."""
    from forge_array.runtime import STATS

    sync()
    n0 = STATS["launches"]
    call()
    sync()
    return STATS["launches"] - n0


def _profile(call, sync, reps, top):
    """cProfile of ``reps`` calls: the ``top`` functions by own time, as text."""
    import cProfile
    import io
    import pstats

    sync()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(reps):
        call()
        sync()
    prof.disable()
    text = io.StringIO()
    stats = pstats.Stats(prof, stream=text)
    stats.sort_stats("tottime").print_stats(top)
    body = text.getvalue()
    return f"{stats.total_calls / reps:.0f} Python calls per call\n" + body[body.find("ncalls"):]


def measure(reps=40, only=None, dry=False, profile=0):
    """({step: {library: µs or {"error": message}}}, {step: {library: host µs}},
    {step: forge_array's launches per call}, {step: profile text} when ``profile`` (the
    number of functions listed per step; 0: none))."""
    import forge_array as xp
    from forge_array.fusion import auto

    data = _data(dry)
    spaces = data.pop("_namespaces", {"forge_array": xp})
    sync = _sync(dry)
    out, host, launches, profiles = {}, {}, {}, {}
    old = auto.enable(False)
    try:
        for step, calls in _cases().items():
            if only and not any(o in step for o in only):
                continue
            row, hrow = {}, {}
            for lib, arrays in data.items():
                fn = calls.get(lib, calls["*"])
                ns = spaces[lib]

                def call(fn=fn, ns=ns, arrays=arrays):
                    return fn(ns, arrays)
                try:
                    t, h = _median_us(call, sync, reps)
                    row[lib], hrow[lib] = round(t, 1), round(h, 1)
                    if lib == "forge_array":
                        launches[step] = _launches(call, sync)
                        if profile:
                            profiles[step] = _profile(call, sync, reps, profile)
                except Exception as e:  # noqa: BLE001  (recorded; the run goes on)
                    row[lib] = {"error": f"{type(e).__name__}: {str(e)[:160]}"}
            out[step], host[step] = row, hrow
            print(step, row, "host", hrow, flush=True)
    finally:
        auto.enable(*old)
    return out, host, launches, profiles


def report(res, device, commit, reps, host=None, launches=None):
    """The markdown table: per step and library the synchronised call, then each library's
    host part and forge_array's launches per call."""
    host, launches = host or {}, launches or {}
    libs = [lib for lib in ("forge_array", "torch", "cupy") if any(lib in r for r in res.values())]
    lines = [f"# Steps of scikit-learn's fits on {device}", "",
             f"One call with the device synchronised before and after, median µs of {reps} calls "
             f"(commit {commit}); `forge/torch` above 1: forge_array is slower. *host*: the "
             "call alone, the device synchronised outside the timing (what the interpreter "
             "spends, waits for the GPU inside the call included); *launches*: forge_array's "
             "own kernel launches per call (CuPy's and cuBLAS's not counted).", "",
             "| step | " + " | ".join(libs) + " | forge/torch | "
             + " | ".join(f"host {lib}" for lib in libs) + " | launches |",
             "|---|" + "---:|" * (2 * len(libs) + 2)]

    def cell(v, lib, r):
        return f"{v:.1f}" if isinstance(v, float) else "error" if lib in r else ""
    for step, r in res.items():
        cells = [cell(r.get(lib), lib, r) for lib in libs]
        hcells = [cell(host.get(step, {}).get(lib), lib, r) for lib in libs]
        f, t = r.get("forge_array"), r.get("torch")
        ratio = f"{f / t:.2f}" if isinstance(f, float) and isinstance(t, float) and t else ""
        lines.append(f"| {step} | " + " | ".join(cells) + f" | {ratio} | " + " | ".join(hcells)
                     + f" | {launches.get(step, '')} |")
    errors = [f"- {step}, {lib}: {v['error']}" for step, r in res.items() for lib, v in r.items()
              if isinstance(v, dict)]
    if errors:
        lines += ["", "Errors:", ""] + errors
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--only", help="comma-separated substrings of step names")
    ap.add_argument("--dry-run", action="store_true", help="small sizes on the CPU (NumPy)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="also profile forge_array's calls of each step (cProfile, the N "
                         "functions of most own time) into hostops-profile.txt")
    ap.add_argument("--out", default="bench/results")
    a = ap.parse_args(argv)
    only = a.only.split(",") if a.only else None
    device, commit = run_labels(a.dry_run)
    res, host, launches, profiles = measure(a.reps, only, a.dry_run, a.profile)
    md = report(res, device, commit, a.reps, host, launches)
    print(md)
    text = "".join(f"==== {step}\n{p}\n" for step, p in profiles.items())
    if a.dry_run:
        print(text)
        return
    folder = write_named(a.out, device, "hostops", {"device": device, "commit": commit, "reps": a.reps,
                                                    "us": res, "host_us": host, "launches": launches}, md)
    if profiles:
        path = os.path.join(folder, "hostops-profile.txt")
        with open(path, "w") as f:
            f.write(text)
        print("wrote", path)


if __name__ == "__main__":
    main()
