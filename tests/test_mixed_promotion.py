"""Mixed-kind promotion (integer with floating point, boolean with numbers, uint64 with
signed integers) and true division of integers, against NumPy 2; strict promotion
(``FORGE_ARRAY_STRICT=1`` / ``xp.set_strict``) keeps the standard's table alone."""

import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

import forge_array as xp
from forge_array import _dtypes as _dt

pytestmark = pytest.mark.usefixtures("numpy_routes")

ALL = list(_dt.all_dtypes)
MIXED = [(a, b) for a, b in itertools.product(ALL, repeat=2)
         if (a, b) not in _dt.promotion_table]


def _values(dtype, n=6):
    if dtype == xp.bool:
        return np.array([True, False, True, True, False, True][:n])
    if dtype.kind in "iu":
        return np.arange(1, n + 1).astype(dtype)
    if dtype.kind == "f":
        return np.linspace(-2.5, 3.5, n).astype(dtype)
    return (np.linspace(-2.5, 3.5, n) + 1j * np.linspace(1, 2, n)).astype(dtype)


def _arr(dtype, n=6):
    return xp.asarray(_values(dtype, n), device="cpu")


@pytest.fixture
def lenient():
    with xp.set_strict(False):
        yield


def test_mixed_pairs_exist():
    assert len(MIXED) > 50 and (xp.int64, xp.float32) in MIXED and (xp.bool, xp.int8) in MIXED


@pytest.mark.parametrize("a,b", MIXED, ids=str)
def test_result_type_matches_numpy(lenient, a, b):
    assert xp.result_type(a, b) == np.result_type(a, b)
    assert xp.result_type(_arr(a), b) == np.result_type(a, b)


@pytest.mark.parametrize("a,b", MIXED, ids=str)
@pytest.mark.parametrize("op", ["add", "multiply", "subtract", "equal", "less", "maximum"])
def test_elementwise_mixed_kinds_match_numpy(lenient, op, a, b):
    npfn = {"add": np.add, "multiply": np.multiply, "subtract": np.subtract,
            "equal": np.equal, "less": np.less, "maximum": np.maximum}[op]
    if op == "subtract" and xp.bool in (a, b) and a == b:
        pytest.skip("boolean subtraction is not defined")
    if op in ("less", "maximum") and (a.kind == "c" or b.kind == "c"):
        pytest.skip("complex numbers are not ordered")
    if op == "subtract" and a == xp.bool and b == xp.bool:
        return
    x1, x2 = _values(a), _values(b)
    got = getattr(xp, op)(xp.asarray(x1, device="cpu"), xp.asarray(x2, device="cpu"))
    want = npfn(x1, x2)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("a,b", [(xp.int64, xp.float32), (xp.int8, xp.float32),
                                 (xp.uint8, xp.float64), (xp.bool, xp.int16),
                                 (xp.bool, xp.float32), (xp.int32, xp.complex64),
                                 (xp.uint64, xp.int64), (xp.float32, xp.int16)])
def test_operators_both_orders(lenient, a, b):
    x1, x2 = _values(a), _values(b)
    X1, X2 = xp.asarray(x1, device="cpu"), xp.asarray(x2, device="cpu")
    for f in (lambda p, q: p + q, lambda p, q: p * q, lambda p, q: p == q,
              lambda p, q: p / q, lambda p, q: p ** q if p.dtype != bool else p * q):
        for (p, q), (u, v) in (((X1, X2), (x1, x2)), ((X2, X1), (x2, x1))):
            with np.errstate(all="ignore"):
                want = f(u, v)
                got = f(p, q)
            assert got.dtype == want.dtype
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


@pytest.mark.parametrize("dtype", [xp.int8, xp.int16, xp.int32, xp.int64, xp.uint8,
                                   xp.uint16, xp.uint32, xp.uint64, xp.bool])
def test_true_division_of_integers_gives_the_default_float(lenient, dtype):
    x1, x2 = _values(dtype), _values(dtype)[::-1].copy()
    if dtype == xp.bool:
        x2 = np.ones(6, dtype=bool)
    want = np.divide(x1, x2)
    got = xp.divide(xp.asarray(x1, device="cpu"), xp.asarray(x2, device="cpu"))
    default = xp.__array_namespace_info__().default_dtypes(device="cpu")["real floating"]
    assert got.dtype == want.dtype == default
    np.testing.assert_array_equal(np.asarray(got), want)
    # operators and Python ints too
    X = xp.asarray(x1, device="cpu")
    if dtype != xp.bool:
        assert (X / 2).dtype == default and (3 / X).dtype == default
        np.testing.assert_array_equal(np.asarray(X / 2), x1 / 2)
        np.testing.assert_array_equal(np.asarray(3 / X), 3 / x1)


