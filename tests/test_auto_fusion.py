"""Automatic fusion of plain code: fused results against eager evaluation, and tests that try
to observe a deferred step (writes to shared leaves, in-place operators, views, exports,
threads, exceptions, deep expressions)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from test_fusion import _program, _same, expressions

import forge_array as xp
from forge_array.fusion import auto, build
from forge_array.fusion.expr import Deferred, pending
from forge_array.runtime import SIMULATE, STATS, caches

DEV = "cpu" if SIMULATE else "cuda:0"


@pytest.fixture(autouse=True)
def fusion_on(monkeypatch):
    """Automatic fusion on for every size (and on simulated CPU arrays), fusing expressions
    whatever constants they were compiled with before (the tests' random expressions meet
    many)."""
    from forge_array.fusion import codegen

    monkeypatch.setattr(codegen, "MAX_CONSTANT_SETS", 1 << 30)
    old = auto.enable(True, simulated_cpu=True)
    size = auto.MIN_SIZE[0]
    auto.MIN_SIZE[0] = 1
    yield
    auto.MIN_SIZE[0] = size
    auto.enable(*old)


@contextlib.contextmanager
def eager():
    old = auto.enable(False)
    try:
        yield
    finally:
        auto.enable(*old)


def _private(a):
    """A forge_array array of ``a`` that only forge_array can write (a copy)."""
    return xp.asarray(a, device=DEV, copy=True)


def _np(a):
    return np.array(xp.asarray(a, device="cpu"), copy=True)


def _launches(fn):
    n0 = STATS["launches"]
    r = fn()
    return r, STATS["launches"] - n0


def test_sum_of_expression_is_one_launch_in_plain_code():
    rng = np.random.default_rng(0)
    a, b = rng.random(300, dtype=np.float32), rng.random(300, dtype=np.float32)
    x, y = _private(a), _private(b)
    fused0 = STATS["fused"]
    r, n = _launches(lambda: float(xp.sum(x * y + 1)))
    assert n == 1
    assert STATS["fused"] - fused0 == 1          # the expression x * y + 1, inside the sum
    np.testing.assert_allclose(r, np.sum(a.astype(np.float64) * b + 1), rtol=1e-5)


def test_sibling_reductions_of_plain_code_share_one_pass():
    a = np.random.default_rng(1).random(257)
    x = _private(a)
    (m, s, mx), n = _launches(lambda: [float(v) for v in (xp.mean(x), xp.std(x), xp.max(x))])
    assert n == 1
    np.testing.assert_allclose([m, s, mx], [a.mean(), a.std(), a.max()], rtol=1e-12)


def test_reduction_feeding_elementwise_steps():
    a = np.random.default_rng(2).random(100)
    x = _private(a)
    r = xp.sum((x - xp.mean(x)) ** 2)
    np.testing.assert_allclose(float(r), np.sum((a - a.mean()) ** 2), rtol=1e-12)
    lse = xp.log(xp.sum(xp.exp(x - xp.max(x)))) + xp.max(x)
    np.testing.assert_allclose(float(lse), np.log(np.sum(np.exp(a - a.max()))) + a.max(),
                               rtol=1e-12)


def test_results_are_arrays_of_the_namespace():
    x = _private(np.arange(5.0))
    t = x * 2
    assert isinstance(t, xp.Array) and t.shape == (5,) and t.dtype == xp.float64
    assert t.device == x.device and t.ndim == 1 and t.size == 5
    assert pending(t) is not None                      # metadata did not compute it
    assert repr(t).startswith("Array([0., 2., 4.")
    assert pending(t) is None


@settings(max_examples=25, deadline=None)
@given(expressions())
def test_random_expressions_in_plain_code_equal_eager(case):
    dtype, leaves, steps, consumer = case
    leaves = [xp.asarray(v, copy=True) for v in leaves]     # private copies of the views
    fn = _program(steps, consumer)
    with np.errstate(all="ignore"):
        with eager():
            want = fn(*leaves)
        got = fn(*leaves)
    _same(got, want, want.dtype)


def test_small_steps_on_materialised_arrays_run_eagerly():
    auto.MIN_SIZE[0] = 1000
    x = _private(np.arange(10.0))
    assert type(x + 1) is xp.Array
    big = _private(np.arange(2000.0))
    assert pending(big + 1) is not None
    t = big * 2
    assert pending(t[:3] + 1) is None                  # indexing settled t; small: eager


# ------------------------------------------------------------------ steps computed alone


@pytest.fixture
def alone_fresh(monkeypatch):
    """No structure computed alone yet; two alone settlements make a structure eager."""
    from forge_array.fusion import expr

    monkeypatch.setattr(auto, "ALONE_LIMIT", [2])
    expr.ALONE.clear()
    auto._SKIPPED.clear()
    yield
    expr.ALONE.clear()
    auto._SKIPPED.clear()


def test_a_step_computed_alone_runs_eagerly_after_the_limit_but_for_probes(alone_fresh,
                                                                          monkeypatch):
    a, b = np.arange(50.0), np.arange(50.0)[::-1] * 0.5
    x, m = _private(a), _private(b)
    deferred = []
    for _ in range(auto.PROBE_EVERY + 3):
        t = x - m
        deferred.append(pending(t) is not None)
        np.testing.assert_array_equal(_np(xp.flip(t)), (a - b)[::-1])  # flip: not fused
    assert deferred[:2] == [True, True]
    probe = 2 + auto.PROBE_EVERY - 1
    assert not any(deferred[2:probe])
    assert deferred[probe] and not deferred[probe + 1]
    monkeypatch.setattr(build, "Node", _no_node)     # known to run eagerly: no node built
    np.testing.assert_array_equal(_np(xp.flip(x - m)), (a - b)[::-1])


def _no_node(*args, **kwargs):
    raise AssertionError("a node was built for a structure that runs eagerly")


def test_a_consumer_that_fuses_a_probe_makes_its_structure_deferred_again(alone_fresh):
    a, b = np.arange(40.0), np.arange(40.0) * 3.0
    x, m = _private(a), _private(b)
    for _ in range(2):
        _np(xp.flip(x * m))
    for _ in range(auto.PROBE_EVERY - 1):
        assert pending(x * m) is None
    t = x * m                                   # the probe
    assert pending(t) is not None
    fused0 = STATS["fused"]
    np.testing.assert_allclose(float(xp.sum(t + 1.0)), np.sum(a * b + 1.0), rtol=1e-12)
    assert STATS["fused"] > fused0              # t + 1 computed inside the sum
    assert pending(x * m) is not None           # deferred again


def test_reductions_computed_alone_run_eagerly_and_siblings_keep_one_pass(alone_fresh,
                                                                          monkeypatch):
    a = np.random.default_rng(5).random((30, 7))
    x = _private(a)
    kinds = []
    for _ in range(4):
        r = xp.sum(x, axis=0)
        kinds.append(pending(r) is not None)
        np.testing.assert_allclose(_np(r), a.sum(axis=0), rtol=1e-12)
    assert kinds == [True, True, False, False]
    for _ in range(2):
        np.testing.assert_allclose(_np(xp.exp(x)), np.exp(a), rtol=1e-12)
    with monkeypatch.context() as mp:              # known to run eagerly: no node built
        mp.setattr(build, "Node", _no_node)
        np.testing.assert_allclose(_np(xp.sum(x, axis=0)), a.sum(axis=0), rtol=1e-12)
        np.testing.assert_allclose(_np(xp.exp(x)), np.exp(a), rtol=1e-12)
    v = x[:, 0]
    for _ in range(4):                          # computed together each time: never alone
        (mn, sd, mx), n = _launches(lambda: [float(t) for t in (xp.mean(v), xp.std(v), xp.max(v))])
        assert n == 1
        np.testing.assert_allclose([mn, sd, mx], [a[:, 0].mean(), a[:, 0].std(), a[:, 0].max()],
                                   rtol=1e-12)


def test_a_reduction_whose_result_only_element_wise_steps_use_counts_as_alone(alone_fresh):
    # isfinite(sum(X)): the step on the sum's result is a launch of its own after the
    # reduction's, so deferring the sum gains nothing; it runs eagerly after the limit
    a = np.random.default_rng(3).random((20, 6))
    a[2, 3] = np.inf
    x = _private(a)
    kinds = []
    for _ in range(4):
        s = xp.sum(x)
        kinds.append(pending(s) is not None)
        assert not bool(xp.isfinite(s))
    assert kinds == [True, True, False, False]
    assert bool(xp.isfinite(xp.sum(x[:2])))
    from forge_array.fusion import expr

    expr.ALONE.clear()                          # a sibling reduction keeps one pass: never alone
    y = _private(a[:, :5])
    kinds = []
    for _ in range(4):
        s, m = xp.sum(y), xp.max(y)
        kinds.append(pending(s) is not None)
        (f, mx), n = _launches(lambda: (bool(xp.isfinite(s)), float(m)))
        assert n <= 2 and not f and mx == np.inf
    assert kinds == [True] * 4


def test_no_limit_keeps_every_step_deferred(alone_fresh):
    auto.ALONE_LIMIT[0] = 0
    x = _private(np.arange(20.0))
    for _ in range(5):
        t = x + 1.0
        assert pending(t) is not None
        _np(xp.flip(t))


# ------------------------------------------------------------------ rules: shared memory


def test_write_by_another_library_to_a_shared_leaf():
    a = np.arange(6.0)
    x = xp.asarray(a)                    # zero-copy: NumPy can write it
    t = x * 2
    a[0] = 100.0
    assert float(t[0]) == 0.0            # as eager code: computed before the write
    assert type(t) is xp.Array           # a step reading shared memory is never deferred


def test_export_of_a_leaf_settles_and_shares_it():
    x = _private(np.arange(6.0))
    t = x * 2
    assert pending(t) is not None
    view = np.asarray(x) if not x.device.is_cuda else None
    if view is None:                      # on the GPU: the CUDA array interface
        import cupy
        view = cupy.asarray(x)
    assert pending(t) is None            # the export computed what reads x first
    view[0] = 100.0
    assert float(t[0]) == 0.0
    u = x * 3                            # x is shared now: never deferred again
    assert type(u) is xp.Array and float(u[0]) == 300.0


def test_dlpack_export_of_a_leaf():
    x = _private(np.arange(4.0))
    t = x + 1
    cap = x.__dlpack__()
    assert pending(t) is None
    del cap
    assert type(x + 1) is xp.Array


def test_export_of_an_expression():
    x = _private(np.arange(4.0))
    t = x + 1
    if t.device.is_cuda:
        import cupy
        ext = cupy.asarray(t)
    else:
        ext = np.asarray(t)
    assert _np(ext).tolist() == [1.0, 2.0, 3.0, 4.0]
    ext[0] = 50.0
    u = t * 2                            # t's memory is shared now
    assert type(u) is xp.Array and float(u[0]) == 100.0


# ------------------------------------------------------------------ rules: writes through forge_array


def test_in_place_operator_on_a_leaf():
    x = _private(np.arange(5.0))
    t = x * 2
    x += 1
    assert _np(t).tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert _np(x).tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_in_place_operator_on_a_deferred_array():
    x = _private(np.arange(4.0))
    t = x * 2
    u = t + 1
    t *= 10
    assert _np(t).tolist() == [0.0, 20.0, 40.0, 60.0]
    assert _np(u).tolist() == [1.0, 3.0, 5.0, 7.0]


def test_in_place_operator_on_a_pending_array_becomes_its_expression():
    a = np.arange(1.0, 7.0)
    x = _private(a)
    t = x * 2
    alias = t
    c = xp.sum(t)                     # uses t's value before the in-place steps
    t **= 2
    t -= 1
    assert pending(t) is not None and alias is t      # nothing computed, nothing written
    r, launches = _launches(lambda: (float(xp.sum(t)), float(c)))
    assert r == (float(np.sum((2 * a) ** 2 - 1)), float(np.sum(2 * a)))
    assert launches == 2            # both sums in one pass over x, t written by one map
    assert _np(alias).tolist() == ((2 * a) ** 2 - 1).tolist()
    # computed arrays are written in place as before, views included
    v = t[1:]
    t += 1
    assert _np(v).tolist() == ((2 * a) ** 2)[1:].tolist()
    with pytest.raises(TypeError):
        u = x * 2
        u /= xp.asarray(2, device=DEV)  # float64 / int64 -> float64: fine
        k = _private(np.arange(3))
        k2 = k + 1
        k2 /= 2                          # int64 would become float64
    with pytest.raises(ValueError):
        w = x * 2
        w += _private(np.ones((2, 6)))


def test_setitem_on_a_view_of_a_leaf():
    x = _private(np.arange(6.0))
    t = xp.sum(x * x)
    v = x[2:]
    v[0] = 100.0
    assert float(t) == float(np.sum(np.arange(6.0) ** 2))
    assert float(x[2]) == 100.0


def test_accumulate_into_a_leaf():
    """``accumulate(..., out=o)`` writes ``o`` through forge_array: an expression built on ``o``
    before keeps the values ``o`` had then (a first call plans, a second replays)."""
    for _ in range(2):
        x = _private(np.arange(6.0))
        o = _private(np.ones(6))
        t = xp.sum(o * 2)
        u = o + 1
        xp.accumulate(xp.ops.add, x, out=o)
        assert float(t) == 12.0
        np.testing.assert_array_equal(_np(u), np.full(6, 2.0))
        np.testing.assert_array_equal(_np(o), np.cumsum(np.arange(6.0)))


def test_two_threads_sharing_leaves():
    x = _private(np.arange(8.0))
    built, written = threading.Event(), threading.Event()
    out = {}

    def reader():
        t = x * 2
        built.set()
        written.wait(30)
        out["t"] = _np(t)

    def writer():
        built.wait(30)
        x[0] = 100.0
        written.set()

    threads = [threading.Thread(target=reader), threading.Thread(target=writer)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    np.testing.assert_array_equal(out["t"], np.arange(8.0) * 2)


# ------------------------------------------------------------------ errors and bounds


def test_errors_are_raised_where_eager_code_raises_them():
    x = _private(np.arange(4.0))
    t = x * 2
    with pytest.raises(ValueError):
        x + _private(np.arange(3.0))
    with pytest.raises(TypeError):
        xp.sum(t, axis=1.5)
    with pytest.raises(IndexError):
        xp.sum(t, axis=3)
    assert _np(t).tolist() == [0.0, 2.0, 4.0, 6.0]     # still usable after the errors


def _launches_fail(monkeypatch):
    """Every settlement's launch raises from now on (a replayed one too)."""
    from forge_array.fusion import evaluate, expr  # noqa: F401  (evaluate: loaded, it sets its entries first)

    def broken(*args, **kwargs):
        raise RuntimeError("launch failed")

    monkeypatch.setattr(expr, "SETTLE", [broken])
    monkeypatch.setattr(expr, "REPLAYED", [lambda nodes: False])


