"""Fused expressions (``xp.fuse``): every fused result against eager evaluation of the same
function, launch counts, plans, breaks, writes and errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import forge_array as xp
from forge_array.runtime import STATS

pytestmark = pytest.mark.skipif(not xp.runtime.kernels_status()[0] if hasattr(xp, "runtime") else False,
                                reason="no kernels")


def _dev():
    from forge_array.runtime import SIMULATE

    return "cpu" if SIMULATE else "cuda:0"


def _arr(a):
    return xp.asarray(a, device=_dev())


def _np(a):
    return np.asarray(xp.asarray(a, device="cpu")) if isinstance(a, xp.Array) else np.asarray(a)


def _same(fused, eager, dtype):
    f, e = _np(fused), _np(eager)
    assert f.shape == e.shape and f.dtype == e.dtype, (f.shape, e.shape, f.dtype, e.dtype)
    if np.dtype(dtype).kind == "f":
        tol = 2e-4 if np.dtype(dtype) == np.float32 else 1e-10
        np.testing.assert_allclose(f, e, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(f, e)


def _launches(fn, *args):
    n0 = STATS["launches"]
    r = fn(*args)
    return r, STATS["launches"] - n0


# ------------------------------------------------------------------ launch counts and plans


def test_sum_of_expression_is_one_launch():
    rng = np.random.default_rng(0)
    x, y = _arr(rng.random(1000, dtype=np.float32)), _arr(rng.random(1000, dtype=np.float32))

    @xp.fuse
    def f(a, b):
        return xp.sum(a * b + 1)

    fused0 = STATS["fused"]
    r, n = _launches(f, x, y)
    assert n == 1 and STATS["fused"] == fused0 + 1
    _same(r, f.fn(x, y), np.float32)
    assert type(r) is xp.Array


def test_sibling_reductions_share_one_pass():
    x = _arr(np.random.default_rng(1).standard_normal(999))

    @xp.fuse
    def f(a):
        return xp.mean(a), xp.std(a), xp.max(a), xp.argmin(a), xp.var(a, correction=1)

    r, n = _launches(f, x)
    assert n == 1
    for got, want in zip(r, f.fn(x)):
        _same(got, want, want.dtype)
    text = f.explain(x)
    assert text.startswith("1 launch") and "mean, std, max, argmin, var" in text


def test_reduction_feeding_elementwise_steps():
    x = _arr(np.random.default_rng(2).random(777))

    @xp.fuse
    def centred(a):
        return xp.sum((a - xp.mean(a)) ** 2)

    @xp.fuse
    def logsumexp(a):
        m = xp.max(a)
        return xp.log(xp.sum(xp.exp(a - m))) + m

    r, n = _launches(centred, x)
    assert n == 2
    _same(r, centred.fn(x), np.float64)
    r, n = _launches(logsumexp, x)
    assert n <= 3
    _same(r, logsumexp.fn(x), np.float64)


def test_elementwise_outputs_in_one_map_launch():
    rng = np.random.default_rng(3)
    a, b = _arr(rng.random(513)), _arr(rng.random(513))

    @xp.fuse
    def f(u, v):
        return 2.0 * u + 3.0 * v - 1.0, u > v, xp.where(u > 0.5, u, 0.0)

    r, n = _launches(f, a, b)
    assert n == 1
    for got, want in zip(r, f.fn(a, b)):
        _same(got, want, want.dtype)


def test_axis_reductions_and_matvec_pattern():
    rng = np.random.default_rng(4)
    A, v = _arr(rng.random((33, 65))), _arr(rng.random(65))

    @xp.fuse
    def f(M, w):
        return xp.sum(M * w[None, :], axis=1), xp.mean((M - 1.0) ** 2, axis=0, keepdims=True)

    r, n = _launches(f, A, v)
    assert n == 2
    for got, want in zip(r, f.fn(A, v)):
        _same(got, want, np.float64)
    np.testing.assert_allclose(_np(r[0]), _np(A) @ _np(v), rtol=1e-12)


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "any", "all", "mean"])
@pytest.mark.parametrize("keepdims", [False, True])
def test_axis_reductions_replay_on_new_values(name, keepdims):
    """Later calls of one signature replay the axis launch on the leaves' addresses alone
    (broadcast leaves included): each call's own values, one launch of our kernels."""
    rng = np.random.default_rng(12)
    red = getattr(xp, name)

    @xp.fuse
    def f(M, w, c):
        if name in ("any", "all"):
            return red(xp.logical_and(M > 0.3, c[:, None] | (w[None, :] > 0.5)), axis=1,
                       keepdims=keepdims)
        return red(M * w[None, :] + 1.0, axis=0, keepdims=keepdims)

    for _ in range(3):
        M, w = _arr(rng.random((33, 20)) + 0.5), _arr(rng.random(20))
        c = _arr(rng.random(33) > 0.5)
        got, n = _launches(f, M, w, c)
        assert n == 1
        want = f.fn(M, w, c)
        _same(got, want, want.dtype)


