"""copy: float32 device copies, the roofline itself and our copy kernel.

forge_array ``xp.asarray(x, copy=True)`` (the namespace) and
``forge_array.primitives.copy(cupy_array)`` (the primitive) against ``x.copy()`` and
``t.clone()``; the same on the misaligned view ``x[1:]`` (4 bytes past a 16-byte
boundary, so 128-bit loads need the alignment prologue).
"""

from __future__ import annotations

import importlib
import time

import numpy as np

from .common import fa, forge, native, torch_builder
from .harness import Case, Impl

SUITE = "copy"


def _impls(ctx):
    return {
        "forge_array": fa(lambda xp, x: xp.asarray(x, copy=True)),
        "forge_array primitives.copy": Impl(
            _prim_builder, note="forge_array.primitives.copy(cupy_array)"
        ),
        ctx.ref: native(lambda x: x.copy()),
        "torch": torch_builder(ctx, lambda torch, t: t.clone()),
    }


def _primitive_copy():
    return importlib.import_module("forge_array.primitives").copy


def _prim_builder(x):
    copy = _primitive_copy()
    return lambda: copy(x)


def cases(ctx):
    out = []
    for n in ctx.sizes.sweep(3, 9):
        out.append(
            Case(
                SUITE, "copy float32", n, 8 * n,
                lambda k, n=n: (ctx.random((n,), np.float32, k),),
                _impls(ctx), shape=(n,), dtype="float32", reference=ctx.ref,
                input_bytes=4 * n, mem_bytes=4 * 4 * n,
            )
        )
    for n in ctx.sizes.sweep(3, 9):
        out.append(
            Case(
                SUITE, "copy float32 misaligned x[1:]", n, 8 * n,
                lambda k, n=n: (ctx.random((n + 1,), np.float32, k)[1:],),
                _impls(ctx), shape=(n,), dtype="float32", reference=ctx.ref,
                input_bytes=4 * n, mem_bytes=4 * 4 * n,
                note="x[1:] starts 4 bytes past a 16-byte boundary",
            )
        )
    return out


# ------------------------------------------------------------------ first-call hook


def runtime_first_call_hooks():
    """Resetters for first-call timing, from forge_array.runtime, or {} if it has none.

    The runtime may offer either ``first_call_hooks()`` returning
    ``{"cold": fn, "warm_cache": fn}`` (cold: forget compiled kernels in memory and on
    disk, so the next call compiles; warm_cache: forget them in memory only, so the next
    call loads PTX from the disk cache), or ``clear_caches(memory=True, disk=False)``.
    """
    try:
        rt = importlib.import_module("forge_array.runtime")
    except ImportError:
        return {}
    hooks = getattr(rt, "first_call_hooks", None)
    if callable(hooks):
        return dict(hooks())
    clear = getattr(rt, "clear_caches", None)
    if callable(clear):
        return {
            "cold": lambda: clear(memory=True, disk=True),
            "warm_cache": lambda: clear(memory=True, disk=False),
        }
    return {}


def extras(ctx):
    """First-call times of the copy (``xp.asarray(x, copy=True)``) at 10^6 float32."""
    hooks = runtime_first_call_hooks()
    if not hooks:
        return {"first_call": "skipped: forge_array.runtime offers no first_call_hooks / "
                "clear_caches"}
    res = {}
    try:
        xp = forge()
        x = xp.asarray(ctx.random((10**6,), np.float32, 7))
        for kind in ("cold", "warm_cache"):
            fn = hooks.get(kind)
            if fn is None:
                continue
            fn()
            ctx.sync()
            t0 = time.perf_counter()
            xp.asarray(x, copy=True)
            ctx.sync()
            res[f"{kind}_first_call_ms"] = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        xp.asarray(x, copy=True)
        ctx.sync()
        res["steady_call_ms"] = (time.perf_counter() - t0) * 1e3
    except Exception as exc:
        res["error"] = f"{type(exc).__name__}: {exc}"
    return {"first_call": res}