def test_a_failing_launch_falls_back_to_eager_evaluation(monkeypatch):
    x = _private(np.arange(6.0))
    t = xp.sum(x * 3 + 1)
    assert isinstance(t, Deferred) and pending(t) is not None
    _launches_fail(monkeypatch)
    assert float(t) == float(np.sum(np.arange(6.0) * 3 + 1))


def test_eager_fallback_computes_a_shared_step_once(monkeypatch):
    """scikit-learn's ``_nanmin``: ``mask`` feeds two reductions; computed eagerly (a failed
    launch, or a kernel still being built), it is computed once, as plain code does."""
    a = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, 0.5]])
    x = _private(a)
    calls = []
    isnan = xp.isnan

    def counted(v):
        calls.append(1)
        return isnan(v)

    _launches_fail(monkeypatch)
    mask = xp.isnan(x)
    low = xp.min(xp.where(mask, xp.asarray(np.inf, device=DEV), x), axis=0)
    mask = xp.all(mask, axis=0)      # the isnan step lives on only inside the two reductions
    monkeypatch.setattr(xp, "isnan", counted)
    assert bool(xp.any(mask))
    assert _np(low).tolist() == [1.0, np.inf, 0.5]
    assert _np(mask).tolist() == [False, True, False]
    assert len(calls) == 1