def test_scans_of_expressions_replay_on_new_values_and_threads():
    """Later calls replay the scan's launch; another thread (whose tile states are its own)
    takes the full path: every call gives its own values."""
    import threading

    rng = np.random.default_rng(13)

    @xp.fuse
    def f(a, b):
        return xp.cumulative_sum(a * b + 1.0), xp.cumulative_prod(xp.where(a > 0.5, a, 1.0))

    def check():
        a, b = _arr(rng.random(300)), _arr(rng.random(300))
        got, n = _launches(f, a, b)
        for g, w in zip(got, f.fn(a, b)):
            _same(g, w, np.float64)
        return n

    assert [check() for _ in range(3)][1:] == [2, 2]
    errors = []

    def other():
        try:
            check()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert not errors, errors
    plans = list(f._plans.values())
    assert not [p for p in plans if isinstance(p, str)], plans   # a reason a call was not recorded
    assert any(type(s[0]).__name__ == "_DirectScan" for p in plans for s in p.steps)


def test_row_softmax():
    X = _arr(np.random.default_rng(5).standard_normal((40, 70)).astype(np.float32))

    @xp.fuse
    def softmax(z):
        e = xp.exp(z - xp.max(z, axis=1, keepdims=True))
        return e / xp.sum(e, axis=1, keepdims=True)

    _same(softmax(X), softmax.fn(X), np.float32)


# ------------------------------------------------------------------ random expressions

_FLOAT_UNARY = ["negative", "abs", "exp", "sin", "tanh", "square"]
_INT_UNARY = ["negative", "abs", "square"]
_BINARY = ["add", "subtract", "multiply", "maximum", "minimum"]


def _views(draw, base):
    """A view of ``base`` of shape (n,): contiguous, offset, reversed, or strided."""
    kind = draw(st.sampled_from(["plain", "offset", "reversed", "strided"]))
    n = base.shape[0] // 2
    if kind == "plain":
        return base[:n]
    if kind == "offset":
        return base[1:n + 1]
    if kind == "reversed":
        return base[n - 1::-1] if n else base[:0]
    return base[: 2 * n: 2]


@st.composite
def expressions(draw):
    dtype = draw(st.sampled_from([np.float32, np.float64, np.int32, np.int8]))
    n = draw(st.sampled_from([1, 31, 32, 33, 200]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    nleaves = draw(st.integers(1, 3))
    leaves = []
    for _ in range(nleaves):
        if np.dtype(dtype).kind == "f":
            base = rng.standard_normal(2 * n + 2).astype(dtype)
        else:
            base = rng.integers(-50, 50, 2 * n + 2).astype(dtype)
        leaves.append(_views(draw, _arr(base)))
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["unary", "binary", "scalar", "where"]))
        if kind == "unary":
            names = _FLOAT_UNARY if np.dtype(dtype).kind == "f" else _INT_UNARY
            steps.append(("unary", draw(st.sampled_from(names)), draw(st.integers(0, 10))))
        elif kind == "binary":
            steps.append(("binary", draw(st.sampled_from(_BINARY)), draw(st.integers(0, 10)),
                          draw(st.integers(0, 10))))
        elif kind == "scalar":
            c = draw(st.integers(-3, 3))
            steps.append(("scalar", draw(st.sampled_from(["add", "multiply", "subtract"])),
                          draw(st.integers(0, 10)), float(c) if np.dtype(dtype).kind == "f" else c))
        else:
            steps.append(("where", draw(st.integers(0, 10)), draw(st.integers(0, 10))))
    consumer = draw(st.sampled_from(["sum", "max", "min", "mean", "argmax", "map", "all"]))
    if consumer == "mean" and np.dtype(dtype).kind != "f":
        consumer = "sum"
    return dtype, leaves, steps, consumer


