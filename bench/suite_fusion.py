"""fusion: whole expressions, fused by ``xp.fuse``, against the same code run eagerly.

Each case is one function of arrays written once against the Array API and run as:
``forge_array`` (``xp.fuse``), ``forge_array plain`` (the same function undecorated, on
arrays forge_array owns: automatic fusion), ``forge_array eager`` (undecorated, on
zero-copy imports of the CuPy inputs, which are never deferred), CuPy eager (the
reference), ``cupy.fuse`` where it compiles, torch eager, torch.compile (steady state; its
first call is timed in ``extras``) and jax.jit when installed.  Beside
them: ``forge_array sum`` (one plain ``sum`` over the same bytes, the fused reductions'
yardstick) and the copy roofline of the harness.  Float32 and float64 at 10^6 and 10^8:

- ``sum(x*y + 1)``, ``max(abs(x - y))``, ``sum((x - mean(x))**2)``, logsumexp,
  ``cumulative_sum(x*y)``, ``(mean, std, max)`` of x, ``a*x + b*y - c`` (element-wise
  only), ``cumulative_sum(where(x > 0.5, x, 0))``;
- ``sum(A * v[None, :], axis=1)`` at (10^4, 10^4), ``sum((X - mu)**2, axis=0)`` at
  (10^6, 100) with ``mu`` of float32 and of float64 (mixed precision: no operand is
  converted in memory first), row softmax of (10^5, 10^3).
"""

from __future__ import annotations

import time

import numpy as np

from .common import forge, torch_builder
from .harness import Case, Impl, Skip, import_optional

SUITE = "fusion"

_FIRST_CALLS: dict = {}


# the expressions, written once for any Array-API-like namespace ``m``
def _sum_xy1(m, x, y):
    return m.sum(x * y + 1)


def _max_abs(m, x, y):
    return m.max(m.abs(x - y))


def _centred(m, x):
    return m.sum((x - m.mean(x)) ** 2)


def _logsumexp(m, x):
    mx = m.max(x)
    return m.log(m.sum(m.exp(x - mx))) + mx


def _cumsum_xy(m, x, y):
    return _cumsum(m, x * y)


def _stats(m, x):
    return m.mean(x), m.std(x), m.max(x)


def _axpby(m, x, y):
    return 2 * x + 3 * y - 1


def _cumsum_where(m, x):
    return _cumsum(m, m.where(x > 0.5, x, 0))


def _rows(m, A, v):
    return m.sum(A * v[None, :], axis=1)


def _colvar(m, X, mu):
    return m.sum((X - mu) ** 2, axis=0)


def _softmax(m, X):
    e = m.exp(X - m.max(X, axis=1, keepdims=True))
    return e / m.sum(e, axis=1, keepdims=True)


def _cumsum(m, v):
    fn = getattr(m, "cumulative_sum", None)
    if fn is not None:
        return fn(v)
    if hasattr(m, "cumsum"):
        try:
            return m.cumsum(v, 0)
        except TypeError:
            return m.cumsum(v, axis=0)
    raise AttributeError("no cumulative sum")


class _TorchNS:
    """The few names the expressions use, on torch."""

    def __init__(self, torch):
        self.t = torch

    def __getattr__(self, name):
        t = self.t
        if name == "max":
            return lambda x, axis=None, keepdims=False: (
                t.max(x) if axis is None else t.amax(x, dim=axis, keepdim=keepdims))
        if name == "sum":
            return lambda x, axis=None, keepdims=False: (
                t.sum(x) if axis is None else t.sum(x, dim=axis, keepdim=keepdims))
        if name == "std":
            return lambda x: t.std(x, correction=0)
        if name == "cumulative_sum":
            return lambda v: t.cumsum(v, 0)
        return getattr(t, name)


class _JaxNS:
    def __init__(self, jnp):
        self.j = jnp

    def __getattr__(self, name):
        if name == "cumulative_sum":
            return lambda v: self.j.cumsum(v, 0)
        return getattr(self.j, name)


