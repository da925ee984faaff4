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
  of standard operations (an empty cache) build their kernels in the background: with the
  build process (the default) and with builds on the background thread
  (``FORGE_ARRAY_BUILD_PROCESS=0``); separate rows while the kernel layer (numba) loads
  and while kernels build.  The ratio to the loop alone is the cost to the user's work.
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
import subprocess
import sys
import tempfile
import time

from .backends import slug

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
print(json.dumps({"alone": alone, "during": during, "calls_s": calls_s, "background_s": work_s,
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


# ----------------------------------------------------------------------------- hypothesis

_HYPOTHESIS = r'''
import hashlib, importlib.util, json, math, sys, time, warnings
t0 = time.perf_counter()
import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra import numpy as hnp
try:  # hypothesis mixes in literals of the local modules imported so far (forge_array's in one process and
    # not in the other, more as kernels load): without them every process draws the same examples
    from hypothesis.internal.conjecture import providers as _providers
    if hasattr(_providers, "_get_local_constants"):
        _providers._get_local_constants = lambda: _providers._local_constants
except ImportError:
    pass
impl, device, N, strategies_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
OPS = ("sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin", "any", "all",
       "cumulative_sum", "cumulative_prod", "matmul")
if impl == "forge":
    import forge_array as xp
    from forge_array.runtime import STATS, compiler
    mod, fns, corr_kw = xp, {op: getattr(xp, op) for op in OPS}, "correction"
    def put(h):
        return xp.asarray(h, device=device)
    def get(r):
        return np.asarray(r.to_device("cpu"))
else:
    import cupy as cp
    cp.cuda.Device(int(device.split(":")[1]) if ":" in device else 0).use()
    STATS = compiler = None
    mod, corr_kw, put, get = cp, "ddof", cp.asarray, cp.asnumpy
    fns = {op: getattr(cp, op) for op in OPS if op not in ("cumulative_sum", "cumulative_prod")}
    fns.update(cumulative_sum=cp.cumsum, cumulative_prod=cp.cumprod)
# forge_array's strategies from their file: the CuPy process does not import forge_array
spec = importlib.util.spec_from_file_location("_forge_strategies", strategies_path)
S = importlib.util.module_from_spec(spec)
spec.loader.exec_module(S)
import_s = time.perf_counter() - t0

K = S.DTYPE_KINDS
REAL = K["integral"] + K["real floating"]
DTYPES = {"sum": K["numeric"], "prod": K["numeric"], "max": REAL, "min": REAL,
          "mean": K["real floating"] + K["complex floating"], "var": K["real floating"], "std": K["real floating"],
          "argmax": REAL, "argmin": REAL, "any": K["all"], "all": K["all"], "cumulative_sum": REAL,
          "cumulative_prod": REAL, "matmul": K["numeric"]}
MAX = 2000  # elements of a view
EDGES = (63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1023, 1024, 1025)  # blocks, vector tiles
LAYOUTS = ("slice", "reverse", "offset", "transpose")  # x[1:], x[::2], x[::-1], x.T and their mixtures
NONEMPTY = ("max", "min", "argmax", "argmin")  # an empty reduction raises (standard and NumPy)
SCANS = ("cumulative_sum", "cumulative_prod")
EXACT = ("max", "min", "argmax", "argmin", "any", "all")

def elements(op, dt):
    kind = np.dtype(dt).kind
    if op in ("prod", "cumulative_prod") and kind == "f":  # products that stay in range more often
        return S.elements_for(dt, {"min_value": -2.0, "max_value": 2.0})
    if op in ("prod", "cumulative_prod") and kind == "c":
        return S.elements_for(dt, {"max_magnitude": 2.0})
    return S.elements_for(dt)

@st.composite
def cases(draw):
    op = draw(st.sampled_from(OPS))
    dt = draw(st.sampled_from(DTYPES[op]))
    form = axis = corr = None
    if op == "matmul":
        form = draw(st.sampled_from(("A @ v", "v @ A")))
        shape = draw(S.shapes(2, 2, 0, MAX, edges=EDGES, max_size=MAX))
        shapes = [shape, (shape[1],)] if form == "A @ v" else [(shape[0],), shape]
    else:
        shape = draw(S.shapes(1, 2, 1 if op in NONEMPTY else 0, MAX, edges=EDGES, max_size=MAX))
        shapes = [shape]
        axis = draw(S.axes(len(shape), allow_tuple=False, allow_none=not (op in SCANS and len(shape) == 2)))
        if op in ("var", "std"):
            corr = draw(st.sampled_from((0, 1)))
    operands = []
    for shp in shapes:
        kinds = draw(st.sampled_from(((), LAYOUTS, LAYOUTS, LAYOUTS)))  # () is the contiguous array
        layout = draw(S.view_layouts(shp, kinds=kinds, max_step=2))
        base = draw(hnp.arrays(np.dtype(dt), (layout.base_size,), elements=elements(op, dt)))
        operands.append((layout, base))
    return {"op": op, "dtype": dt, "form": form, "axis": axis, "corr": corr, "operands": operands}

def describe(case):
    views = " ; ".join(repr(layout) for layout, _ in case["operands"])
    what = case["form"] or f"{case['op']}(axis={case['axis']}" + (
        f", correction={case['corr']})" if case["corr"] is not None else ")")
    shapes = " ".join(str(layout.shape) for layout, _ in case["operands"])
    return f"{what} {case['dtype']} {shapes} {views}"

def compute(fn_of, case, xs):
    op, axis = case["op"], case["axis"]
    f = fn_of[op]
    if op == "matmul":
        return f(xs[0], xs[1])
    if op in ("var", "std"):
        return f(xs[0], axis=axis, **{fn_of["_corr"]: case["corr"]})
    if op in SCANS and fn_of is NUMPY:
        return f(xs[0], axis=0 if axis is None else axis)
    return f(xs[0], axis=axis)

NUMPY = {op: getattr(np, op) for op in OPS if op not in SCANS}
NUMPY.update(cumulative_sum=np.cumsum, cumulative_prod=np.cumprod, _corr="ddof")
fns["_corr"] = corr_kw

def first_bad(ok, got, ref, tol=None):
    bad = np.argwhere(~np.asarray(ok))
    i = tuple(bad[0]) if bad.size else ()
    g, r = np.asarray(got)[i], np.asarray(ref)[i]
    extra = "" if tol is None else f" (tolerance {np.asarray(tol)[i]:.3g})"
    return f"{int((~np.asarray(ok)).sum())} element(s) differ, first at {i}: got {g!r}, expected {r!r}{extra}"

def check(case, hosts, got):
    """None when ``got`` matches NumPy, "skip" where no comparison applies, else the mismatch."""
    op, axis, corr = case["op"], case["axis"], case["corr"]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        native = np.asarray(compute(NUMPY, case, hosts))
    if got.shape != native.shape:
        return f"shape {got.shape}, expected {native.shape}"
    if got.dtype != native.dtype:
        return f"dtype {got.dtype}, expected {native.dtype}"
    h = hosts[0]
    kind = h.dtype.kind
    if kind in "biu" or op in EXACT:  # integers wrap alike (prod, sums, matmul); selections are exact
        ok = got == native
        if got.dtype.kind in "fc":
            ok = ok | (np.isnan(got) & np.isnan(native))
        return None if np.all(ok) else first_bad(ok, got, native)
    # floating point: a float64 (complex128) reference and a worst-case rounding bound
    # (a depth-n summation tree: n * eps * the sum of the magnitudes), doubled for the
    # reference's own rounding (float64 inputs) and for complex products
    wide = np.complex128 if kind == "c" else np.float64
    eps, fi = float(np.finfo(h.dtype).eps), np.finfo(h.dtype)
    c = 2.0 if kind == "c" else 1.0
    w = [x.astype(wide) for x in hosts]
    a = [np.abs(x) for x in w]
    ax = 0 if (axis is None and op in SCANS) else axis
    n = h.size if axis is None and op not in SCANS else (h.shape[ax] if op != "matmul" else 0)
    mask = None
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = compute(NUMPY, case, w)
        if op == "matmul":
            k = hosts[0].shape[-1]
            tol = 2 * c * (k + 2) * eps * np.matmul(a[0], a[1])
        elif op == "sum":
            tol = 2 * c * (n + 2) * eps * a[0].sum(axis=axis)
        elif op == "mean":
            tol = 2 * c * (n + 3) * eps * a[0].mean(axis=axis)
        elif op == "cumulative_sum":
            tol = 2 * (n + 2) * eps * np.cumsum(a[0], axis=ax)
        elif op in ("var", "std"):
            if n - corr <= 0:  # NaN or inf by convention: not compared
                return "skip"
            tv = 8 * (n + 4) * eps * (a[0] ** 2).mean(axis=axis) * n / (n - corr)
            tol = tv if op == "var" else np.sqrt(tv) + 4 * eps * np.abs(ref)
        else:  # prod, cumulative_prod: compared only where no product of any subset of the
            # factors can overflow or underflow (then the order of the products does not matter)
            big = np.log2(np.where(a[0] > 1, a[0], 1))
            small = np.log2(np.where((a[0] > 0) & (a[0] < 1), a[0], 1))
            if op == "prod":
                big, small = big.sum(axis=axis), small.sum(axis=axis)
            else:
                big, small = np.cumsum(big, axis=ax), np.cumsum(small, axis=ax)
            mask = (big < math.log2(float(fi.max)) - 2) & (small > math.log2(float(fi.tiny)) + 2)
            if not np.any(mask):
                return "skip"
            tol = 4 * c * (n + 2) * eps * np.abs(ref)
        diff = np.abs(got.astype(wide) - ref)
        ok = (diff <= tol) | (np.isnan(ref) & np.isnan(got))
        if mask is not None:
            ok = ok | ~mask
    return None if np.all(ok) else first_bad(ok, got, ref, tol)

R = {"examples": 0, "compared": 0, "skipped_compare": 0, "mismatches": 0, "errors": 0, "harness_errors": 0,
     "failures": [], "ops_s": 0.0, "body_s": 0.0, "by_op": {}, "slowest": []}
digest = hashlib.sha1()

def progress():
    p = {k: R[k] for k in ("examples", "mismatches", "errors", "ops_s")}
    p["run_s"] = time.perf_counter() - t_run
    if STATS is not None:
        p.update(compiled=STATS.get("compiled"), compile_s=STATS.get("compile_seconds"))
    print("#progress " + json.dumps(p), flush=True)

@settings(max_examples=N, derandomize=True, database=None, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(cases())
def test_reductions_scans_matvec(case):
    tb = time.perf_counter()
    R["examples"] += 1
    desc = describe(case)
    digest.update(desc.encode())
    for _, base in case["operands"]:
        digest.update(base.tobytes())
    hosts = [layout.apply(base, np) for layout, base in case["operands"]]
    t = time.perf_counter()
    try:
        xs = [layout.apply(put(base), mod) for layout, base in case["operands"]]
        got, err = get(compute(fns, case, xs)), None
    except Exception as e:
        got, err = None, e
    dt = time.perf_counter() - t
    R["ops_s"] += dt
    op = case["op"] if case["op"] != "matmul" else case["form"]
    t_op = R["by_op"].setdefault(op, [0, 0.0])
    t_op[0] += 1
    t_op[1] += dt
    R["slowest"] = sorted(R["slowest"] + [[dt, desc[:160]]], reverse=True)[:8]
    if err is not None:
        R["errors"] += 1
        msg = f"error: {desc}: {type(err).__name__}: {str(err)[:300]}"
    else:
        try:
            msg = check(case, hosts, got)
        except Exception as e:
            R["harness_errors"] += 1
            msg = None
            if R["harness_errors"] <= 3:
                R["failures"].append(f"harness (not counted): {desc}: {type(e).__name__}: {e}")
        if msg == "skip":
            R["skipped_compare"] += 1
            msg = None
        elif msg is None:
            R["compared"] += 1
        else:
            R["mismatches"] += 1
            msg = f"mismatch: {desc}: {msg}"
    if msg is not None and len(R["failures"]) < 20:
        R["failures"].append(msg)
    R["body_s"] += time.perf_counter() - tb
    if R["examples"] % 10 == 0:
        progress()

t_run = time.perf_counter()
test_reductions_scans_matvec()
run_s = time.perf_counter() - t_run
out = dict(R, impl=impl, device=device, import_s=import_s, run_s=run_s, digest=digest.hexdigest(),
           failed=R["mismatches"] + R["errors"] > 0)
if STATS is not None:
    out["stats"] = dict(STATS)
    for key in ("compiled", "compile_seconds", "disk_hits", "load_seconds", "prebuilt_hits"):
        out[key] = STATS.get(key)
    comps = list(getattr(compiler, "COMPILES", ()))
    out["slowest_compiles"] = [{"name": str(c[0]), "operators": str(c[1]), "seconds": float(c[2])}
                               for c in sorted(comps, key=lambda c: -float(c[2]))[:10]]
print(json.dumps(out, default=str))
'''


def _env(cache, **extra):
    env = dict(os.environ, FORGE_ARRAY_CACHE_DIR=os.path.join(cache, "forge"),
               CUPY_CACHE_DIR=os.path.join(cache, "cupy"))
    for k in ("FORGE_ARRAY_COMPILE", "FORGE_ARRAY_SIMULATE", "NUMBA_ENABLE_CUDASIM", "FORGE_ARRAY_BUILD_PROCESS"):
        env.pop(k, None)
    env.update(extra)
    return env


def _run(code, args, env, timeout=900):
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env, capture_output=True, text=True,
                         timeout=timeout)
    wall = time.perf_counter() - t
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["process_wall_s"] = wall
    return res


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
                plain.append(_run(_PHASES, [case, 0], _env(root, FORGE_ARRAY_COMPILE="sync")))
        with tempfile.TemporaryDirectory() as root:
            prof = _run(_PHASES, [case, 1], _env(root, FORGE_ARRAY_COMPILE="sync"))
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
            r = _run(_GIL, [iters], _env(root, **extra))
        row = {"alone": {k: _stats(v) for k, v in r["alone"].items()},
               "during": {ph: {k: _stats(v) for k, v in d.items()} for ph, d in r["during"].items()},
               "calls_s": r["calls_s"], "background_s": r["background_s"], "process_builds": r["process_builds"],
               "compiled_here": r["compiled_here"], "build_process": r["build_process"], "failures": r["failures"]}
        out[label] = row
        for op, s in row["alone"].items():
            b = row["during"]["builds"].get(op, {})
            ratio = b.get("median_us", float("nan")) / s["median_us"]
            print(f"gil {label} {op}: alone {s['median_us']:.1f} us, during builds "
                  f"{b.get('median_us', float('nan')):.1f} us ({ratio:.2f}x, {b.get('n', 0)} samples)", flush=True)
    return out


def run_first(runs):
    """The first calls of nine standard operations in fresh processes with empty caches (ours
    in the default background mode, CuPy's own functions beside), then in later processes."""
    out = {"forge": [], "cupy": [], "forge later": []}
    for _ in range(runs):
        for which in ("forge", "cupy"):
            with tempfile.TemporaryDirectory() as root:
                r = _run(_FIRST, [which], _env(root))
                out[which].append(r)
                if which == "forge":
                    out["forge later"].append(_run(_FIRST, [which], _env(root)))
    for which, rs in out.items():
        med = statistics.median(r["calls_s"] for r in rs)
        worst = max(max(r["first_s"].values()) for r in rs)
        print(f"first {which}: nine first calls {med * 1e3:.1f} ms (median of {len(rs)}), slowest first call "
              f"{worst * 1e3:.1f} ms, import {statistics.median(r['import_s'] for r in rs):.2f} s", flush=True)
    return out


def run_cpu(runs):
    with tempfile.TemporaryDirectory() as root:
        env = _env(root)
        first = _run(_CPU, [], env)
        later = [_run(_CPU, [], env) for _ in range(runs)]
    res = {"first": first, "later": later,
           "later_median_wall_s": statistics.median(r["process_wall_s"] for r in later),
           "later_median_script_s": statistics.median(r["script_s"] for r in later)}
    print(f"cpu: first process {first['process_wall_s']:.2f} s, later processes {res['later_median_wall_s']:.2f} s "
          f"(script {res['later_median_script_s']:.2f} s)", flush=True)
    return res


#: rows of the hypothesis part: (label, implementation, FORGE_ARRAY_PREBUILT or None)
_HYP_ROWS = {"forge": ("forge", None), "cupy": ("cupy", None), "forge-noprebuilt": ("forge", "0")}
_HYP_LABELS = {"forge": "forge", "cupy": "cupy", "forge-noprebuilt": "forge (no prebuilt)"}


def _strategies_path():
    import importlib.util

    spec = importlib.util.find_spec("forge_array")
    return os.path.join(list(spec.submodule_search_locations)[0], "testing", "strategies.py")


def _run_hypothesis_row(args, env, timeout):
    """One fresh process of the hypothesis script; a row with ``status`` ok, timeout or error
    (a timed-out row keeps the script's last progress line)."""
    import signal

    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _HYPOTHESIS, *map(str, args)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    status = "ok"
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        status = "timeout"
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the script's process group (any workers it started)
        except ProcessLookupError:
            pass
        stdout, stderr = proc.communicate()
    wall = time.perf_counter() - t
    lines = (stdout or "").strip().splitlines()
    progress = [ln for ln in lines if ln.startswith("#progress ")]
    last = json.loads(progress[-1].split(" ", 1)[1]) if progress else None
    if status == "ok" and proc.returncode == 0:
        try:
            res = json.loads([ln for ln in lines if not ln.startswith("#progress ")][-1])
            res.update(status="ok", process_wall_s=wall)
            return res
        except (IndexError, ValueError):
            pass
    if status == "ok":
        status = "error"
    return {"status": status, "process_wall_s": wall, "timeout_s": timeout, "returncode": proc.returncode,
            "progress": last, "stderr_tail": (stderr or "")[-2000:]}


def run_hypothesis(args):
    """A hypothesis test of reductions, scans and matrix-vector products on views, in a fresh
    process per implementation with empty caches; the same examples in each (derandomized)."""
    rows = [r.strip() for r in args.hypothesis_rows.split(",") if r.strip()]
    unknown = [r for r in rows if r not in _HYP_ROWS]
    if unknown:
        raise SystemExit(f"--hypothesis-rows: unknown {unknown}; expected some of {sorted(_HYP_ROWS)}")
    path = _strategies_path()
    out = {"examples": args.examples, "device": args.device, "rows": {}, "skipped": []}
    simulate = os.environ.get("FORGE_ARRAY_SIMULATE", "")
    if simulate not in ("", "0"):
        out["simulate"] = simulate
    for row in rows:
        impl, prebuilt = _HYP_ROWS[row]
        label = _HYP_LABELS[row]
        if impl == "cupy" and args.device == "cpu":
            out["skipped"].append(f"{label}: --device cpu")
            print(f"hypothesis {label}: skipped (--device cpu)", flush=True)
            continue
        with tempfile.TemporaryDirectory() as root:
            env = _env(root, **({"FORGE_ARRAY_COMPILE": "sync"} if impl == "forge" else {}))
            env.pop("FORGE_ARRAY_PREBUILT", None)
            if prebuilt is not None:
                env["FORGE_ARRAY_PREBUILT"] = prebuilt
            if "simulate" in out and impl == "forge":
                env["FORGE_ARRAY_SIMULATE"] = simulate
            r = _run_hypothesis_row([impl, args.device, args.examples, path], env, args.hypothesis_timeout)
        out["rows"][label] = r
        if r["status"] != "ok":
            p = r.get("progress") or {}
            tail = " " + r["stderr_tail"][-800:] if r["status"] == "error" else ""
            print(f"hypothesis {label}: {r['status'].upper()} after {r['process_wall_s']:.1f} s "
                  f"({p.get('examples', 0)} examples done){tail}", flush=True)
            continue
        extra = "" if impl != "forge" else (f", compiled {r['compiled']} ({r['compile_seconds']:.1f} s), disk hits "
                                            f"{r['disk_hits']}, prebuilt hits {r.get('prebuilt_hits')}")
        print(f"hypothesis {label}: process {r['process_wall_s']:.1f} s, test {r['run_s']:.1f} s "
              f"(device calls {r['ops_s']:.1f} s), {r['examples']} examples, {r['mismatches']} mismatches, "
              f"{r['errors']} errors{extra}", flush=True)
        for f in r["failures"][:5]:
            print(f"    {f[:400]}", flush=True)
    digests = {r["digest"] for r in out["rows"].values() if r["status"] == "ok"}
    out["same_examples"] = len(digests) <= 1
    return out


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
             "empty caches.", ""]
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
                  f"the samples. Alone: {args.iters} calls each before forge_array is imported.", "",
                  "| builds on | call | alone | while numba loads | × | while kernels build | × | samples |",
                  "|---|---|---|---|---|---|---|---|"]
        for label, r in res["gil"].items():
            for op, s in r["alone"].items():
                cells = [f"{s['median_us']:.1f} ({s['p90_us']:.1f})"]
                ns = []
                for ph in ("layer", "builds"):
                    d = r["during"][ph].get(op, {"n": 0})
                    ns.append(str(d["n"]))
                    if d["n"]:
                        cells += [f"{d['median_us']:.1f} ({d['p90_us']:.1f})", f"{d['median_us'] / s['median_us']:.2f}"]
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
    if "hypothesis" in res:
        lines += _report_hypothesis(res["hypothesis"])
    return lines