def _program(steps, consumer):
    def fn(*leaves):
        vals = list(leaves)
        for s in steps:
            if s[0] == "unary":
                v = getattr(xp, s[1])(vals[s[2] % len(vals)])
            elif s[0] == "binary":
                v = getattr(xp, s[1])(vals[s[2] % len(vals)], vals[s[3] % len(vals)])
            elif s[0] == "scalar":
                v = getattr(xp, s[1])(vals[s[2] % len(vals)], s[3])
            else:
                a, b = vals[s[1] % len(vals)], vals[s[2] % len(vals)]
                v = xp.where(a > b, a, b * 2)
            vals.append(v)
        out = vals[-1]
        if consumer == "map":
            return out
        if consumer == "all":
            return xp.all(out > 0)
        return getattr(xp, consumer)(out)
    return fn


@settings(max_examples=40, deadline=None)
@given(expressions())
def test_random_expressions_equal_eager(case):
    dtype, leaves, steps, consumer = case
    fn = _program(steps, consumer)
    with np.errstate(all="ignore"):
        want = fn(*leaves)
        got = xp.fuse(fn)(*leaves)
    _same(got, want, want.dtype)


# ------------------------------------------------------------------ scalars, breaks, writes


def test_scalar_and_zero_d_arguments():
    x = _arr(np.arange(10.0))

    @xp.fuse
    def f(a, s, t):
        return xp.sum(a * s + t)

    t = _arr(np.float64(0.5))
    _same(f(x, 3.0, t), f.fn(x, 3.0, t), np.float64)
    _same(f(x, -1.0, t), f.fn(x, -1.0, t), np.float64)


def test_unfusable_steps_run_where_they_stand():
    x = _arr(np.random.default_rng(6).random(100))

    @xp.fuse
    def f(a):
        s = xp.sort(a * 2)               # sorting reads values: settles a * 2
        return xp.sum(s[:10] + 1), xp.floor(a)   # floor: not fused, eager

    for got, want in zip(f(x), f.fn(x)):
        _same(got, want, np.float64)


def test_in_place_write_after_building_an_expression():
    def body(a):
        t = a * 2
        a += 1
        return xp.sum(t), t

    fused = xp.fuse(body)
    x1, x2 = _arr(np.arange(5.0)), _arr(np.arange(5.0))
    r_fused, r_eager = fused(x1), body(x2)
    for got, want in zip(r_fused, r_eager):
        _same(got, want, np.float64)
    _same(x1, x2, np.float64)


def test_setitem_on_a_view_of_a_leaf():
    def body(a):
        t = a + 1
        a[1:3] = 10.0
        return t, xp.max(a)

    x1, x2 = _arr(np.arange(5.0)), _arr(np.arange(5.0))
    for got, want in zip(xp.fuse(body)(x1), body(x2)):
        _same(got, want, np.float64)


def test_kept_deferred_arrays_are_computed_when_the_call_ends():
    kept = []

    @xp.fuse
    def f(a):
        kept.append(a * 3)
        return xp.sum(a)

    x = _arr(np.arange(4.0))
    f(x)
    x[...] = 0.0
    _same(kept[0], np.arange(4.0) * 3, np.float64)


def test_empty_and_zero_d_inputs():
    @xp.fuse
    def f(a):
        return xp.sum(a * 2), a + 1

    for shape in ((0,), (), (1,)):
        x = _arr(np.ones(shape))
        for got, want in zip(f(x), f.fn(x)):
            _same(got, want, np.float64)


def test_nested_fused_functions():
    inner = xp.fuse(lambda a: a * a)

    @xp.fuse
    def outer(a):
        return xp.sum(inner(a) + 1)

    x = _arr(np.arange(6.0))
    r, n = _launches(outer, x)
    assert n == 1
    _same(r, outer.fn(x), np.float64)


def test_exception_inside_a_fused_function_leaves_no_trace_state():
    @xp.fuse
    def bad(a):
        a * 2
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        bad(_arr(np.ones(3)))
    from forge_array.fusion import build

    assert not build.tracing() and build.ACTIVE[0] == 0


# ------------------------------------------------------------------ errors as in eager code


def test_errors_are_the_eager_ones():
    x = _arr(np.ones(3))
    y = _arr(np.ones(4))
    b = _arr(np.array([True, False, True]))

    def mismatch(a, c):
        return xp.sum(a + c)

    with pytest.raises(ValueError) as eager:
        mismatch(x, y)
    with pytest.raises(ValueError) as fused:
        xp.fuse(mismatch)(x, y)
    assert type(eager.value) is type(fused.value)
    with pytest.raises(TypeError, match="floating-point"):
        xp.fuse(lambda a: xp.exp(a))(b)
    with pytest.raises(TypeError):
        xp.fuse(lambda a: a + "s")(x)
    with pytest.raises(TypeError, match="needs a function"):
        xp.fuse(3)


