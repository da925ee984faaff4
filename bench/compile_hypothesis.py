"""The ``hypothesis`` part of :mod:`bench.suite_compile`: a property-based test suite of
reductions, scans and matrix-vector products on every dtype and view, run the way a user meets
it on a fresh machine (a fresh process, empty caches, 1,000 examples), for forge_array with
and without the kernels shipped built and for CuPy's own functions on the same examples.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from .common import fresh_env

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
            env = fresh_env(root, **({"FORGE_ARRAY_COMPILE": "sync"} if impl == "forge" else {}))
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



def report_hypothesis(h):
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


