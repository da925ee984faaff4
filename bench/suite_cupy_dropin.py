"""cupy_dropin: an existing CuPy workload, run with ``cupy`` and with ``forge_array.cupy``.

The workload lives in ``bench/cupy_workload.py`` (a running-statistics pipeline over an
(n, 100) float32 matrix; it defines ``cases``: ``cupy``, ``forge_array.cupy`` and ``cupy``
under ``forge_array.cupy.patched()``, the last one entering and leaving the patch on every
call); this suite is skipped while that module is missing. Its contract, either of:

- ``cases(ctx) -> list[bench.harness.Case]``: full control; or
- ``workload(cp, n)``: run the script with the array module ``cp`` (``cupy`` or
  ``forge_array.cupy``) at problem size ``n`` and return its result (compared between
  the two); optional ``SIZES`` (default ``[10**6, 10**7]``), ``NAME`` (default
  ``"workload"``) and ``bytes_moved(n)`` (for GB/s and the copy roofline; default
  none). The whole call is timed, with CUDA events, after warm-up calls.
"""

from __future__ import annotations

import importlib

from .harness import Case, Impl, Skip

SUITE = "cupy_dropin"


def _load():
    try:
        return importlib.import_module("bench.cupy_workload")
    except ModuleNotFoundError as exc:
        if exc.name in ("bench.cupy_workload", "cupy_workload"):
            return None
        raise


def cases(ctx):
    mod = _load()
    if mod is None:
        print("  cupy_dropin: bench/cupy_workload.py not written yet: skipped")
        return []
    if hasattr(mod, "cases"):
        return list(mod.cases(ctx))
    workload = getattr(mod, "workload")
    sizes = list(getattr(mod, "SIZES", [10**6, 10**7]))
    if ctx.dry_run:
        sizes = [max(10, s // 10**4) for s in sizes]
    name = getattr(mod, "NAME", "workload")
    bytes_fn = getattr(mod, "bytes_moved", None)

    def dropin_module():
        if ctx.dry_run:
            raise Skip("forge_array.cupy needs CuPy")
        return importlib.import_module("forge_array.cupy")

    out = []
    for n in sizes:
        def fa_builder(n=n):
            cp = dropin_module()
            return lambda: workload(cp, n)

        def ref_builder(n=n):
            return lambda: workload(ctx.xp, n)

        out.append(Case(
            SUITE, name, n, int(bytes_fn(n)) if bytes_fn else 0, lambda k: (),
            {"forge_array": Impl(fa_builder, note="import forge_array.cupy as cp"),
             ctx.ref: ref_builder},
            shape=(n,), reference=ctx.ref, mem_bytes=1,
        ))
    return out