def test_true_division_in_place_keeps_the_dtype_rule(lenient):
    x = _arr(xp.int64)
    with pytest.raises(TypeError, match="dtype"):
        x /= 2
    f = _arr(xp.float64)
    f /= _arr(xp.int32)
    assert f.dtype == xp.float64


def test_python_scalar_rules_unchanged(lenient):
    with pytest.raises(TypeError):
        _arr(xp.int32) + 1.5
    with pytest.raises(TypeError):
        xp.logical_and(_arr(xp.bool), 1)
    assert (_arr(xp.float32) + 1).dtype == xp.float32
    assert (_arr(xp.int8) + 1).dtype == xp.int8


def test_functions_of_one_category_take_promoted_operands(lenient):
    i, f = _values(xp.int32), _values(xp.float32)
    got = xp.atan2(xp.asarray(i, device="cpu"), xp.asarray(f, device="cpu"))
    assert got.dtype == np.arctan2(i, f).dtype
    np.testing.assert_allclose(np.asarray(got), np.arctan2(i, f))
    with pytest.raises(TypeError, match="floating"):
        xp.atan2(_arr(xp.int32), _arr(xp.int32))
    with pytest.raises(TypeError, match="boolean"):
        xp.logical_and(_arr(xp.bool), _arr(xp.int8))
    with pytest.raises(TypeError, match="promote to float64"):
        xp.bitwise_and(_arr(xp.uint64), _arr(xp.int64))


def test_where_matmul_vecdot_tensordot_concat(lenient):
    c = np.array([True, False, True, False, True, False])
    i, f = _values(xp.int64), _values(xp.float32)
    got = xp.where(xp.asarray(c, device="cpu"), xp.asarray(i, device="cpu"),
                   xp.asarray(f, device="cpu"))
    want = np.where(c, i, f)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), want)

    A = np.arange(12).reshape(3, 4).astype(np.int32)
    B = np.linspace(0, 1, 8).reshape(4, 2).astype(np.float32)
    b = np.array([True, False, True, True])
    for p, q in ((A, B), (B.T.copy(), A.T.copy()), (A, b), (b, B)):
        got = xp.matmul(xp.asarray(p, device="cpu"), xp.asarray(q, device="cpu"))
        want = np.matmul(p, q)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    got = xp.asarray(A, device="cpu") @ xp.asarray(B, device="cpu")
    assert got.dtype == (A @ B).dtype
    got = xp.vecdot(xp.asarray(A, device="cpu"), xp.asarray(B[:, 0], device="cpu"))
    assert got.dtype == np.float64
    np.testing.assert_allclose(np.asarray(got), A @ B[:, 0], rtol=1e-6)
    got = xp.tensordot(xp.asarray(A, device="cpu"), xp.asarray(B, device="cpu"), axes=1)
    assert got.dtype == np.tensordot(A, B, axes=1).dtype
    np.testing.assert_allclose(np.asarray(got), np.tensordot(A, B, axes=1), rtol=1e-6)
    with pytest.raises(TypeError, match="numeric"):
        xp.matmul(xp.asarray(b, device="cpu"), xp.asarray(b, device="cpu"))
    got = xp.concat([xp.asarray(i, device="cpu"), xp.asarray(f, device="cpu")])
    assert got.dtype == np.concatenate([i, f]).dtype


def test_setitem_takes_values_that_promote_to_the_array_dtype(lenient):
    x = _arr(xp.float64)
    x[:] = _arr(xp.int32)
    np.testing.assert_array_equal(np.asarray(x), _values(xp.int32))
    y = _arr(xp.float32)
    with pytest.raises(TypeError):
        y[:] = _arr(xp.int64)   # int64 and float32 promote to float64


def test_can_cast_stays_the_standard_table(lenient):
    assert not xp.can_cast(xp.int64, xp.float64)
    assert xp.can_cast(xp.int8, xp.int16)


