"""Benchmark harness: cases, backends, timing, roofline, results.

Nothing here imports CuPy, torch or cuda.compute at module level, so the harness
imports (and ``python -m bench.run --dry-run`` runs) on a machine with no GPU.

Model
-----
A :class:`Case` is one measurement point: a name (the series it belongs to), a size,
the minimal bytes it moves (each input read once, each output written once), a
function that makes fresh random inputs, and a dict of implementations. An
implementation is a *builder*: ``builder(*inputs) -> fn`` does all setup outside the
timed region (wrapping arrays, allocating temporary storage) and returns the
zero-argument callable that is timed. Builders import their library lazily; whatever
they raise (ImportError, AttributeError for a missing function, a compile error) is
recorded as the implementation's status and error string, never a crash.

Timing (:class:`GpuBackend`)
----------------------------
- every library runs on CuPy's current stream, which the harness keeps at the legacy
  default stream (torch's default stream and cuda.compute's ``stream=None`` are the
  same stream); CUDA events bracket each call, the end event is synchronised before
  the next call;
- warm-up calls first (the first one's wall time is kept as ``first_call_ms``: it
  includes compilation or loading), then ``reps`` timed calls: median, min, p90;
- inputs that fit in L2 are replicated into several buffers with different random
  data and the calls rotate among them, so a call never finds its input in L2;
- host time per call for small inputs: ``time.perf_counter`` around calls without
  synchronisation, median over many calls;
- the roofline is a device-to-device ``cudaMemcpyAsync`` of ``bytes/2`` bytes, timed
  the same way in the same run: the bandwidth a pure copy of the same traffic reaches.
"""

from __future__ import annotations

import math
import os
import statistics
import traceback
from typing import Sequence

import numpy as np

from .backends import CpuBackend, GpuBackend, _Backend, slug  # noqa: F401 - the harness's interface
from .cases import (  # noqa: F401 - the harness's interface
    CANONICAL_IMPLS,
    L2_BYTES_DEFAULT,
    PEERS,
    Case,
    Impl,
    Skip,
    _jsonable,
    _short_error,
    fmt_count,
    fmt_shape,
    shape_sweep,
)
from .report import import_optional, markdown, metadata, plot, write_all, write_json  # noqa: F401 - the harness's interface

# ------------------------------------------------------------------------- running


def _stats(times: list[float]) -> dict:
    t = sorted(times)
    p90 = t[min(len(t) - 1, int(math.ceil(0.9 * len(t))) - 1)]
    return {
        "median_us": statistics.median(t) * 1e6,
        "min_us": t[0] * 1e6,
        "p90_us": p90 * 1e6,
        "mean_us": statistics.fmean(t) * 1e6,
        "reps": len(t),
    }


def _tolerance(arr: np.ndarray) -> float:
    if arr.dtype.kind in "fc":
        return 1e-3 if arr.dtype.itemsize <= 4 or arr.dtype == np.complex64 else 1e-9
    return 0.0


def compare(out, ref, rtol: float | None = None) -> tuple[float | None, bool | None]:
    """Normwise relative error max|a-b| / max|b| (tuples: the worst part)."""
    if isinstance(ref, tuple) or isinstance(out, tuple):
        if not (isinstance(ref, tuple) and isinstance(out, tuple)) or len(ref) != len(out):
            return None, False
        errs = [compare(o, r, rtol) for o, r in zip(out, ref)]
        if any(e[1] is None for e in errs):
            return None, None
        return max(e[0] for e in errs), all(e[1] for e in errs)
    a = np.asarray(out)
    b = np.asarray(ref)
    if a.shape != b.shape:
        if a.size == b.size == 1:
            a, b = a.reshape(()), b.reshape(())
        else:
            return None, False
    if b.size == 0:
        return 0.0, True
    a64 = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    b64 = b.astype(np.complex128 if b.dtype.kind == "c" else np.float64)
    scale = float(np.max(np.abs(b64))) or 1.0
    err = float(np.max(np.abs(a64 - b64))) / scale
    tol = _tolerance(b) if rtol is None else rtol
    return err, bool(err <= tol)