def _timed_first(label, fn, args):
    t0 = time.perf_counter()
    out = fn(*args)
    _sync(out)
    _FIRST_CALLS.setdefault(label, round(time.perf_counter() - t0, 3))  # the first build only
    return out


def _sync(out):
    try:
        import cupy

        cupy.cuda.get_current_stream().synchronize()
    except ImportError:
        pass
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
    except ImportError:
        pass


def _computed(out):
    """``out`` with every deferred result computed (plain code under automatic fusion)."""
    for o in out if isinstance(out, tuple) else (out,):
        o._array  # noqa: B018 - reading the values computes a deferred array
    return out


def _impls(ctx, expr, label):
    def fused(*inputs):
        xp = forge()
        args = [xp.asarray(a) for a in inputs]
        f = xp.fuse(lambda *a: expr(xp, *a))
        _timed_first(f"forge_array {label}", f, args)
        return lambda: f(*args)

    def eager(*inputs):
        xp = forge()
        args = [xp.asarray(a) for a in inputs]  # zero-copy imports: never deferred
        return lambda: expr(xp, *args)

    def plain(*inputs):
        xp = forge()
        args = [xp.asarray(a, copy=True) for a in inputs]  # private: automatic fusion
        return lambda: _computed(expr(xp, *args))

    def cupy_eager(*inputs):
        import cupy as cp

        return lambda: expr(cp, *inputs)

    def cupy_fuse(*inputs):
        import cupy as cp

        def body(*a):
            return expr(cp, *a)

        # cupy.fuse names its CUDA kernel after the function: a lambda's "<lambda>" does
        # not compile
        body.__name__ = body.__qualname__ = "fused" + expr.__name__
        f = cp.fuse(body)
        f(*inputs)
        return lambda: f(*inputs)

    def torch_compile(*inputs):
        torch = import_optional("torch")
        if not torch.cuda.is_available():
            raise Skip("torch has no CUDA")
        ts = [torch.as_tensor(a, device="cuda") for a in inputs]
        ns = _TorchNS(torch)
        torch._dynamo.reset()  # every case its own compiled graph (one code object for all)
        f = torch.compile(_fresh(lambda *a: expr(ns, *a)))
        _timed_first(f"torch.compile {label}", f, ts)
        return lambda: f(*ts)

    def jax_jit(*inputs):
        jax = import_optional("jax")
        jax.config.update("jax_enable_x64", True)  # float64 cases in float64
        import jax.numpy as jnp

        arrs = [jnp.asarray(np.asarray(a.get())) for a in inputs]
        f = jax.jit(lambda *a: expr(_JaxNS(jnp), *a))
        _timed_first(f"jax.jit {label}", f, arrs)
        return lambda: jax.block_until_ready(f(*arrs))  # every output (a tuple for stats)

    return {
        "forge_array": fused,
        "forge_array plain": plain,
        "forge_array eager": eager,
        ctx.ref: cupy_eager,
        "cupy.fuse": cupy_fuse,
        "torch": torch_builder(ctx, lambda torch, *a: expr(_TorchNS(torch), *a)),
        "torch.compile": torch_compile,
        "jax.jit": jax_jit,
    }


def _fresh(fn):
    """A copy of ``fn`` with its own code object (dynamo counts recompilations per code)."""
    import types

    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__,
                              fn.__defaults__, fn.__closure__)


def _plain_sum(ctx, n, dt):
    """``forge_array sum``: one plain sum over ``n`` elements."""
    def builder(*inputs):
        xp = forge()
        big = xp.asarray(ctx.random((n,), dt, 999))
        return lambda: xp.sum(big)
    return builder