def test_strict_switch_restores_the_standard(lenient):
    assert not xp.is_strict()
    with xp.set_strict(True) as s:
        assert xp.is_strict() and s.previous is False
        with pytest.raises(TypeError, match="strict promotion is on"):
            xp.result_type(xp.int64, xp.float32)
        with pytest.raises(TypeError, match="cannot be type-promoted"):
            _arr(xp.int64) + _arr(xp.float32)
        with pytest.raises(TypeError, match="floating"):
            _arr(xp.int64) / _arr(xp.int64)
        with pytest.raises(TypeError):
            _arr(xp.int64) / 2
        with pytest.raises(TypeError):
            xp.where(xp.asarray([True] * 6, device="cpu"), _arr(xp.bool), _arr(xp.int8))
        with pytest.raises(TypeError):
            xp.matmul(_arr(xp.float64), _arr(xp.int64))
    assert not xp.is_strict()
    # cached kinds of operands follow the switch both ways
    assert (_arr(xp.int64) + _arr(xp.float32)).dtype == xp.float64
    prev = xp.set_strict(True)
    try:
        with pytest.raises(TypeError):
            _arr(xp.int64) + _arr(xp.float32)
    finally:
        xp.set_strict(prev.previous)
    assert (_arr(xp.int64) / _arr(xp.int64)).dtype == xp.float64


def test_strict_from_the_environment():
    code = ("import forge_array as xp; print(xp.is_strict());\n"
            "try:\n    xp.result_type(xp.int8, xp.float32); print('promoted')\n"
            "except TypeError: print('raised')")
    for value, want in (("1", "True\nraised"), ("0", "False\npromoted")):
        env = dict(os.environ, FORGE_ARRAY_STRICT=value, FORGE_ARRAY_DEVICE="cpu")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.stdout.strip() == want, out.stderr


def _fused_inputs(dev):
    i = np.arange(1, 41, dtype=np.int32)
    f = np.linspace(-1, 1, 40).astype(np.float32)
    b = np.arange(40) % 3 == 0
    n = np.arange(2, 42, dtype=np.int64)
    return (i, f, b, n), tuple(xp.asarray(v, device=dev, copy=True) for v in (i, f, b, n))


def _reduced(i, f, b, n):
    return xp.sum((i * f + b) / n + i / n)


def _elementwise(i, f, b, n):
    return xp.where(b, i + f, n / i) * 2


def test_fused_mixed_kinds_give_the_eager_dtype_and_values(lenient, monkeypatch):
    """Fused element-wise steps take their dtypes from the same rule as eager calls: an
    expression of int32, float32, bool and int64 arrays fused (``xp.fuse``, and automatic
    fusion with a minimum size of 0 as FORGE_ARRAY_FUSION_MIN_SIZE=0 sets) equals eager code
    and NumPy."""
    from forge_array.fusion import auto
    from forge_array.fusion.expr import Deferred
    from forge_array.runtime import SIMULATE, config

    monkeypatch.setattr(config, "KERNELS_ENABLED", True)   # our kernels, as in normal use

    dev = "cpu" if SIMULATE else "cuda:0"
    (ii, ff, bb, nn), args = _fused_inputs(dev)
    old = auto.enable(False)
    try:
        eager = (_reduced(*args), _elementwise(*args))
    finally:
        auto.enable(*old)
    fused = (xp.fuse(_reduced)(*args), xp.fuse(_elementwise)(*args))
    size = auto.MIN_SIZE[0]
    old = auto.enable(True, simulated_cpu=True)
    auto.MIN_SIZE[0] = 0
    try:
        assert isinstance(args[0] / args[3], Deferred)      # the steps are deferred
        automatic = (_reduced(*args), _elementwise(*args))
        automatic = tuple(np.asarray(r.to_device("cpu")) for r in automatic)
    finally:
        auto.MIN_SIZE[0] = size
        auto.enable(*old)
    want = (np.sum((ii * ff + bb) / nn + ii / nn), np.where(bb, ii + ff, nn / ii) * 2)
    for e, g, a, w in zip(eager, fused, automatic, want):
        e, g = (np.asarray(v.to_device("cpu")) for v in (e, g))
        assert e.dtype == g.dtype == a.dtype == np.asarray(w).dtype == np.float64
        np.testing.assert_allclose(e, w, rtol=1e-12)
        np.testing.assert_allclose(g, e, rtol=1e-12)
        np.testing.assert_allclose(a, e, rtol=1e-12)
