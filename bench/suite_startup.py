"""startup: what a fresh process pays before its first results, forge_array beside CuPy.

    python -m bench.suite_startup --out "$OUT"            # 3 fresh processes per configuration
    python -m bench.suite_startup --runs 5 --n 1e5

Each run is a new Python process (``python -c``) that imports the library, puts three arrays
of ``--n`` elements on the GPU and calls, once each and synchronised: ``sum`` (float32,
float64), ``max``, ``mean`` + ``std``, ``cumulative_sum``, ``sum(axis=0)``, ``sum(axis=1)``,
``A @ v`` and ``argmax``; it reports the import time, each first call's wall time and the
total. Configurations: forge_array with an empty kernel cache (a fresh
``FORGE_ARRAY_CACHE_DIR``), forge_array with the cache the first run filled (warm),
forge_array with a cache filled by ``python -m forge_array warmup --dtypes float32,float64``
(for the script's sizes) before the first run, and the same script written against CuPy
(its own kernel cache emptied, then warm). A last process
measures ``xp.mapreduce(lambda v: v * v, xp.ops.add, x)`` at 10^6 elements written inline in a
loop (a new function object per call) against the same function reused. Medians over
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
A = arr(rng.random((side, side), dtype=np.float32))
v = arr(rng.random(side, dtype=np.float32))
cp.cuda.runtime.deviceSynchronize()
calls = [("sum f32", lambda: mods.sum(x32)), ("sum f64", lambda: mods.sum(x64)), ("max", lambda: mods.max(x32)),
         ("mean+std", lambda: (mods.mean(x32), mods.std(x32))),
         ("cumulative_sum", lambda: (mods.cumulative_sum(x32) if LIB == "forge_array" else cp.cumsum(x32))),
         ("sum(axis=0)", lambda: mods.sum(A, axis=0)), ("sum(axis=1)", lambda: mods.sum(A, axis=1)),
         ("A @ v", lambda: A @ v), ("argmax", lambda: mods.argmax(x32))]
first = {}
for name, call in calls:
    t = time.perf_counter(); call(); cp.cuda.runtime.deviceSynchronize(); first[name] = time.perf_counter() - t
print(json.dumps({"import_s": t_import, "first_s": first, "total_s": time.perf_counter() - t0}))
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
    return {"import_s": statistics.median(r["import_s"] for r in runs),
            "total_s": statistics.median(r["total_s"] for r in runs),
            "first_s": {k: statistics.median(r["first_s"][k] for r in runs) for k in keys}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per configuration (default 3)")
    ap.add_argument("--n", default="1e5", help="elements per array (default 1e5)")
    ap.add_argument("--out", default="bench/results", help="results folder (default bench/results)")
    args = ap.parse_args(argv)
    results = {}
    for lib in ("forge_array", "cupy"):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, FORGE_ARRAY_CACHE_DIR=os.path.join(cache, "forge"),
                       CUPY_CACHE_DIR=os.path.join(cache, "cupy"))
            cold = [_run(_SCRIPT, [lib, args.n], env)]       # the first run fills the caches
            for _ in range(args.runs - 1):                    # later empty-cache runs: fresh dirs
                sub = tempfile.mkdtemp(dir=cache)
                cold.append(_run(_SCRIPT, [lib, args.n], dict(env, FORGE_ARRAY_CACHE_DIR=os.path.join(sub, "f"),
                                                              CUPY_CACHE_DIR=os.path.join(sub, "c"))))
            warm = [_run(_SCRIPT, [lib, args.n], env) for _ in range(args.runs)]
        results[lib] = {"empty_cache": _median_runs(cold), "warm_cache": _median_runs(warm)}
        if lib == "forge_array":
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, FORGE_ARRAY_CACHE_DIR=cache)
                side = int(float(args.n) ** 0.5)
                t = time.perf_counter()
                subprocess.run([sys.executable, "-m", "forge_array", "warmup", "--dtypes", "float32,float64",
                                "--sizes", str(int(float(args.n))), "--shape", f"{side},{side}"],
                               env=env, check=True, capture_output=True, timeout=900)
                results[lib]["warmup_s"] = time.perf_counter() - t
                results[lib]["after_warmup"] = _median_runs([_run(_SCRIPT, [lib, args.n], env)
                                                             for _ in range(args.runs)])
        print(f"{lib}: import {results[lib]['warm_cache']['import_s']:.2f} s, script empty cache "
              f"{results[lib]['empty_cache']['total_s']:.2f} s, warm {results[lib]['warm_cache']['total_s']:.2f} s",
              flush=True)
    results["mapreduce_lambda"] = _run(_LAMBDA, [], dict(os.environ))
    print(f"mapreduce at 10^6: reused {results['mapreduce_lambda']['reused_us']:.1f} us, new lambda per call "
          f"{results['mapreduce_lambda']['new_lambda_us']:.1f} us", flush=True)
    import cupy

    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    folder = os.path.join(args.out, slug(name))
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "startup.json"), "w") as fh:
        json.dump({"device": name, "n": args.n, "runs": args.runs, "results": results}, fh, indent=1)
    lines = [f"# Startup: a fresh process's first calls ({name}, n = {args.n}, medians of {args.runs} processes)", "",
             "`python -m bench.suite_startup`; seconds.", "",
             "| | forge_array empty cache | forge_array warm | forge_array after warmup | CuPy empty cache "
             "| CuPy warm |",
             "|---|---|---|---|---|---|"]
    f, c = results["forge_array"], results["cupy"]
    rows = [("import", "import_s"), ("whole script", "total_s")]
    for label, key in rows:
        lines.append(f"| {label} | {f['empty_cache'][key]:.3f} | {f['warm_cache'][key]:.3f} | "
                     f"{f['after_warmup'][key]:.3f} | {c['empty_cache'][key]:.3f} | {c['warm_cache'][key]:.3f} |")
    for k in f["empty_cache"]["first_s"]:
        lines.append(f"| first {k} | {f['empty_cache']['first_s'][k]:.3f} | {f['warm_cache']['first_s'][k]:.3f} | "
                     f"{f['after_warmup']['first_s'][k]:.3f} | {c['empty_cache']['first_s'][k]:.3f} | "
                     f"{c['warm_cache']['first_s'][k]:.3f} |")
    lines += ["", f"`python -m forge_array warmup --dtypes float32,float64` for these sizes took "
              f"{f['warmup_s']:.1f} s."]
    m = results["mapreduce_lambda"]
    lines += ["", f"`xp.mapreduce(lambda v: v * v, xp.ops.add, x)` at 10^6 float32: {m['reused_us']:.1f} µs per call "
              f"with the function reused, {m['new_lambda_us']:.1f} µs with a new lambda per call.", ""]
    with open(os.path.join(folder, "startup.md"), "w") as fh:
        fh.write("\n".join(lines))
    print(f"wrote {folder}/startup.json, startup.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