def test_integer_and_bool_results_are_exact():
    rng = np.random.default_rng(7)
    a = _arr(rng.integers(-128, 127, 300).astype(np.int8))
    b = _arr(rng.integers(-128, 127, 300).astype(np.int8))

    @xp.fuse
    def f(u, v):
        w = u * v + 7            # wraps in int8 as eager code does
        return w, xp.sum(w), xp.any(w > 100), xp.astype(w, xp.float32) / 2, xp.clip(w, -5, 5)

    for got, want in zip(f(a, b), f.fn(a, b)):
        _same(got, want, want.dtype)


# ------------------------------------------------------------------ plans replayed per signature


def _counting(body):
    calls = [0]

    def fn(*args, **kwargs):
        calls[0] += 1
        return body(*args, **kwargs)

    return xp.fuse(fn), calls


def test_plan_is_replayed_on_new_arguments_of_one_signature():
    def body(a, b):
        m = xp.mean(a)
        return xp.sum(a * b + 1), a - m, {"max": xp.max(xp.abs(a - b)), "n": 3}

    f, calls = _counting(body)
    rng = np.random.default_rng(11)
    for k in range(3):
        x, y = _arr(rng.random(40)), _arr(rng.random(40))
        got, n = _launches(f, x, y)
        want = body(x, y)
        _same(got[0], want[0], np.float64)
        _same(got[1], want[1], np.float64)
        _same(got[2]["max"], want[2]["max"], np.float64)
        assert got[2]["n"] == 3 and type(got[1]) is xp.Array
        assert n == 2  # the mean, sum and max pass, then the map
    assert calls[0] == 1


def test_signature_tells_aliased_arguments_scalars_and_shapes_apart():
    f, calls = _counting(lambda a, b, s: xp.sum(a * b + s))
    x, y = _arr(np.arange(6.0)), _arr(np.arange(6.0) + 1)
    _same(f(x, y, 2.0), np.sum(np.arange(6.0) * (np.arange(6.0) + 1) + 2), np.float64)
    _same(f(x, x, 2.0), np.sum(np.arange(6.0) ** 2 + 2), np.float64)
    _same(f(x, y, 3.0), np.sum(np.arange(6.0) * (np.arange(6.0) + 1) + 3), np.float64)
    _same(f(x, y, 3), np.sum(np.arange(6.0) * (np.arange(6.0) + 1) + 3), np.float64)
    z = _arr(np.arange(8.0))
    _same(f(z, z, 2.0), np.sum(np.arange(8.0) ** 2 + 2), np.float64)
    _same(f(x, y, float("nan")), np.nan, np.float64)
    _same(f(x, y, float("nan")), np.nan, np.float64)
    assert calls[0] == 6


def test_views_of_arguments_are_taken_again_at_each_replay():
    def body(A, v):
        return xp.sum(A * v[None, :], axis=1), xp.sum(A.T[1:, :] * 2, axis=0)

    f, calls = _counting(body)
    rng = np.random.default_rng(12)
    for _ in range(3):
        A, v = _arr(rng.random((5, 4))), _arr(rng.random(4))
        for got, want in zip(f(A, v), body(A, v)):
            _same(got, want, np.float64)
    assert calls[0] == 1


def test_plans_that_depend_on_more_than_the_signature_trace_every_call():
    state = {"w": _arr(np.ones(4))}
    cases = [
        lambda a: xp.sum(a * state["w"]),           # an array kept outside the arguments
        lambda a: a * 2 if float(xp.sum(a)) > 0 else a * 3,   # values read while it runs
        lambda a: xp.sum(xp.floor(a) + 1),          # an eager step makes a new array
    ]
    for body in cases:
        f, calls = _counting(body)
        for k in range(3):
            state["w"] = _arr(np.full(4, float(k)))
            x = _arr(np.arange(4.0) - 1.5 * k)
            _same(f(x), body(x), np.float64)
        assert calls[0] == 3


def test_writes_into_arguments_happen_at_every_call():
    def body(a):
        a += 1
        return xp.sum(a)

    f, calls = _counting(body)
    x = _arr(np.zeros(3))
    f(x)
    _same(f(x), 6.0, np.float64)
    _same(x, np.full(3, 2.0), np.float64)
    assert calls[0] == 2


