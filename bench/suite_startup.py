"""startup: what a fresh process pays before its first results, forge_array beside CuPy.

    python -m bench.suite_startup --out "$OUT"            # 3 fresh processes per configuration
    python -m bench.suite_startup --runs 5 --n 1e5

Each run is a new Python process (``python -c``) that imports the library, puts four arrays
of ``--n`` elements on the GPU and calls, once each and synchronised: ``sum`` (float32,
float64), ``max``, ``mean`` + ``std``, ``cumulative_sum``, ``sum(axis=0)``, ``sum(axis=1)``,
``A @ v``, ``argmax``, and two fused functions, ``xp.fuse`` of ``sum(x*y+1)`` and of
``cumulative_sum(x*y)`` (CuPy: the same expressions eagerly); it reports the import time,
each first call's wall time and the total, then (forge_array) how many calls ran on their
fallback, waits for the background builds and counts the operations whose next call runs on
our kernels (for the fused functions: whose next call fuses its expression). Configurations:
forge_array as a user gets it (``FORGE_ARRAY_COMPILE`` unset: kernels built in the
background) and with ``FORGE_ARRAY_COMPILE=sync`` (with the list of kernels compiled and
their seconds), each with empty caches (fresh ``FORGE_ARRAY_CACHE_DIR``, ``CUPY_CACHE_DIR``
and ``CUDA_CACHE_PATH``, the driver's cache of PTX it compiled: a fresh machine, the
package's shipped kernels aside) and with the caches the first run filled (warm);
forge_array after ``python -m forge_array warmup --dtypes float32,float64 --jobs J``; the
same script written against CuPy (its own kernel cache emptied, then warm). A last process
measures ``xp.mapreduce(lambda v: v * v, xp.ops.add, x)`` at 10^6 elements written inline in
a loop (a new function object per call) against the same function reused. Medians over
``--runs`` processes; writes ``startup.json`` and ``startup.md`` under
``<out>/<device-slug>/``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from .backends import slug

_SCRIPT = r'''
import json, sys, time
t0 = time.perf_counter()
LIB = sys.argv[1]
N = int(float(sys.argv[2]))
if LIB == "forge_array":
    import forge_array as xp
    import cupy as cp
    def arr(h): return xp.asarray(cp.asarray(h))
    mods = xp
else:
    import cupy as cp
    def arr(h): return cp.asarray(h)
    mods = cp
t_import = time.perf_counter() - t0
import numpy as np
rng = np.random.default_rng(0)
side = int(N ** 0.5)
x32 = arr(rng.random(N, dtype=np.float32)); x64 = arr(rng.random(N))
y32 = arr(rng.random(N, dtype=np.float32))
A = arr(rng.random((side, side), dtype=np.float32))
v = arr(rng.random(side, dtype=np.float32))
cp.cuda.runtime.deviceSynchronize()
t_setup = time.perf_counter() - t0 - t_import
calls = [("sum f32", lambda: mods.sum(x32)), ("sum f64", lambda: mods.sum(x64)), ("max", lambda: mods.max(x32)),
         ("mean+std", lambda: (mods.mean(x32), mods.std(x32))),
         ("cumulative_sum", lambda: (mods.cumulative_sum(x32) if LIB == "forge_array" else cp.cumsum(x32))),
         ("sum(axis=0)", lambda: mods.sum(A, axis=0)), ("sum(axis=1)", lambda: mods.sum(A, axis=1)),
         ("A @ v", lambda: A @ v), ("argmax", lambda: mods.argmax(x32))]
if LIB == "forge_array":
    fsum = xp.fuse(lambda a, b: xp.sum(a * b + 1))
    fscan = xp.fuse(lambda a, b: xp.cumulative_sum(a * b))
else:
    fsum = lambda a, b: cp.sum(a * b + 1)
    fscan = lambda a, b: cp.cumsum(a * b)
calls += [("fused sum(x*y+1)", lambda: fsum(x32, y32)), ("fused cumulative_sum(x*y)", lambda: fscan(x32, y32))]
first = {}
numba_loaded = None
for name, call in calls:
    t = time.perf_counter(); call(); cp.cuda.runtime.deviceSynchronize(); first[name] = time.perf_counter() - t
    if name == "argmax":   # the standard calls done: did any of them need numba?
        numba_loaded = float("numba" in sys.modules)
total = time.perf_counter() - t0
res = {"import_s": t_import, "setup_s": t_setup, "first_s": first, "total_s": total}
if LIB == "forge_array":   # after the script: did the first calls defer, do later calls run ours?
    from forge_array.runtime import STATS, background
    res["deferred"] = STATS["deferred"]
    res["stored"] = STATS["stored_launches"]
    res["numba_free"] = STATS["numba_free_kernels"]
    res["numba_loaded"] = numba_loaded
    res["built_in_background_s"] = 0.0
    t = time.perf_counter(); background.wait(600); res["built_in_background_s"] = time.perf_counter() - t
    ours = 0
    for name, call in calls:
        counter = "fused" if name.startswith("fused") else "launches"
        n0 = STATS[counter]; call(); cp.cuda.runtime.deviceSynchronize()
        ours += STATS[counter] > n0
    res["later_calls_on_ours"] = ours
    res["kernels_compiled"] = STATS["compiled"]
    res["compile_s"] = STATS["compile_seconds"]
    if "forge_array.runtime.compiler" in sys.modules:
        res["compiles"] = sys.modules["forge_array.runtime.compiler"].COMPILES[:]
print(json.dumps(res))
'''

_LAMBDA = r'''
import json, time
import cupy as cp
import numpy as np
import forge_array as xp
x = xp.asarray(cp.asarray(np.random.default_rng(0).random(10**6, dtype=np.float32)))
f = lambda v: v * v
def timed(call, n=200):
    call(); cp.cuda.runtime.deviceSynchronize()
    t = time.perf_counter()
    for _ in range(n):
        call()
    cp.cuda.runtime.deviceSynchronize()
    return (time.perf_counter() - t) / n
reused = timed(lambda: xp.mapreduce(f, xp.ops.add, x))
fresh = timed(lambda: xp.mapreduce(lambda v: v * v, xp.ops.add, x))
print(json.dumps({"reused_us": reused * 1e6, "new_lambda_us": fresh * 1e6}))
'''


def _run(code, args, env):
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _median_runs(runs):
    keys = runs[0]["first_s"].keys()
    res = {"import_s": statistics.median(r["import_s"] for r in runs),
           "setup_s": statistics.median(r["setup_s"] for r in runs),
           "totals_s": [r["total_s"] for r in runs],
           "total_s": statistics.median(r["total_s"] for r in runs),
           "first_s": {k: statistics.median(r["first_s"][k] for r in runs) for k in keys}}
    for k in ("deferred", "stored", "numba_free", "numba_loaded", "later_calls_on_ours", "kernels_compiled",
              "compile_s", "built_in_background_s"):
        if k in runs[0]:
            res[k] = statistics.median(r[k] for r in runs)
    if "compiles" in runs[0]:
        res["compiles"] = runs[0]["compiles"]
    return res


def _env(cache, mode):
    """The environment of a measured process: its own caches (forge_array's kernels, CuPy's,
    and the driver's compiled PTX, as on a fresh machine); ``mode`` "default" leaves
    FORGE_ARRAY_COMPILE unset (what a user gets), else sets it."""
    env = dict(os.environ, FORGE_ARRAY_CACHE_DIR=os.path.join(cache, "forge"),
               CUPY_CACHE_DIR=os.path.join(cache, "cupy"), CUDA_CACHE_PATH=os.path.join(cache, "driver"))
    env.pop("FORGE_ARRAY_COMPILE", None)
    if mode != "default":
        env["FORGE_ARRAY_COMPILE"] = mode
    return env


def _cold_and_warm(lib, mode, n, runs):
    """(empty-cache runs, warm-cache runs): every empty-cache run in fresh cache folders, the
    warm runs over the cache the first of them filled."""
    with tempfile.TemporaryDirectory() as root:
        first = _env(root, mode)
        cold = [_run(_SCRIPT, [lib, n], first)]
        for _ in range(runs - 1):
            cold.append(_run(_SCRIPT, [lib, n], _env(tempfile.mkdtemp(dir=root), mode)))
        warm = [_run(_SCRIPT, [lib, n], first) for _ in range(runs)]
    return _median_runs(cold), _median_runs(warm)


def _report(name, args, results):
    """The markdown lines of ``startup.md``."""
    f, s, c = results["forge_array default"], results["forge_array sync"], results["cupy"]
    cols = [("forge_array, empty cache", f["empty_cache"]), ("forge_array, warm cache", f["warm_cache"]),
            ("forge_array, after warmup", f["after_warmup"]), ("sync, empty cache", s["empty_cache"]),
            ("sync, warm cache", s["warm_cache"]), ("CuPy, empty cache", c["empty_cache"]),
            ("CuPy, warm cache", c["warm_cache"])]
    lines = [f"# Startup: a fresh process's first calls ({name}, n = {args.n}, medians of {args.runs} processes)", "",
             "`python -m bench.suite_startup`; seconds. forge_array as a user gets it (the reductions, products "
             "and scans run their shipped kernels with numba unloaded; numba loads and kernels build in the "
             "background where a call needs a build, and meanwhile such a call runs a stored launch, or on CuPy "
             "where CuPy runs it without compiling, or waits for the layer's load where CuPy would compile) and with "
             "`FORGE_ARRAY_COMPILE=sync` (every first call waits for its kernels); the import includes "
             "`import cupy`.", "",
             "| | " + " | ".join(label for label, _ in cols) + " |",
             "|---" * (len(cols) + 1) + "|"]
    for label, key in (("import", "import_s"), ("four arrays put on the GPU", "setup_s"),
                       ("whole script", "total_s")):
        lines.append(f"| {label} | " + " | ".join(f"{col[key]:.3f}" for _, col in cols) + " |")
    for k in f["empty_cache"]["first_s"]:
        lines.append(f"| first {k} | " + " | ".join(f"{col['first_s'][k]:.3f}" for _, col in cols) + " |")
    lines += ["", "| forge_array after the script | " + " | ".join(label for label, _ in cols[:5]) + " |",
              "|---" * 6 + "|"]
    for label, key, fmt in (("calls that ran on the fallback", "deferred", "{:.0f}"),
                            ("launches run from stored launches (before numba loaded)", "stored", "{:.0f}"),
                            ("kernels found without numba (shipped archive, disk cache)", "numba_free", "{:.0f}"),
                            ("numba imported when the nine standard calls end (1: yes)", "numba_loaded",
                             "{:.0f}"),
                            ("background builds still running at the end (s)", "built_in_background_s", "{:.2f}"),
                            (f"of the {len(f['empty_cache']['first_s'])} operations, later calls on our kernels "
                             "(fused: fusing)", "later_calls_on_ours", "{:.0f}"),
                            ("kernels compiled", "kernels_compiled", "{:.0f}"),
                            ("seconds compiling", "compile_s", "{:.2f}")):
        lines.append(f"| {label} | " + " | ".join(fmt.format(col.get(key, 0)) for _, col in cols[:5]) + " |")
    lines += ["", f"`python -m forge_array warmup --dtypes float32,float64 --jobs {args.jobs}` for these sizes "
              f"took {f['warmup_s']:.1f} s.", "",
              "Kernels an empty-cache process compiles with `FORGE_ARRAY_COMPILE=sync` (first run):", "",
              "| kernel | operators | seconds |", "|---|---|---|"]
    for kname, ops, secs in s["empty_cache"].get("compiles", []):
        lines.append(f"| {kname} | {ops or '-'} | {secs:.2f} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per configuration (default 3)")
    ap.add_argument("--n", default="1e5", help="elements per array (default 1e5)")
    ap.add_argument("--out", default="bench/results", help="results folder (default bench/results)")
    ap.add_argument("--jobs", type=int, default=8, help="processes of the warmup (default 8)")
    args = ap.parse_args(argv)
    results = {}
    for lib, mode in (("forge_array", "default"), ("forge_array", "sync"), ("cupy", "default")):
        label = lib if lib == "cupy" else f"forge_array {mode}"
        cold, warm = _cold_and_warm(lib, mode, args.n, args.runs)
        results[label] = {"empty_cache": cold, "warm_cache": warm}
        print(f"{label}: import {warm['import_s']:.2f} s, script empty cache {cold['total_s']:.2f} s, "
              f"warm {warm['total_s']:.2f} s", flush=True)
    with tempfile.TemporaryDirectory() as root:
        env = _env(root, "default")
        side = int(float(args.n) ** 0.5)
        t = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "forge_array", "warmup", "--dtypes", "float32,float64",
                               "--sizes", str(int(float(args.n))), "--shape", f"{side},{side}", "--jobs",
                               str(args.jobs)], env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise RuntimeError("the warmup failed: " + done.stderr[-3000:])
        results["forge_array default"]["warmup_s"] = time.perf_counter() - t
        results["forge_array default"]["after_warmup"] = _median_runs(
            [_run(_SCRIPT, ["forge_array", args.n], env) for _ in range(args.runs)])
    results["mapreduce_lambda"] = _run(_LAMBDA, [], dict(os.environ))
    print(f"mapreduce at 10^6: reused {results['mapreduce_lambda']['reused_us']:.1f} us, new lambda per call "
          f"{results['mapreduce_lambda']['new_lambda_us']:.1f} us", flush=True)
    import cupy

    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    folder = os.path.join(args.out, slug(name))
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "startup.json"), "w") as fh:
        json.dump({"device": name, "n": args.n, "runs": args.runs, "results": results}, fh, indent=1)
    lines = _report(name, args, results)
    m = results["mapreduce_lambda"]
    lines += ["", f"`xp.mapreduce(lambda v: v * v, xp.ops.add, x)` at 10^6 float32: {m['reused_us']:.1f} µs per call "
              f"with the function reused, {m['new_lambda_us']:.1f} µs with a new lambda per call.", ""]
    with open(os.path.join(folder, "startup.md"), "w") as fh:
        fh.write("\n".join(lines))
    print(f"wrote {folder}/startup.json, startup.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