class Runner:
    def __init__(
        self,
        ctx: _Backend,
        *,
        check: bool = True,
        check_max_elems: int = 10**8,
        host_max_bytes: int = 4 * 2**20,
        host_calls: int = 200,
        impl_filter: Sequence[str] | None = None,
        verbose: bool = True,
    ):
        self.ctx = ctx
        self.check = check
        self.check_max_elems = check_max_elems
        self.host_max_bytes = host_max_bytes
        self.host_calls = host_calls
        self.impl_filter = tuple(impl_filter) if impl_filter else None
        self.verbose = verbose
        self._roofline_cache: dict[int, dict] = {}
        self.results: list[dict] = []

    def log(self, *a):
        if self.verbose:
            print(*a, flush=True)

    def nbuf_for(self, input_bytes: int) -> int:
        """How many input copies to rotate so that a call never hits L2."""
        l2 = self.ctx.l2_bytes
        if input_bytes <= 0 or input_bytes >= l2:
            return 1
        n = math.ceil(3 * l2 / input_bytes)
        n = min(n, 32, max(1, (512 * 2**20) // input_bytes))
        return max(2, n)

    def roofline(self, bytes_moved: int) -> dict:
        """Time of a D2D copy of bytes_moved/2 bytes (read + written = bytes_moved)."""
        key = int(bytes_moved)
        if key in self._roofline_cache:
            return self._roofline_cache[key]
        nbytes = max(key // 2, 1)
        res: dict
        try:
            fns = self.ctx.copy_fns(nbytes, self.nbuf_for(nbytes))
            reps = self.ctx.reps_for(key)
            times, _, _ = self.ctx.time_device(fns, self.ctx.warmup_for(key), reps)
            st = _stats(times)
            res = {
                "copy_bytes": nbytes,
                "median_us": st["median_us"],
                "gbps": key / (st["median_us"] * 1e-6) / 1e9,
            }
        except Exception as exc:
            res = {"copy_bytes": nbytes, "error": _short_error(exc)}
        finally:
            fns = None
            self.ctx.release()
        self._roofline_cache[key] = res
        return res

    def run_case(self, case: Case) -> dict:
        ctx = self.ctx
        rec: dict = {
            "suite": case.suite,
            "name": case.name,
            "label": case.label,
            "size": int(case.size),
            "shape": [int(s) for s in case.shape],
            "dtype": case.dtype,
            "bytes": int(case.bytes_moved),
            "params": {k: _jsonable(v) for k, v in case.params.items()},
            "note": case.note,
            "impls": {},
        }
        need = case.mem_bytes or 4 * case.bytes_moved
        free = ctx.free_memory()
        if need > 0.9 * free:
            rec["skipped"] = (
                f"needs ~{need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free"
            )
            self.log(f"  skip {case.label}: {rec['skipped']}")
            self.results.append(rec)
            return rec
        if case.bytes_moved > 0:
            rec["roofline"] = self.roofline(case.bytes_moved)
        input_bytes = case.input_bytes or case.bytes_moved
        nbuf = self.nbuf_for(input_bytes)
        rec["buffers"] = nbuf
        reps = ctx.reps_for(case.bytes_moved)
        warmup = ctx.warmup_for(case.bytes_moved)
        inputs: list = []
        ref_out = None
        try:
            inputs = [case.make_inputs(k) for k in range(nbuf)]
            ctx.sync()
            order = list(case.impls)
            if case.reference in order:  # reference first: its output checks the others
                order.remove(case.reference)
                order.insert(0, case.reference)
            for name in order:
                if self.impl_filter and not any(f in name for f in self.impl_filter):
                    continue
                spec = case.impls[name]
                impl = spec if isinstance(spec, Impl) else Impl(spec)
                r = self._run_impl(case, name, impl, inputs, warmup, reps)
                if "_out" in r:
                    out = r.pop("_out")
                    if name == case.reference:
                        ref_out = out
                    elif impl.check and ref_out is not None:
                        err, ok = (case.checker(out, ref_out) if case.checker is not None
                                   else compare(out, ref_out, case.rtol))
                        r["max_rel_err"] = err
                        r["check"] = "ok" if ok else ("MISMATCH" if ok is False else None)
                    del out
                rec["impls"][name] = r
        except Exception as exc:  # making inputs failed (e.g. out of memory)
            rec["skipped"] = _short_error(exc)
            self.log(f"  skip {case.label}: {rec['skipped']}")
        finally:
            inputs = None
            ref_out = None
            ctx.release()
        self._finish(rec)
        self.results.append(rec)
        if self.verbose:
            self._print_case(rec)
        return rec

    def _run_impl(self, case, name, impl, inputs, warmup, reps) -> dict:
        ctx = self.ctx
        r: dict = {"status": "ok"}
        if impl.note:
            r["note"] = impl.note
        fns = []
        want_out = self.check and impl.check and self._checkable(case)
        try:
            for inp in inputs:
                fns.append(impl.builder(*inp))
            times, first_ms, first_out = ctx.time_device(fns, warmup, reps, keep_first=want_out)
        except Skip as exc:
            return {"status": "skipped", "error": str(exc)}
        except ImportError as exc:
            return {"status": "skipped", "error": _short_error(exc)}
        except Exception as exc:
            tb = traceback.extract_tb(exc.__traceback__)
            where = f" (at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno})" if tb else ""
            try:
                ctx.sync()
            except Exception:
                pass
            return {"status": "error", "error": _short_error(exc) + where}
        r.update(_stats(times))
        r["first_call_ms"] = first_ms
        r["gbps"] = (
            case.bytes_moved / (r["median_us"] * 1e-6) / 1e9
            if r["median_us"] and case.bytes_moved > 0
            else None
        )
        if (case.input_bytes or case.bytes_moved) <= self.host_max_bytes:
            try:
                ht = ctx.time_host(fns, self.host_calls)
                r["host_us"] = statistics.median(ht) * 1e6
            except Exception as exc:
                r["host_error"] = _short_error(exc)
        if want_out:
            try:
                r["_out"] = ctx.to_numpy(first_out)
            except Exception as exc:
                r["check_error"] = _short_error(exc)
            first_out = None
        return r

    def _checkable(self, case: Case) -> bool:
        return case.size <= self.check_max_elems

    def _finish(self, rec: dict) -> None:
        roof = rec.get("roofline") or {}
        t_roof = roof.get("median_us")
        for r in rec["impls"].values():
            if r.get("status") == "ok" and t_roof:
                r["roofline_frac"] = t_roof / r["median_us"] if r["median_us"] else None
        ratios = {}
        fa = rec["impls"].get("forge_array", {})
        if fa.get("status") == "ok":
            for peer, r in rec["impls"].items():
                if peer == "forge_array" or r.get("status") != "ok":
                    continue
                ratios[peer] = r["median_us"] / fa["median_us"]
        rec["speedup_vs"] = ratios  # peer time / forge_array time: > 1 means forge_array wins

    def _print_case(self, rec: dict) -> None:
        parts = []
        for name, r in rec["impls"].items():
            if r.get("status") == "ok":
                chk = "" if r.get("check") in (None, "ok") else f" {r['check']}"
                parts.append(f"{name} {r['median_us']:.1f}us{chk}")
            else:
                parts.append(f"{name} {r.get('status')}")
        roof = rec.get("roofline", {}).get("median_us")
        rs = f" | copy {roof:.1f}us" if roof else ""
        print(f"  {rec['label']:<40} " + ", ".join(parts) + rs, flush=True)