def test_deep_expressions_are_cut_at_the_bound():
    a = np.random.default_rng(3).random(50)
    x = _private(a)
    want = a.copy()
    t = x
    for k in range(3 * auto.MAX_OPS):
        t = t * 1.01 + 0.5 if k % 2 else t - 0.25
        want = want * 1.01 + 0.5 if k % 2 else want - 0.25
        if isinstance(t, Deferred) and pending(t) is not None:
            assert t._node.ops <= auto.MAX_OPS
    np.testing.assert_allclose(_np(t), want, rtol=1e-12)


def test_many_pending_expressions_are_bounded():
    x = _private(np.arange(10.0))
    kept = [x * k for k in range(3 * auto.MAX_PENDING)]
    assert auto.pending_count() <= auto.MAX_PENDING
    assert [float(k[1]) for k in kept] == [float(k) for k in range(3 * auto.MAX_PENDING)]


def test_too_many_leaves_are_not_one_expression():
    xs = [_private(np.full(7, float(k))) for k in range(2 * auto.MAX_LEAVES)]
    t = xs[0]
    for v in xs[1:]:
        t = t + v
    assert float(t[3]) == float(sum(range(2 * auto.MAX_LEAVES)))


def test_dead_expressions_are_never_computed():
    x = _private(np.arange(10.0))
    n0 = STATS["launches"]
    for _ in range(5):
        x * 2 + 1
    auto.settle_all()
    assert STATS["launches"] == n0


