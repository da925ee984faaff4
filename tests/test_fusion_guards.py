"""``xp.fuse`` never replays a plan its trace does not cover: values read by Python,
arguments that are also globals or closure values, failed calls, and long or wide
expressions all give eager's values at every call."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import forge_array as xp
from forge_array.runtime import SIMULATE

DEVICE = "cpu" if SIMULATE else "cuda:0"  # the simulator fuses CPU arrays


def _a(v, dtype=None):
    return xp.asarray(np.asarray(v, dtype=dtype), device=DEVICE)


def _np(x):
    return np.asarray(x.to_device("cpu"))


def _calls(fn, *arg_lists):
    """fn fused and eager over each argument list, every result compared exactly."""
    f = xp.fuse(fn)
    for args in arg_lists:
        got, want = f(*args), fn(*args)
        if isinstance(want, tuple):
            for g, w in zip(got, want):
                np.testing.assert_array_equal(_np(g), _np(w))
        else:
            np.testing.assert_array_equal(_np(got), _np(want))
    return f


# ---------------------------------------------------------------- values read by Python

def test_branch_on_a_value():
    def f(x, s):
        y = x * 2
        if float(s) > 0:
            y = y + 10
        return xp.sum(y)
    x = _a([1.0, 2.0])
    _calls(f, (x, _a(1.0)), (x, _a(-1.0)), (x, _a(3.0)))


def test_bool_of_a_flag():
    def f(x, flag):
        return xp.sum(x * 3) if bool(flag) else xp.sum(x - 1)
    x = _a([1.0, 2.0, 4.0])
    _calls(f, (x, _a(True)), (x, _a(False)))


def test_slice_bound_and_index_from_arrays():
    def g(x, n):
        return xp.sum(x[n:] * 2)

    def h(x, k):
        return x[k] * 2 + 1
    x = _a(np.arange(6.0))
    _calls(g, (x, _a(1)), (x, _a(4)))
    _calls(h, (x, _a(2)), (x, _a(5)))


def test_value_of_a_sorted_array_and_nonzero_shape():
    def g(x, n):
        k = int(xp.sort(n)[0])
        return xp.sum(x[:k] + 1)

    def h(x, m):
        c = xp.nonzero(m)[0].shape[0]
        return xp.sum(x * c)
    x = _a(np.arange(6.0))
    _calls(g, (x, _a([3, 5])), (x, _a([5, 1])))
    _calls(h, (x, _a([True, False, True])), (x, _a([True, True, True])))


def test_scale_read_between_fused_steps():
    def f(x, s):
        y = x * 2
        z = y * float(s)
        return xp.sum(z + 1)
    x = _a([1.0, 2.0, 3.0])
    _calls(f, (x, _a(2.0)), (x, _a(5.0)))


def test_boolean_mask_decides_the_shape():
    def f(x, m):
        return xp.sum(x[m] * 2)
    x = _a([1.0, 2.0, 3.0])
    _calls(f, (x, _a([True, False, True])), (x, _a([False, False, True])))


def test_explain_says_values_were_read():
    f = xp.fuse(lambda x, s: xp.sum(x * float(s)))
    x = _a([1.0, 2.0])
    f(x, _a(2.0))
    assert "reads values" in f.explain(x, _a(2.0))


# ---------------------------------------------------------------- deferred arrays left alive

def test_a_deferred_array_kept_by_a_global_is_computed_and_the_call_not_replayed():
    kept = {}

    def fn(a, b):
        t = a * b + 1.0
        kept["t"] = t                      # reachable after the call: the function keeps it
        return xp.cumulative_sum(t)

    x, y = _a([1.0, 2.0, 3.0]), _a([2.0, 2.0, 2.0])
    f = _calls(fn, (x, y), (y, x))
    f(x, x)
    np.testing.assert_array_equal(_np(kept["t"]), [2.0, 5.0, 10.0])   # the last call's value
    plans = set(f._plans.values())
    assert plans == {"a deferred array is kept outside the outputs"}, plans


def test_a_deferred_array_held_only_by_a_reference_cycle_leaves_the_plan():
    """An intermediate that only cyclic garbage holds when the recording call ends (the
    collector has not run yet) is no array the function kept: the call keeps its plan."""
    import gc

    def fn(a, b):
        t = a * b + 1.0
        box = {"t": t}
        box["self"] = box                  # a cycle: freed by the collector alone
        return xp.cumulative_sum(t)

    x, y = _a([1.0, 2.0, 3.0]), _a([2.0, 2.0, 2.0])
    was = gc.isenabled()
    gc.disable()
    try:
        f = _calls(fn, (x, y), (y, x), (x, x))
    finally:
        if was:
            gc.enable()
    plans = list(f._plans.values())
    assert plans and not [p for p in plans if isinstance(p, str)], plans


# ---------------------------------------------------------------- aliasing

def test_global_that_is_also_the_argument():
    G = _a([1.0, 2.0, 3.0])
    H = _a([2.0, 2.0, 2.0])
    f = xp.fuse(lambda a: xp.sum(a * G))
    assert float(f(G)) == 14.0
    assert float(f(H)) == 12.0
    assert float(f(G)) == 14.0


def test_closure_value_that_is_also_the_argument():
    def make(c):
        return xp.fuse(lambda a: a * c + 1)
    c = _a([1.0, 2.0])
    f = make(c)
    np.testing.assert_array_equal(_np(f(c)), [2.0, 5.0])
    np.testing.assert_array_equal(_np(f(_a([3.0, 3.0]))), [4.0, 7.0])


def test_arguments_that_are_the_same_array_then_different():
    x, y = _a([1.0, 2.0]), _a([5.0, 7.0])
    _calls(lambda a, b: xp.sum(a * b + 1), (x, x), (x, y), (y, x), (y, y))


def test_overlapping_views_as_arguments():
    x = _a(np.arange(8.0))
    _calls(lambda a, b: a * 2 - b, (x[1:], x[:-1]), (x[:-1], x[1:]), (x[::2], x[1::2]))


def test_replays_on_new_strides_and_dtypes():
    f = lambda a: xp.sum(a * a + 1)  # noqa: E731
    base = np.arange(24.0).reshape(4, 6)
    _calls(f, (_a(base),), (_a(base)[:, ::2],), (_a(base).T,), (_a(base, np.float32),),
           (_a(base.astype(np.int32)),), (_a(base)[::-1],))


# ---------------------------------------------------------------- failed calls

def test_a_failed_call_leaves_nothing_pending():
    keep = []

    def f(a):
        keep.append(a * 2)
        return xp.sum(a, axis=5)
    x = _a([0.0, 1.0, 2.0])
    with pytest.raises((ValueError, IndexError)):
        xp.fuse(f)(x)
    x[0] = 100.0
    x[1] = -1.0
    np.testing.assert_array_equal(_np(keep[0]), [0.0, 2.0, 4.0])


def test_a_failed_call_raises_the_eager_error_every_time():
    f = xp.fuse(lambda a: xp.sum(a * 2, axis=3))
    x = _a([1.0, 2.0])
    for _ in range(2):
        with pytest.raises((ValueError, IndexError)) as fused:
            f(x)
        with pytest.raises((ValueError, IndexError)) as eager:
            xp.sum(x * 2, axis=3)
        assert type(fused.value) is type(eager.value)


# ---------------------------------------------------------------- long and wide

def test_a_chain_of_a_thousand_steps():
    def f(x):
        y = x
        for k in range(1200):
            y = y * 1.0 + (1.0 if k % 2 else -1.0)
        return xp.sum(y), y
    x = _a(np.linspace(-1, 1, 33))
    f_ = xp.fuse(f)
    for _ in range(2):
        s, y = f_(x)
        es, ey = f(x)
        np.testing.assert_allclose(_np(y), _np(ey))
        np.testing.assert_allclose(float(s), float(es))


def test_an_expression_of_many_leaves():
    rng = np.random.default_rng(0)
    leaves = [_a(rng.standard_normal(17)) for _ in range(130)]

    def f(*xs):
        acc = xs[0]
        for v in xs[1:]:
            acc = acc + v * 0.5
        return xp.sum(acc), acc
    f_ = xp.fuse(f)
    for _ in range(2):
        s, acc = f_(*leaves)
        es, eacc = f(*leaves)
        np.testing.assert_allclose(_np(acc), _np(eacc), rtol=1e-12)
        np.testing.assert_allclose(float(s), float(es), rtol=1e-12)


def test_many_outputs_of_one_shape():
    xs = [_a(np.full(9, float(k))) for k in range(70)]

    def f(*xs):
        return tuple(v * 2 + 1 for v in xs)
    _calls(f, tuple(xs))


def test_dozens_of_zero_d_operands():
    rng = np.random.default_rng(1)
    xs = [_a(rng.standard_normal(40)) for _ in range(12)]

    def f(*xs):
        mask = xp.abs(xs[0] - xp.mean(xs[0])) > 2 * xp.std(xs[0])
        for v in xs[1:]:
            mask = mask | (xp.abs(v - xp.mean(v)) > 0.5 * xp.std(v))
        return mask
    _calls(f, tuple(xs))


# ---------------------------------------------------------------- random calls of one function

_GLOBAL = {}


def _adversarial(a, b, s, read):
    """Reads its arguments, a global that may be one of them, and (when ``read``) a value
    of ``s`` that decides a branch."""
    g = _GLOBAL["g"]
    y = a * 2 + b - g[: a.shape[0]]
    if read and float(xp.max(s)) > 0.5:
        y = y * 3
    return xp.sum(y * y), y + 1


@settings(max_examples=25 if SIMULATE else 100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["float32", "float64", "int32"]),
                          st.sampled_from(["same", "other", "global", "view"]),
                          st.integers(1, 2), st.floats(0, 1), st.booleans()),
                min_size=2, max_size=6))
def test_random_calls_equal_eager(calls):
    rng = np.random.default_rng(0)
    base = _a(rng.integers(-3, 4, 64).astype(np.float64))
    f = xp.fuse(_adversarial)
    for dtype, alias, step, sv, read in calls:
        x = xp.astype(base, getattr(xp, dtype))[::step]
        n = x.shape[0]
        _GLOBAL["g"] = g = xp.astype(_a(rng.integers(-3, 4, 64).astype(np.float64)), x.dtype)
        b = {"same": x, "other": xp.flip(x), "global": g[:n], "view": x[::-1]}[alias]
        if alias == "global":
            x = g[:n]
        s = _a([sv])
        got, want = f(x, b, s, read), _adversarial(x, b, s, read)
        np.testing.assert_allclose(_np(got[0]), _np(want[0]), rtol=1e-5)
        np.testing.assert_array_equal(_np(got[1]), _np(want[1]))
