"""Row programs (:mod:`forge_array.fusion.row_programs`): reductions along the last axis and the
element-wise steps that use them in one launch, against eager evaluation and NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from test_auto_fusion import _launches, _np
from test_auto_fusion import _private as _arr

import forge_array as xp
from forge_array.fusion import auto
from forge_array.runtime import tuning

#: the shortest row a row program takes on this device (shorter rows take the rounds)
MIN_ROW = int(tuning.params("rows")["min_row"])
#: a row length every row program takes here
P = MIN_ROW + 37


@xp.fuse
def softmax(x):
    m = xp.max(x, axis=-1, keepdims=True)
    e = xp.exp(x - m)
    return e / xp.sum(e, axis=-1, keepdims=True)


def _softmax(a):
    e = np.exp(a.astype(np.float64) - a.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 8), (3, 31), (4, 32), (2, 33), (5, 100), (2, 3, 257)])
def test_softmax_is_one_launch(dtype, shape):
    a = np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype) * 3
    x = _arr(a)
    for _ in range(2):  # the first call records the plan, the second replays it
        r, k = _launches(lambda: _np(softmax(x)))
        assert k == (1 if shape[-1] >= MIN_ROW else 3)
        assert r.dtype == dtype
        np.testing.assert_allclose(r, _softmax(a), rtol=1e-5 if dtype == np.float32 else 1e-12,
                                   atol=1e-7 if dtype == np.float32 else 1e-15)
    assert ("row program max, then sum" in softmax.explain(x)) == (shape[-1] >= MIN_ROW)


@pytest.mark.parametrize("view", ["transposed", "negative", "offset", "rows_strided"])
def test_softmax_of_views(view):
    a = np.random.default_rng(1).standard_normal((P + 3, P + 10))
    x = _arr(a)
    v, w = {"transposed": (x.T, a.T), "negative": (x[::-1, ::-1], a[::-1, ::-1]),
            "offset": (x[3:, 5:], a[3:, 5:]), "rows_strided": (x[::3], a[::3])}[view]
    r, k = _launches(lambda: _np(softmax(v)))
    assert k == 1
    np.testing.assert_allclose(r, _softmax(w), rtol=1e-12, atol=1e-15)


def test_leading_dimensions_that_do_not_collapse_take_the_rounds():
    a = np.random.default_rng(2).standard_normal((3, 8, P))
    x = _arr(a)[:, :4, :]                  # rows of 3 x 4 at two strides: no single stride
    r, k = _launches(lambda: _np(softmax(x)))
    assert k == 3                          # max, sum of exp, then the map
    np.testing.assert_allclose(r, _softmax(a[:, :4, :]), rtol=1e-12)
    y = _arr(a)[:, ::2, :]                 # one stride between rows: one launch
    r, k = _launches(lambda: _np(softmax(y)))
    assert k == 1
    np.testing.assert_allclose(r, _softmax(a[:, ::2, :]), rtol=1e-12)


def test_short_rows_take_the_rounds():
    a = np.random.default_rng(3).standard_normal((6, 5))
    x = _arr(a)
    r, k = _launches(lambda: _np(softmax(x)))
    assert k == 3
    np.testing.assert_allclose(r, _softmax(a), rtol=1e-12)


def test_logsumexp_argmax_and_per_row_outputs():
    a = np.random.default_rng(4).standard_normal((7, P)).astype(np.float32)
    x = _arr(a)

    @xp.fuse
    def f(u):
        m = xp.max(u, axis=1)
        mk = xp.max(u, axis=1, keepdims=True)
        lse = xp.log(xp.sum(xp.exp(u - mk), axis=1)) + m          # one value per row
        lse_k = xp.log(xp.sum(xp.exp(u - mk), axis=1, keepdims=True)) + mk
        return lse, lse_k, xp.argmax(u, axis=1), xp.argmin(u - mk, axis=1), m

    (lse, lse_k, am, an, m), k = _launches(lambda: f(x))
    assert k == 1
    a64 = a.astype(np.float64)
    want = np.log(np.exp(a64 - a64.max(1, keepdims=True)).sum(1)) + a64.max(1)
    np.testing.assert_allclose(_np(lse), want, rtol=1e-5)
    np.testing.assert_allclose(_np(lse_k), want[:, None], rtol=1e-5)
    np.testing.assert_array_equal(_np(am), a.argmax(1))
    np.testing.assert_array_equal(_np(an), a.argmin(1))
    np.testing.assert_array_equal(_np(m), a.max(1))


def test_layer_norm_with_a_column_vector_and_a_scalar_array():
    rng = np.random.default_rng(5)
    a, g, b = rng.standard_normal((9, P)), rng.standard_normal(P), rng.standard_normal(())
    x, gx, bx = _arr(a), _arr(g), _arr(b)

    @xp.fuse
    def norm(u, gamma, beta):
        mu = xp.mean(u, axis=-1, keepdims=True)
        sd = xp.std(u, axis=-1, keepdims=True, correction=1)
        return (u - mu) / (sd + 1e-5) * gamma + beta

    r, k = _launches(lambda: _np(norm(x, gx, bx)))
    assert k == 1
    want = (a - a.mean(-1, keepdims=True)) / (a.std(-1, keepdims=True, ddof=1) + 1e-5) * g + b
    np.testing.assert_allclose(r, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_integer_and_boolean_rows_are_exact(dtype):
    a = np.random.default_rng(6).integers(0, 50, (5, P)).astype(dtype)
    x = _arr(a)

    @xp.fuse
    def f(u):
        s = xp.sum(u, axis=1, keepdims=True)
        big = u > xp.max(u, axis=1, keepdims=True) - 10
        return u * 2 - s, big, xp.any(u == 0, axis=1), xp.all(big | (u < 49), axis=1)

    (d, big, anyz, allb), k = _launches(lambda: f(x))
    assert k == 1
    s = a.sum(1, keepdims=True, dtype=np.result_type(a, np.int64) if dtype != np.uint8 else np.uint64)
    want_big = a > a.max(1, keepdims=True) - dtype(10)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(_np(d), a * dtype(2) - s)
    np.testing.assert_array_equal(_np(big), want_big)
    np.testing.assert_array_equal(_np(anyz), (a == 0).any(1))
    np.testing.assert_array_equal(_np(allb), (want_big | (a < 49)).all(1))


def test_plain_code_runs_the_row_program_and_equals_eager(monkeypatch):
    from forge_array.fusion import codegen

    monkeypatch.setattr(codegen, "MAX_CONSTANT_SETS", 1 << 30)  # whatever ran before
    old = auto.enable(True, simulated_cpu=True)
    size = auto.MIN_SIZE[0]
    auto.MIN_SIZE[0] = 1
    try:
        a = np.random.default_rng(7).standard_normal((12, P))
        x = _arr(a)
        for _ in range(2):
            m = xp.max(x, axis=1, keepdims=True)
            e = xp.exp(x - m)
            r, k = _launches(lambda: _np(e / xp.sum(e, axis=1, keepdims=True)))
            assert k == 1
            np.testing.assert_allclose(r, _softmax(a), rtol=1e-12)
            np.testing.assert_array_equal(_np(m), a.max(1, keepdims=True))  # kept, computed once
    finally:
        auto.MIN_SIZE[0] = size
        auto.enable(*old)
