"""compile: where a kernel specialisation's time goes, what background builds cost the user's
other GPU work, what the CPU device's operators cost in a first and a later process, and what a
property-based test suite costs on a fresh machine.

    python -m bench.suite_compile --out "$OUT"                 # every part (GPU machine)
    python -m bench.suite_compile --parts cpu                  # the CPU part only (any machine)
    python -m bench.suite_compile --parts phases,gil --runs 3
    python -m bench.suite_compile --parts hypothesis --examples 1000           # GPU machine
    python -m bench.suite_compile --parts hypothesis --device cpu --examples 30  # smoke test, any machine

Every measurement runs in fresh Python processes with their own empty caches
(``FORGE_ARRAY_CACHE_DIR``, ``CUPY_CACHE_DIR``):

- ``phases`` (GPU): per standard kernel (full reduction, look-back scan, column reduction,
  matrix-vector product, argmax), a process builds one kernel first (numba's and the CUDA
  target's one-time set-up), then the measured one with ``FORGE_ARRAY_COMPILE=sync``: its
  first call's wall time, the compile and load seconds of ``runtime.STATS``, and, from a
  second process that profiles the same call, the shares of the build's time by the module
  that spent it: numba's front end (bytecode to IR), typing, lowering (numba's code
  generation into LLVM IR, llvmlite.ir), LLVM (llvmlite.binding: passes, object code),
  NVVM, forge_array's own code (factories, intrinsics), CuPy (module load), the rest.
- ``gil`` (GPU): a loop of ``torch.sum`` (when PyTorch is installed) and ``cupy.cumsum`` of
  1,000 float32 (each call synchronised) timed alone, then while forge_array's first calls
  of standard operations and of fused expressions (an empty cache; the fused kernels are
  never shipped, so they build) build their kernels in the background: with the
  build process (the default) and with builds on the background thread
  (``FORGE_ARRAY_BUILD_PROCESS=0``); separate rows while the kernel layer (numba) loads
  and while kernels build, then alone again once the background work has ended.  The ratio
  to the faster of the two lone loops is the cost to the user's work.
- ``first`` (GPU): a new user's first calls of nine standard operations (``sum`` of float32
  and float64, ``max``, ``mean`` + ``std``, ``cumulative_sum``, ``sum`` along each axis of a
  matrix, ``A @ v``, ``argmax``; 10^5 elements) in a fresh process with empty caches, in the
  default background mode, beside the same calls of CuPy's own functions in a fresh process
  with an empty CuPy cache, and in a later process on the same caches: each first call's
  wall time and their total.
- ``cpu``: a script of user operators on CPU arrays (``reduce`` with a lambda, a tuple
  ``accumulate``, a min-plus ``matvec``, ``mapreduce`` with a closure, an axis ``reduce``)
  in a first process (empty cache) and ``--runs`` later processes: wall time, the script's
  own time, per call, and numba's CPU compilations made or loaded from the disk.
- ``operators`` (GPU): a script of generic operations with the user's own Python operators,
  with operator linking and the shipped skeletons, without the archive, and with full builds
  only: compile seconds per new specialisation (see :mod:`bench.compile_operators`).
- ``hypothesis`` (GPU; ``--device cpu`` runs it anywhere): what a user meets running a
  property-based test suite on a fresh machine. One hypothesis ``@given`` test
  (``--examples`` examples, derandomized, no database, no deadline, every health check off)
  draws an operation (sum, prod, max, min, mean, var, std, argmax, argmin, any, all,
  cumulative_sum, cumulative_prod, ``A @ v``, ``v @ A``), a dtype it accepts, an array of 1 or 2
  dimensions (0 to 2,000 elements, sizes at block and tile edges) built on the host and cut as a
  view on the device (contiguous, offset, step 2, reversed, transposed, mixtures:
  ``forge_array.testing.view_layouts``) and an axis, runs it and compares with NumPy (exact for
  integers, bool and selections; a float64 reference within the worst-case rounding bound for
  floats): a mismatch or an error fails the row (and the command's exit status). Rows
  (``--hypothesis-rows``), each a fresh process with empty caches and the same examples:
  ``forge`` (forge_array on ``--device``, ``FORGE_ARRAY_COMPILE=sync``), ``cupy`` (CuPy's own
  functions, an empty ``CUPY_CACHE_DIR``; not with ``--device cpu``) and ``forge-noprebuilt``
  (also ``FORGE_ARRAY_PREBUILT=0``: no kernel shipped prebuilt, everything compiles): process
  and test seconds, examples, failures, ``runtime.STATS``' kernel counters and the ten slowest
  kernel builds. A process past ``--hypothesis-timeout`` seconds is stopped and reported as
  timed out (with its last progress). ``FORGE_ARRAY_SIMULATE=1`` in the environment reaches
  the forge rows (with ``--device cpu``: our kernels in numba's CUDA simulator).

Writes ``compile.json`` and ``compile.md`` under ``<out>/<device-slug>/`` (the GPU's name, or
the CPU's model where there is no GPU).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile

from .backends import slug
from .common import ensure_bytecode, fresh_env, run_script
from .compile_hypothesis import report_hypothesis, run_hypothesis
from .compile_operators import report_operators, run_operators

# ----------------------------------------------------------------------------- phases

_PHASES = r'''
import cProfile, json, pstats, sys, time
import numpy as np
import cupy as cp
import forge_array as xp
from forge_array.runtime import STATS
which, profile = sys.argv[1], sys.argv[2] == "1"
rng = np.random.default_rng(0)
x32 = xp.asarray(cp.asarray(rng.random(100_000, dtype=np.float32)))
x64 = xp.asarray(cp.asarray(rng.random(100_000)))
A = xp.asarray(cp.asarray(rng.random((300, 300), dtype=np.float32)))
v = xp.asarray(cp.asarray(rng.random(300, dtype=np.float32)))
t = time.perf_counter(); xp.sum(x64); cp.cuda.runtime.deviceSynchronize()
setup = time.perf_counter() - t
calls = {"sum float32": lambda: xp.sum(x32), "cumulative_sum float32": lambda: xp.cumulative_sum(x32),
         "sum(A, axis=0)": lambda: xp.sum(A, axis=0), "A @ v": lambda: A @ v, "argmax float32": lambda: xp.argmax(x32)}
call = calls[which]
c0, s0, l0 = STATS["compiled"], STATS["compile_seconds"], STATS["load_seconds"]
prof = cProfile.Profile() if profile else None
t = time.perf_counter()
if prof:
    prof.enable()
call(); cp.cuda.runtime.deviceSynchronize()
if prof:
    prof.disable()
wall = time.perf_counter() - t
res = {"first_kernel_s": setup, "wall_s": wall, "kernels": STATS["compiled"] - c0,
       "compile_s": STATS["compile_seconds"] - s0, "load_s": STATS["load_seconds"] - l0}
if prof:
    buckets = {}
    order = [("nvvm", ("cudadrv/nvvm",)), ("llvm (llvmlite.binding)", ("llvmlite/binding",)),
             ("lowering", ("llvmlite/ir", "lowering", "cgutils", "core/base.py", "imputils", "cuda/target.py",
                           "/np/", "/cpython/", "codegen", "cudaimpl", "mathimpl", "printimpl", "callconv",
                           "datamodel", "extending", "funcdesc", "environment")),
             ("typing", ("typeinfer", "/typing/", "/types/", "typeconv", "templates", "typeof", "signature")),
             ("front end (bytecode, IR, passes)", ("interpreter", "bytecode", "byteflow", "/ir.py", "ir_utils",
                                                   "untyped_passes", "typed_passes", "analysis", "controlflow",
                                                   "dataflow", "transforms", "rewrites", "consts", "postproc",
                                                   "ssa", "compiler", "pipeline", "inline")),
             ("forge_array", ("forge_array/",)), ("cupy (module load)", ("cupy",))]
    for (path, line, fn), (cc, nc, tt, ct, callers) in pstats.Stats(prof).stats.items():
        name = "other"
        for b, pats in order:
            if any(p in path for p in pats):
                name = b
                break
        buckets[name] = buckets.get(name, 0.0) + tt
    res["profile_s"] = buckets
print(json.dumps(res))
'''

_PHASE_CASES = ("sum float32", "cumulative_sum float32", "sum(A, axis=0)", "A @ v", "argmax float32")

# ----------------------------------------------------------------------------- gil

_GIL = r'''
import json, statistics, sys, threading, time
import numpy as np
import cupy as cp
try:
    import torch
    if not torch.cuda.is_available():
        torch = None
except Exception:
    torch = None
ITERS = int(sys.argv[1])
rng = np.random.default_rng(0)
h = rng.random(1000, dtype=np.float32)
c = cp.asarray(h)
t_ = torch.from_numpy(h).cuda() if torch is not None else None
def torch_sum():
    torch.sum(t_); torch.cuda.synchronize()
def cupy_cumsum():
    cp.cumsum(c); cp.cuda.runtime.deviceSynchronize()
ops = [("cupy.cumsum", cupy_cumsum)] + ([("torch.sum", torch_sum)] if torch is not None else [])
def sample():
    out = []
    for name, f in ops:
        t = time.perf_counter(); f(); out.append((name, time.perf_counter() - t))
    return out
for _ in range(50):
    sample()
alone = {name: [] for name, _ in ops}
for _ in range(ITERS):
    for name, dt in sample():
        alone[name].append(dt)
import forge_array as xp
from forge_array.runtime import STATS, background, build_process
x32 = xp.asarray(cp.asarray(h)); x64 = xp.asarray(cp.asarray(h.astype(np.float64)))
A = xp.asarray(cp.asarray(rng.random((40, 25), dtype=np.float32)))
v = xp.asarray(cp.asarray(rng.random(25, dtype=np.float32)))
t0 = time.perf_counter()
for a in (x32, x64):
    xp.sum(a); xp.max(a); xp.cumulative_sum(a); xp.argmax(a); xp.mean(a); xp.std(a)
xp.sum(A, axis=0); xp.sum(A, axis=1); A @ v
# fused expressions (plain-code fusion at any size): kernels of generated functions, never shipped
xp.set_flags(fusion_min_size=0)
f32 = xp.asarray(cp.asarray(h), copy=True)      # private memory: deferred, then fused
B = xp.asarray(cp.asarray(rng.random((40, 25), dtype=np.float32)), copy=True)
for r in (xp.sum(f32 * f32 + 1), xp.sum((B - xp.mean(B, axis=0)) ** 2, axis=0),
          xp.max(xp.where(xp.isnan(f32), -xp.inf, f32)), xp.std(f32 * 2.0 + 1.0), xp.sum(B * B, axis=1)):
    r._array
calls_s = time.perf_counter() - t0
during = {"layer": {name: [] for name, _ in ops}, "builds": {name: [] for name, _ in ops}}
deadline = time.perf_counter() + 300
while time.perf_counter() < deadline:
    busy = bool(background._QUEUE) or background._BUSY[0] > 0
    if not busy:
        break
    phase = "builds" if background.state("kernel layer") == "done" else "layer"
    for name, dt in sample():
        during[phase][name].append(dt)
work_s = time.perf_counter() - t0
background.wait(300)
after = {name: [] for name, _ in ops}   # alone again, the builds over (clocks and caches warm)
for _ in range(ITERS):
    for name, dt in sample():
        after[name].append(dt)
print(json.dumps({"alone": alone, "after": after, "during": during, "calls_s": calls_s, "background_s": work_s,
                  "process_builds": STATS["process_builds"], "compiled_here": STATS["compiled"],
                  "build_process": build_process.stats(),
                  "failures": {str(k): repr(e) for k, e in background.failures().items()}}))
'''

# ----------------------------------------------------------------------------- cpu

_CPU = r'''
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import forge_array as xp
from forge_array import ops
t_import = time.perf_counter() - t0
x = xp.asarray(np.arange(1000, dtype=np.float64), device="cpu")
k = xp.asarray(np.arange(1000, dtype=np.int64), device="cpu")
A = xp.asarray(np.arange(64 * 32, dtype=np.float64).reshape(64, 32), device="cpu")
v = xp.asarray(np.arange(32, dtype=np.float64), device="cpu")
scale = 3.0
calls = [("reduce(lambda)", lambda: xp.reduce(lambda a, b: a + b * 0.5, x)),
         ("accumulate(tuple)", lambda: xp.accumulate(lambda p, q: (p[0] + q[0], max(p[1], q[1])), (x, k))),
         ("matvec(min-plus)", lambda: xp.matvec(A, v, f=lambda a, b: a + b, op=ops.minimum)),
         ("mapreduce(closure)", lambda: xp.mapreduce(lambda a: a * scale, ops.add, x)),
         ("reduce(lambda, axis=1)", lambda: xp.reduce(lambda a, b: a * b, A, axis=1))]
times = {}
for name, call in calls:
    t = time.perf_counter(); call(); times[name] = time.perf_counter() - t
from forge_array.runtime import STATS
print(json.dumps({"import_s": t_import, "calls_s": times, "script_s": time.perf_counter() - t0,
                  "cpu_compiled": STATS["cpu_compiled"], "cpu_disk_hits": STATS["cpu_disk_hits"],
                  "numba_cuda_loaded": "numba.cuda" in sys.modules}))
'''


_FIRST = r'''
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import cupy as cp
which = sys.argv[1]
if which == "forge":
    import forge_array as xp
    wrap = xp.asarray
else:
    xp = cp
    wrap = lambda a: a
t_import = time.perf_counter() - t0
rng = np.random.default_rng(0)
x32 = wrap(cp.asarray(rng.random(100_000, dtype=np.float32)))
x64 = wrap(cp.asarray(rng.random(100_000)))
A = wrap(cp.asarray(rng.random((250, 400), dtype=np.float32)))
v = wrap(cp.asarray(rng.random(400, dtype=np.float32)))
cp.cuda.Device().synchronize()
cumsum = xp.cumulative_sum if which == "forge" else cp.cumsum
calls = [("sum f32", lambda: xp.sum(x32)), ("sum f64", lambda: xp.sum(x64)), ("max", lambda: xp.max(x32)),
         ("mean+std", lambda: (xp.mean(x32), xp.std(x32))), ("cumsum", lambda: cumsum(x32)),
         ("sum axis 0", lambda: xp.sum(A, axis=0)), ("sum axis 1", lambda: xp.sum(A, axis=1)),
         ("A @ v", lambda: A @ v), ("argmax", lambda: xp.argmax(x32))]
first, again = {}, {}
for name, call in calls:
    t = time.perf_counter(); r = call(); cp.cuda.Device().synchronize(); first[name] = time.perf_counter() - t
for name, call in calls:
    t = time.perf_counter(); r = call(); cp.cuda.Device().synchronize(); again[name] = time.perf_counter() - t
out = {"import_s": t_import, "first_s": first, "again_s": again, "calls_s": sum(first.values())}
if which == "forge":
    from forge_array.runtime import STATS
    out["compiled_here"] = STATS.get("compiled", 0)
    out["process_builds"] = STATS.get("process_builds", 0)
    out["deferred"] = STATS.get("deferred", 0)
print(json.dumps(out))
'''


def _stats(xs):
    xs = sorted(xs)
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "median_us": statistics.median(xs) * 1e6, "p90_us": xs[int(0.9 * (len(xs) - 1))] * 1e6}


def run_phases(runs):
    out = {}
    for case in _PHASE_CASES:
        plain, prof = [], None
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as root:
                plain.append(run_script(_PHASES, [case, 0], fresh_env(root, FORGE_ARRAY_COMPILE="sync")))
        with tempfile.TemporaryDirectory() as root:
            prof = run_script(_PHASES, [case, 1], fresh_env(root, FORGE_ARRAY_COMPILE="sync"))
        med = {k: statistics.median(r[k] for r in plain) for k in ("first_kernel_s", "wall_s", "compile_s", "load_s")}
        med["kernels"] = plain[0]["kernels"]
        total = sum(prof["profile_s"].values()) or 1.0
        med["shares"] = {k: v / total for k, v in sorted(prof["profile_s"].items(), key=lambda kv: -kv[1])}
        out[case] = med
        print(f"phases {case}: {med['wall_s']:.2f} s ({med['kernels']} kernels, compile {med['compile_s']:.2f} s, "
              f"load {med['load_s']:.3f} s)", flush=True)
    return out


def run_gil(iters):
    out = {}
    for label, extra in (("build process", {}), ("background thread", {"FORGE_ARRAY_BUILD_PROCESS": "0"})):
        with tempfile.TemporaryDirectory() as root:
            r = run_script(_GIL, [iters], fresh_env(root, **extra))
        row = {"alone": {k: _stats(v) for k, v in r["alone"].items()},
               "after": {k: _stats(v) for k, v in r["after"].items()},
               "during": {ph: {k: _stats(v) for k, v in d.items()} for ph, d in r["during"].items()},
               "calls_s": r["calls_s"], "background_s": r["background_s"], "process_builds": r["process_builds"],
               "compiled_here": r["compiled_here"], "build_process": r["build_process"], "failures": r["failures"]}
        out[label] = row
        for op, s in row["alone"].items():
            b = row["during"]["builds"].get(op, {})
            base = min(s["median_us"], row["after"][op]["median_us"])
            ratio = b.get("median_us", float("nan")) / base
            print(f"gil {label} {op}: alone {s['median_us']:.1f} us before, {row['after'][op]['median_us']:.1f} "
                  f"after, during builds {b.get('median_us', float('nan')):.1f} us ({ratio:.2f}x the faster, "
                  f"{b.get('n', 0)} samples)", flush=True)
    return out


def run_first(runs):
    """The first calls of nine standard operations in fresh processes with empty caches (ours
    in the default background mode, CuPy's own functions beside), then in later processes."""
    out = {"forge": [], "cupy": [], "forge later": []}
    for _ in range(runs):
        for which in ("forge", "cupy"):
            with tempfile.TemporaryDirectory() as root:
                r = run_script(_FIRST, [which], fresh_env(root))
                out[which].append(r)
                if which == "forge":
                    out["forge later"].append(run_script(_FIRST, [which], fresh_env(root)))
    for which, rs in out.items():
        med = statistics.median(r["calls_s"] for r in rs)
        worst = max(max(r["first_s"].values()) for r in rs)
        print(f"first {which}: nine first calls {med * 1e3:.1f} ms (median of {len(rs)}), slowest first call "
              f"{worst * 1e3:.1f} ms, import {statistics.median(r['import_s'] for r in rs):.2f} s", flush=True)
    return out


def run_cpu(runs):
    with tempfile.TemporaryDirectory() as root:
        env = fresh_env(root)
        first = run_script(_CPU, [], env)
        later = [run_script(_CPU, [], env) for _ in range(runs)]
    res = {"first": first, "later": later,
           "later_median_wall_s": statistics.median(r["process_wall_s"] for r in later),
           "later_median_script_s": statistics.median(r["script_s"] for r in later)}
    print(f"cpu: first process {first['process_wall_s']:.2f} s, later processes {res['later_median_wall_s']:.2f} s "
          f"(script {res['later_median_script_s']:.2f} s)", flush=True)
    return res


def _gpu_name():
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception:
        pass
    return None


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _report(name, args, res):
    lines = [f"# Compiling ({name})", "", "`python -m bench.suite_compile`; every row from fresh processes with "
             "empty kernel caches and the packages' Python bytecode compiled, as a pip install leaves it "
             f"(written by this run first: {res.get('bytecode_compiled', {})} files).", ""]
    if "phases" in res:
        ph = res["phases"]
        buckets = sorted({b for r in ph.values() for b in r["shares"]})
        lines += ["## Where a specialisation's time goes", "",
                  f"Medians of {args.runs} processes, after one other kernel was built in the same process "
                  "(its build: numba's and the CUDA target's set-up included). Shares from a profiled process.", "",
                  "| call | kernels | first call s | compile s | load s | " + " | ".join(buckets) + " |",
                  "|---" * (5 + len(buckets)) + "|"]
        for case, r in ph.items():
            lines.append(f"| {case} | {r['kernels']} | {r['wall_s']:.2f} | {r['compile_s']:.2f} | {r['load_s']:.3f} | "
                         + " | ".join(f"{100 * r['shares'].get(b, 0):.0f}%" for b in buckets) + " |")
        first = statistics.median(r["first_kernel_s"] for r in ph.values())
        lines += ["", f"The process's first kernel (a float64 sum) took {first:.2f} s (median).", ""]
    if "gil" in res:
        lines += ["## The user's GPU work while kernels build", "",
                  f"`cupy.cumsum` and `torch.sum` of 1,000 float32, each call synchronised; µs, median (p90) of "
                  f"the samples. Alone: {args.iters} calls each before forge_array is imported, and as many "
                  f"after the background work has ended; × is the ratio to the faster of the two.", "",
                  "| builds on | call | alone before | alone after | while numba loads | × | while kernels build | × "
                  "| samples |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for label, r in res["gil"].items():
            for op, s in r["alone"].items():
                a = r["after"][op]
                base = min(s["median_us"], a["median_us"])
                cells = [f"{s['median_us']:.1f} ({s['p90_us']:.1f})", f"{a['median_us']:.1f} ({a['p90_us']:.1f})"]
                ns = []
                for ph in ("layer", "builds"):
                    d = r["during"][ph].get(op, {"n": 0})
                    ns.append(str(d["n"]))
                    if d["n"]:
                        cells += [f"{d['median_us']:.1f} ({d['p90_us']:.1f})", f"{d['median_us'] / base:.2f}"]
                    else:
                        cells += ["-", "-"]
                lines.append(f"| {label} | {op} | " + " | ".join(cells) + f" | {'/'.join(ns)} |")
        lines += [""]
        for label, r in res["gil"].items():
            lines.append(f"- {label}: background work {r['background_s']:.1f} s after the first calls "
                         f"({r['calls_s']:.2f} s); kernels built by the build process {r['process_builds']}, "
                         f"in this process {r['compiled_here']}; build process {r['build_process']}"
                         + (f"; failures {r['failures']}" if r["failures"] else ""))
        lines += [""]
    if "first" in res:
        f = res["first"]
        names = list(f["cupy"][0]["first_s"])
        lines += ["## A new user's first calls", "",
                  "Nine standard operations on 10^5 elements (a 250×400 matrix for the axis sums and A @ v), "
                  "each call's wall time with the GPU synchronised, in fresh processes with empty caches "
                  "(`FORGE_ARRAY_CACHE_DIR`, `CUPY_CACHE_DIR`); forge_array in its default mode (a call "
                  "whose kernel is not built yet runs on CuPy's function while the build process builds it). "
                  "\"later\": a second process on the same caches. ms, median of the processes.", "",
                  "| process | import s | all nine | slowest | " + " | ".join(names) + " |",
                  "|---" * (4 + len(names)) + "|"]
        for which, rs in f.items():
            med = {n: statistics.median(r["first_s"][n] for r in rs) * 1e3 for n in names}
            lines.append(f"| {which} | {statistics.median(r['import_s'] for r in rs):.2f} | "
                         f"{statistics.median(r['calls_s'] for r in rs) * 1e3:.1f} | "
                         f"{max(max(r['first_s'].values()) for r in rs) * 1e3:.1f} | "
                         + " | ".join(f"{med[n]:.1f}" for n in names) + " |")
        lines += [""]
    if "cpu" in res:
        c = res["cpu"]
        procs = [("first (empty cache)", c["first"])] + [(f"later {i + 1}", r) for i, r in enumerate(c["later"])]
        names = list(c["first"]["calls_s"])
        lines += ["## User operators on CPU arrays", "",
                  "A script of five generic operations with Python operators on CPU arrays; seconds.", "",
                  "| process | wall | script | import | " + " | ".join(names)
                  + " | compiled | from disk | numba.cuda |",
                  "|---" * (7 + len(names)) + "|"]
        for label, r in procs:
            lines.append(f"| {label} | {r['process_wall_s']:.2f} | {r['script_s']:.2f} | {r['import_s']:.2f} | "
                         + " | ".join(f"{r['calls_s'][n]:.3f}" for n in names)
                         + f" | {r['cpu_compiled']} | {r['cpu_disk_hits']} | {r['numba_cuda_loaded']} |")
        lines += ["", f"Later processes: {c['later_median_wall_s']:.2f} s wall (median), "
                  f"{c['later_median_script_s']:.2f} s in the script.", ""]
    if "operators" in res:
        lines += report_operators(res["operators"])
    if "hypothesis" in res:
        lines += report_hypothesis(res["hypothesis"])
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default="phases,gil,first,cpu,operators,hypothesis",
                    help="phases,gil,first,cpu,operators,hypothesis "
                    "(default all; GPU parts are skipped without a GPU, hypothesis runs with --device cpu)")
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per measurement (default 3)")
    ap.add_argument("--iters", type=int, default=300, help="calls of each op timed alone (default 300)")
    ap.add_argument("--examples", type=int, default=1000, help="hypothesis: max_examples (default 1000)")
    ap.add_argument("--hypothesis-rows", default="forge,cupy,forge-noprebuilt",
                    help="hypothesis: processes to run (default forge,cupy,forge-noprebuilt)")
    ap.add_argument("--hypothesis-timeout", type=float, default=900.0,
                    help="hypothesis: seconds before a process is stopped and reported as timed out (default 900)")
    ap.add_argument("--device", default="cuda:0", help="hypothesis: forge_array's device, cuda:N or cpu (cpu: "
                    "the forge rows on CPU arrays, no CuPy row; runs without a GPU) (default cuda:0)")
    ap.add_argument("--out", default="bench/results", help="results folder (default bench/results)")
    args = ap.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    gpu = _gpu_name()
    name = gpu or _cpu_name()
    res = {"device": name, "python": sys.version.split()[0], "parts": parts, "skipped": []}
    try:
        import numba

        res["numba"] = numba.__version__
    except ImportError:
        pass
    for part, fn, arg in (("phases", run_phases, args.runs), ("gil", run_gil, args.iters),
                          ("first", run_first, args.runs), ("cpu", run_cpu, args.runs),
                          ("operators", run_operators, args), ("hypothesis", run_hypothesis, args)):
        if part not in parts:
            continue
        on_cpu = part == "cpu" or (part == "hypothesis" and args.device == "cpu")
        if not on_cpu and gpu is None:
            res["skipped"].append(f"{part}: no GPU")
            print(f"{part}: skipped (no GPU)", flush=True)
            continue
        res[part] = fn(arg)
    res["bytecode_compiled"] = ensure_bytecode()  # .pyc files this run had to write first
    folder = os.path.join(args.out, slug(name))
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "compile.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    with open(os.path.join(folder, "compile.md"), "w") as fh:
        fh.write("\n".join(_report(name, args, res)))
    print(f"wrote {folder}/compile.json, compile.md")
    failed = [label for label, r in res.get("hypothesis", {}).get("rows", {}).items()
              if r["status"] == "error" or r.get("failed")]
    if failed:
        print(f"hypothesis: FAILED in {', '.join(failed)} (mismatches, errors: see compile.md)", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