def _report_hypothesis(h):
    rows = h["rows"]
    sim = f" (`FORGE_ARRAY_SIMULATE={h['simulate']}`)" if h.get("simulate") else ""
    lines = ["## A property-based test suite on a fresh machine", "",
             f"One hypothesis `@given` test, `max_examples={h['examples']}`, `derandomize=True` (the same examples "
             "in every process), no database, no deadline: an operation among sum, prod, max, min, mean, var, "
             "std, argmax, argmin, any, all, cumulative_sum, cumulative_prod, A @ v, v @ A; a dtype it accepts; "
             "an array of 1 or 2 dimensions (0 to 2,000 elements, sizes at block and tile edges) cut as a view "
             "(offset, step 2, reversed, transposed, mixed; `forge_array.testing.view_layouts`) out of a host "
             "array moved to the device; an axis (None, 0, 1, -1). Each result is compared with NumPy's: "
             "exact for integers, bool and selections; for floats with a float64 reference within the worst-case "
             "rounding bound (n·eps·Σ|x| for an n-term sum). Each row is a fresh process with empty caches "
             f"(`FORGE_ARRAY_CACHE_DIR`, `CUPY_CACHE_DIR`) on `{h['device']}`{sim}; forge_array rows with "
             "`FORGE_ARRAY_COMPILE=sync` (every kernel built at its first call), \"no prebuilt\" with "
             "`FORGE_ARRAY_PREBUILT=0`; the cupy row calls CuPy's own functions (`cupy.sum`, `cupy.cumsum`, "
             "`cupy.matmul`, ...). Seconds.", "",
             "| process | status | wall | import | in the test | device calls | examples | compared | "
             "not compared | mismatches | errors | compiled | compile s | disk hits | load s | prebuilt hits |",
             "|---" * 16 + "|"]

    def cell(v, fmt="{}"):
        return "-" if v is None else fmt.format(v)

    for label, r in rows.items():
        if r["status"] != "ok":
            p = r.get("progress") or {}
            note = (f"after {p.get('examples', 0)} examples" if r["status"] == "timeout"
                    else f"exit {r.get('returncode')}")
            lines.append(f"| {label} | **{r['status']}** ({note}) | {r['process_wall_s']:.1f} | - | "
                         f"{cell(p.get('run_s'), '{:.1f}')} | {cell(p.get('ops_s'), '{:.1f}')} | "
                         f"{cell(p.get('examples'))} | - | - | {cell(p.get('mismatches'))} | {cell(p.get('errors'))} | "
                         f"{cell(p.get('compiled'))} | {cell(p.get('compile_s'), '{:.1f}')} | - | - | - |")
            continue
        status = "**FAILED**" if r["failed"] else "passed"
        lines.append(f"| {label} | {status} | {r['process_wall_s']:.1f} | {r['import_s']:.2f} | {r['run_s']:.1f} | "
                     f"{r['ops_s']:.1f} | {r['examples']} | {r['compared']} | {r['skipped_compare']} | "
                     f"{r['mismatches']} | {r['errors']} | {cell(r.get('compiled'))} | "
                     f"{cell(r.get('compile_seconds'), '{:.1f}')} | {cell(r.get('disk_hits'))} | "
                     f"{cell(r.get('load_seconds'), '{:.2f}')} | {cell(r.get('prebuilt_hits'))} |")
    lines += ["", "\"in the test\": the `@given` call (drawing the examples included); \"device calls\": moving the "
              "operands to the device, cutting the views, the call and copying the result back; \"not "
              "compared\": examples whose comparison does not apply (a product that may overflow or underflow "
              "in some order of its factors, var/std with n - correction <= 0)."
              + ("" if h.get("same_examples", True) else " **The rows did not draw the same examples.**")]
    for s in h.get("skipped", []):
        lines.append(f"- skipped: {s}")
    lines.append("")
    ok = {label: r for label, r in rows.items() if r["status"] == "ok"}
    ops = sorted({op for r in ok.values() for op in r["by_op"]})
    if ops:
        lines += ["Seconds in the device calls per operation (examples):", "",
                  "| operation | " + " | ".join(ok) + " |", "|---" * (1 + len(ok)) + "|"]
        for op in ops:
            cells = []
            for r in ok.values():
                n, s = r["by_op"].get(op, (0, 0.0))
                cells.append(f"{s:.2f} ({n})")
            lines.append(f"| {op} | " + " | ".join(cells) + " |")
        lines.append("")
    for label, r in rows.items():
        if r["status"] != "ok":
            lines += [f"{label}: {r['status']} after {r['process_wall_s']:.0f} s (limit {r['timeout_s']} s)"
                      + (f"; last progress {r['progress']}" if r.get("progress") else ""), ""]
            if r["status"] == "error":
                lines += ["```", r["stderr_tail"][-1500:], "```", ""]
            continue
        if r["failures"]:
            lines += [f"{label}: {r['mismatches']} mismatches, {r['errors']} errors; the first:", ""]
            lines += [f"- `{f[:600]}`" for f in r["failures"][:8]] + [""]
        if r.get("slowest_compiles"):
            lines += [f"{label}: the slowest kernel builds", "", "| kernel | operators | s |", "|---|---|---|"]
            lines += [f"| {c['name']} | {c['operators'] or '-'} | {c['seconds']:.2f} |" for c in r["slowest_compiles"]]
            lines.append("")
        if r.get("slowest"):
            lines += [f"{label}: the slowest examples (device calls, s): "
                      + "; ".join(f"{s:.2f} {d.split(' ViewLayout')[0]}" for s, d in r["slowest"][:5]), ""]
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default="phases,gil,first,cpu,hypothesis", help="phases,gil,first,cpu,hypothesis "
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
                          ("hypothesis", run_hypothesis, args)):
        if part not in parts:
            continue
        on_cpu = part == "cpu" or (part == "hypothesis" and args.device == "cpu")
        if not on_cpu and gpu is None:
            res["skipped"].append(f"{part}: no GPU")
            print(f"{part}: skipped (no GPU)", flush=True)
            continue
        res[part] = fn(arg)
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