def _case(ctx, name, expr, shapes, dt, nread, nwrite, sum_n=None, rtol=None, dts=None):
    """One case of ``expr`` on inputs of ``shapes`` in ``dt`` (``dts``: a dtype per input
    instead, ``dt`` then naming the first), reading ``nread`` and writing ``nwrite``
    elements (of ``dt``; with ``dts`` the bytes come from each input's dtype and the
    writes from the promoted one)."""
    dt = np.dtype(dt)
    dts = [np.dtype(d) for d in dts] if dts else [dt] * len(shapes)
    main = int(np.prod(shapes[0]))

    def make(k):
        return tuple(ctx.random(s, d, k + 97 * j) for j, (s, d) in enumerate(zip(shapes, dts)))

    impls = _impls(ctx, expr, f"{name} {dt.name} {main:.0e}")
    if sum_n:
        impls["forge_array sum"] = Impl(_plain_sum(ctx, sum_n, dt), check=False,
                                        note="one plain sum over the same bytes")
    item = dt.itemsize
    nbytes = item * (nread + nwrite)
    if len(set(dts)) > 1:
        nbytes = (sum(int(np.prod(s)) * d.itemsize for s, d in zip(shapes, dts))
                  + nwrite * np.result_type(*dts).itemsize)
    return Case(SUITE, f"{name} {dt.name}", main, nbytes, make, impls,
                shape=shapes[0], dtype=dt.name, reference=ctx.ref,
                mem_bytes=6 * nbytes + 8 * item * main,
                rtol=rtol if rtol is not None else (2e-3 if dt == np.float32 else 1e-9))


def cases(ctx):
    out = []
    for exp in (6, 8):
        n = ctx.sizes.n(exp)
        if n is None:
            continue
        for dt in (np.float32, np.float64):
            v = [(n,)]
            out += [
                _case(ctx, "sum(x*y+1)", _sum_xy1, v * 2, dt, 2 * n, 0, sum_n=2 * n),
                _case(ctx, "max(abs(x-y))", _max_abs, v * 2, dt, 2 * n, 0, sum_n=2 * n),
                _case(ctx, "sum((x-mean(x))**2)", _centred, v, dt, n, 0, sum_n=n),
                _case(ctx, "logsumexp(x)", _logsumexp, v, dt, n, 0, sum_n=n),
                _case(ctx, "cumulative_sum(x*y)", _cumsum_xy, v * 2, dt, 2 * n, n),
                _case(ctx, "mean,std,max(x)", _stats, v, dt, n, 0, sum_n=n),
                _case(ctx, "2x+3y-1", _axpby, v * 2, dt, 2 * n, n),
                _case(ctx, "cumulative_sum(where(x>0.5,x,0))", _cumsum_where, v, dt, n, n),
            ]
    for dt in (np.float32,):
        s = ctx.sizes.shape(4, 4)
        if s is not None:
            out.append(_case(ctx, "sum(A*v[None,:],axis=1)", _rows, [s, (s[1],)], dt,
                             s[0] * s[1] + s[1], s[0], sum_n=s[0] * s[1]))
        s = ctx.sizes.shape(6, 2)
        if s is not None:
            out.append(_case(ctx, "sum((X-mu)**2,axis=0)", _colvar, [s, (s[1],)], dt,
                             s[0] * s[1] + s[1], s[1], sum_n=s[0] * s[1]))
            # a float64 mean beside float32 data (scikit-learn's column statistics)
            out.append(_case(ctx, "sum((X-mu64)**2,axis=0)", _colvar, [s, (s[1],)], dt,
                             s[0] * s[1] + s[1], s[1], sum_n=s[0] * s[1],
                             dts=[np.float32, np.float64], rtol=1e-9))
        s = ctx.sizes.shape(5, 3)
        if s is not None:
            out.append(_case(ctx, "softmax(X,axis=1)", _softmax, [s], dt, s[0] * s[1],
                             s[0] * s[1], sum_n=s[0] * s[1]))
    return out


def extras(ctx):
    """First-call seconds of each fused function (compile included) and of torch.compile,
    jax.jit as measured while the cases were built."""
    return {"first_call_s": dict(_FIRST_CALLS)}