def test_switched_off_by_the_environment():
    code = ("import forge_array as xp\n"
            "from forge_array.fusion import auto, build\n"
            "print(auto.enabled(), build.ON[0])\n")
    env = dict(os.environ, FORGE_ARRAY_FUSION="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert out == ["False", "0"]


# ------------------------------------------------------------------ scans of expressions


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("n", [1, 33, 700])
def test_scan_of_an_expression_is_one_launch(dtype, n):
    rng = np.random.default_rng(n)
    a = (rng.random(n) * 10).astype(dtype)
    b = (rng.random(n) * 10).astype(dtype)
    x, y = _private(a), _private(b)
    fused0 = STATS["fused"]
    r, k = _launches(lambda: _np(xp.cumulative_sum(x * y + 1)))
    assert k == 1 and STATS["fused"] - fused0 == 1
    with eager():
        want = _np(xp.cumulative_sum(x * y + 1))
    assert r.dtype == want.dtype
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(r, want, rtol=1e-5 if dtype == np.float32 else 1e-12)
    else:
        np.testing.assert_array_equal(r, want)


def test_scans_of_expressions_with_flags_reductions_and_where():
    a = np.random.default_rng(4).random(300)
    x = _private(a)
    got = xp.cumulative_prod(xp.where(x > 0.5, x, 1.0) + 0.5, include_initial=True)
    want = np.concatenate([[1.0], np.cumprod(np.where(a > 0.5, a, 1.0) + 0.5)])
    np.testing.assert_allclose(_np(got), want, rtol=1e-12)
    c = xp.cumulative_sum(x - xp.mean(x))            # the mean first, then one fused scan
    np.testing.assert_allclose(_np(c), np.cumsum(a - a.mean()), atol=1e-12)
    s = xp.cumulative_sum(xp.astype(x > 0.5, xp.int32), dtype=xp.int64)
    np.testing.assert_array_equal(_np(s), np.cumsum(a > 0.5))


def test_scans_that_do_not_fuse_still_equal_eager():
    a = np.random.default_rng(5).random((4, 30))
    x = _private(a)
    m = _private(a[0])
    got = xp.cumulative_sum(x * 2, axis=1)                 # 2-D: the expression first
    np.testing.assert_allclose(_np(got), np.cumsum(a * 2, axis=1))
    got = xp.cumulative_sum(m[::2] * m[1::2] + m[0])      # a 0-d leaf broadcast: no fusion
    v = a[0]
    np.testing.assert_allclose(_np(got), np.cumsum(v[::2] * v[1::2] + v[0]))


def test_fused_function_with_a_scan():
    a = np.random.default_rng(6).random(100)
    x = _private(a)

    @xp.fuse
    def f(u):
        return xp.cumulative_sum(xp.where(u > 0.5, u, 0.0))

    for _ in range(2):
        np.testing.assert_allclose(_np(f(x)), np.cumsum(np.where(a > 0.5, a, 0.0)))


@pytest.mark.parametrize("dtypes", [(np.float32, np.float32), (np.float64, np.float64),
                                    (np.float32, np.int32), (np.int32, np.int32),
                                    (np.float32, np.float64)])
@pytest.mark.parametrize("offsets", [(0, 0), (1, 1), (3, 3), (1, 2), (0, 3)])
def test_scan_of_leaves_in_and_out_of_phase(dtypes, offsets):
    """Leaves of one item size and one 16-byte phase are read with 128-bit loads (with a
    lead when the phase is not 0), others element by element: both equal eager scans."""
    rng = np.random.default_rng(sum(offsets))
    n = 707
    a = (rng.random(n + 3) * 4).astype(dtypes[0])
    b = (rng.random(n + 3) * 4).astype(dtypes[1])
    x, y = _private(a), _private(b)
    u, v = x[offsets[0]:offsets[0] + n], y[offsets[1]:offsets[1] + n]

    def expr():
        w = v if v.dtype == u.dtype else xp.astype(v, u.dtype)
        return xp.cumulative_sum(u * w - 1)

    with eager():
        want = _np(expr())
    # the first call plans the launch, the second replays it; a float scan's look-back may
    # combine tiles in another order from run to run, so floats compare within rounding
    for _ in range(2):
        r, k = _launches(lambda: _np(expr()))
        assert k == 1
        assert r.dtype == want.dtype
        if want.dtype.kind == "f":
            np.testing.assert_allclose(r, want, rtol=1e-4 if want.dtype == np.float32 else 1e-12,
                                       atol=1e-3)
        else:
            np.testing.assert_array_equal(r, want)


def test_fused_function_with_a_scan_replays_its_plan():
    a = np.random.default_rng(8).random(300)
    x = _private(a)

    @xp.fuse
    def f(u):
        c = xp.cumulative_sum(u * 2.0 + 1.0)
        return c, xp.sum(c)

    want = np.cumsum(a * 2.0 + 1.0)
    for _ in range(3):
        (c, s), k = _launches(lambda: f(x))
        np.testing.assert_allclose(_np(c), want, rtol=1e-12)
        np.testing.assert_allclose(float(s), want.sum(), rtol=1e-12)
        assert k == 2                                  # the scan, then the sum of its result
    text = f.explain(x)
    assert "replayed" in text and "cumulative_sum of float64[300]" in text


def test_integer_negation_runs_eagerly():
    """Integer ``negative`` is not fused (see ``fusible.INT_EAGER``); its reductions equal
    eager ones."""
    a = np.random.default_rng(7).integers(-50, 50, 33).astype(np.int32)
    y = _private(a)
    assert pending(-y) is None and pending(-_private(a.astype(np.float32))) is not None
    assert int(xp.min(-y)) == -int(a.max()) and int(xp.max(-y)) == -int(a.min())


@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.int64, np.uint32])
def test_integer_minimum_of_a_negating_expression(dtype):
    rng = np.random.default_rng(11)
    a = rng.integers(-50, 51, 3000).astype(dtype)
    x = _private(a)
    with np.errstate(over="ignore"):
        neg = (a * dtype(-1 if np.dtype(dtype).kind == "i" else 1)).astype(dtype)
        sub = (dtype(0) - a).astype(dtype)
    scalar = -1 if np.dtype(dtype).kind == "i" else 1
    assert int(xp.min(x * scalar)) == int(neg.min())
    assert int(xp.min(0 - x)) == int(sub.min())
    assert int(xp.argmin(0 - x)) == int(np.argmin(sub))
    assert int(xp.max(x * scalar)) == int(neg.max())