def test_scans_into_arguments_happen_at_every_call():
    def body(a, o):
        xp.accumulate(xp.ops.add, a, out=o)
        return xp.sum(a * 2)

    f, calls = _counting(body)
    o = _arr(np.zeros(6))
    for k in range(3):
        x = _arr(np.arange(6.0) + k)
        _same(f(x, o), 2 * float(np.sum(np.arange(6.0) + k)), np.float64)
        _same(o, np.cumsum(np.arange(6.0) + k), np.float64)
    assert calls[0] == 3


def test_arguments_without_a_signature_trace_every_call():
    f, calls = _counting(lambda a, obj: xp.sum(a * 2))
    x = _arr(np.arange(3.0))
    for _ in range(2):
        _same(f(x, object()), 6.0, np.float64)
    assert calls[0] == 2


def test_explain_says_whether_the_plan_is_replayed():
    f = xp.fuse(lambda a: xp.sum(a + 1))
    x = _arr(np.arange(3.0))
    assert "replayed" not in f.explain(x)
    f(x)
    assert "replayed" in f.explain(x)
    g = xp.fuse(lambda a: a * 2 if float(xp.sum(a)) > 0 else a)
    g(x)
    assert "traced at every call: the function reads values" in g.explain(x)


def test_replays_follow_the_layout_of_each_argument():
    def body(a, b):
        return xp.sum(a * b + 1), a * 2 - b, xp.max(a - xp.mean(b))

    f = xp.fuse(body)
    base = _arr(np.random.default_rng(13).random(65))
    other = _arr(np.random.default_rng(14).random(65))
    views = [base[:64], base[::-1][:64], base[1:65], base[::2][:32], base[:32]]
    for _ in range(2):
        for v in views:
            w = other[: v.shape[0]]
            for got, want in zip(f(v, w), body(v, w)):
                _same(got, want, np.float64)
            bools = v > 0.5
            g = xp.fuse(lambda m, a: xp.sum(xp.where(m, a, 0.0)))
            _same(g(bools, v), xp.sum(xp.where(bools, v, 0.0)), np.float64)


@pytest.mark.parametrize("items", [1, 2, 3])
def test_map_kernel_covers_every_element_for_any_unroll(monkeypatch, bk, items):
    from forge_array.dispatch import elementwise
    from forge_array.runtime import tuning

    p = dict(tuning.params("map"), items=items)
    monkeypatch.setattr(tuning, "params", lambda kind, _p=tuning.params: p if kind == "map" else _p(kind))
    monkeypatch.setattr(elementwise, "_PLANS", {})
    monkeypatch.setattr(elementwise, "_MAP_PLANS", {})
    for n in (1, 31, 33, 64 * 2 * 2 * 4 + 5, 3000):
        a = np.arange(n, dtype=np.float32)
        b = np.full(n, 2.0, dtype=np.float32)
        (out,) = elementwise.map_arrays(lambda u, v: (u * v + 1.0,), [bk.asarray(a), bk.asarray(b)],
                                        ("float32",))
        np.testing.assert_array_equal(out if bk is np else out.get(), a * 2 + 1)


def test_a_fused_call_before_the_kernel_layer_runs_as_plain_code_and_again_behind_the_load(monkeypatch):
    """Background mode, the kernel layer (numba) not loaded: the call runs as plain code and
    is queued to run once more behind the layer's load (where it is traced and its kernels
    queued); that run gives the same value."""
    from forge_array import _routing
    from forge_array.fusion import trace

    prepared = []
    monkeypatch.setattr(trace, "_LAYER", [False])
    monkeypatch.setattr(trace, "_layer_ready", lambda: False)
    monkeypatch.setattr(trace, "kernels_available", lambda a: True)
    monkeypatch.setattr(_routing, "_prepare_later", lambda key, call, nbytes: prepared.append((key, call, nbytes)))
    f = xp.fuse(lambda a, b: xp.sum(a * b + 1))
    x = xp.asarray(np.arange(8.0), device="cpu")
    y = xp.asarray(np.full(8, 2.0), device="cpu")
    assert float(f(x, y)) == float(np.sum(np.arange(8.0) * 2 + 1))
    assert len(prepared) == 1
    key, call, nbytes = prepared[0]
    assert key[0] == "fused" and nbytes == 2 * 8 * 8   # two float64 operands of 8
    monkeypatch.setattr(trace, "_LAYER", [True])   # the layer loaded: the queued call traces
    assert float(call()) == float(f(x, y))