def test_a_line_whose_scalar_keeps_changing_runs_eagerly(monkeypatch):
    from forge_array.fusion import codegen

    caches.clear_all()  # programs compiled by earlier tests (as x * 2.5) would fuse here
    monkeypatch.setattr(codegen, "MAX_CONSTANT_SETS", 2)
    monkeypatch.setattr(codegen, "_STRUCTURES", {})
    a = np.random.default_rng(12).random(200)
    x = _private(a)
    n0 = len(codegen._FUNCTIONS)
    fused0 = STATS["fused"]
    for t in [0.5, 1.5, 2.5, 3.5, 0.5, 4.5]:
        np.testing.assert_allclose(float(xp.max(xp.abs(x * t) + x)), np.max(np.abs(a * t) + a),
                                   rtol=1e-12)
        np.testing.assert_allclose(float(xp.cumulative_sum(x * t - x)[-1]),
                                   np.cumsum(a * t - a)[-1], rtol=1e-12)
    # two sets of constants compiled per structure (the max, the scan); 0.5 fused again
    assert len(codegen._FUNCTIONS) - n0 <= 4
    assert STATS["fused"] - fused0 == 2 * 2 + 2


def test_small_eager_steps_never_ask_the_builders(monkeypatch):
    """Below MIN_SIZE, with no trace, binary, unary and where steps on materialised arrays and
    Python scalars go straight to the eager path (the builders are not called); at MIN_SIZE
    they are deferred, and a pending operand of any size is."""
    from forge_array.fusion import build

    a = np.random.default_rng(7).random(40)
    x, y = _private(a), _private(a[::-1].copy())
    auto.MIN_SIZE[0] = 41                        # (the fixture restores it)
    calls = []
    for name in ("binary", "unary", "where"):
        real = getattr(build, name)
        monkeypatch.setattr(build, name, lambda *args, real=real, name=name: (calls.append(name), real(*args))[1])
    r = [x + y, x * 2.0, xp.exp(x), xp.where(x > 0.5, x, 0.0), 1 - y]
    assert calls == [] and not any(isinstance(v, Deferred) for v in r)
    np.testing.assert_allclose(_np(r[3]), np.where(a > 0.5, a, 0.0))
    auto.MIN_SIZE[0] = 40
    d = x + y
    assert calls == ["binary"] and isinstance(d, Deferred)
    auto.MIN_SIZE[0] = 41
    assert isinstance(xp.exp(d), Deferred) and calls[-1] == "unary"   # a pending operand
    np.testing.assert_allclose(_np(xp.exp(d)), np.exp(a + a[::-1]))
    auto.MIN_SIZE[0] = 40
    c = x > 0.5
    auto.MIN_SIZE[0] = 41
    w = xp.where(c, x, 0.0)                       # a pending condition, small operands
    assert isinstance(w, Deferred) and calls[-1] == "where"
    np.testing.assert_allclose(_np(w), np.where(a > 0.5, a, 0.0))


def test_a_settlement_waiting_for_a_build_falls_back_at_once(monkeypatch):
    """A settlement that fell back because a kernel it needs is being built takes the eager
    fallback at once while no background build has finished (no walk and plan of its
    expressions again), and tries our kernels again after one has."""
    from forge_array.fusion import evaluate
    from forge_array.runtime import background

    tries = []

    def attempt(fn, *args):
        tries.append(fn)
        return background.PENDING          # a kernel of it is being built

    monkeypatch.setattr(evaluate, "_outermost_background_call", lambda: True)
    monkeypatch.setattr(background, "attempt", attempt)
    a = np.arange(6.0)
    x = _private(a)
    for _ in range(3):
        assert float(xp.sum(x * 3 + 1)) == float(np.sum(a * 3 + 1))
    assert len(tries) == 1
    monkeypatch.setattr(background, "_FINISHED", background.finished() + 1)   # a build finished
    assert float(xp.sum(x * 3 + 1)) == float(np.sum(a * 3 + 1))
    assert len(tries) == 2
    y = _private(np.arange(7.0))                                              # another layout
    assert float(xp.sum(y * 3 + 1)) == float(np.sum(np.arange(7.0) * 3 + 1))
    assert len(tries) == 3
