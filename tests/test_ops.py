"""forge_array.ops: the named operators, in Python and compiled by numba (CPU)."""

import math

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forge_array import ops

FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64)
FINITE = st.floats(-1e6, 1e6)


def test_operator_attributes():
    assert ops.add.name == "add" and ops.add.commutative and ops.add.arity == 1
    assert ops.argmax.arity == 2 and ops.welford.arity == 3 and ops.affine.arity == 2
    assert not ops.affine.commutative
    assert ops.add(2, 3) == 5 and callable(ops.add.fn)
    assert "add" in repr(ops.add)
    assert set(ops.BY_NAME) >= {"add", "multiply", "maximum", "minimum", "logaddexp",
                                "bitwise_and", "bitwise_or", "bitwise_xor", "logical_and",
                                "logical_or", "argmax", "argmin", "welford", "minmax", "affine"}


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32", "uint64", "float32",
                                   "float64"])
def test_identities(dtype):
    dt = np.dtype(dtype)
    x = np.array([0, 1, 5], dtype=dt) if dt.kind != "b" else np.array([False, True])
    for op, uf in [(ops.maximum, np.maximum), (ops.minimum, np.minimum)]:
        e = op.identity(dt)
        assert e.dtype == dt
        assert all(uf(e, v) == v for v in x)
    if dt.kind != "b":
        assert ops.add.identity(dt) == 0 and ops.multiply.identity(dt) == 1
    if dt.kind in "biu":
        for op in (ops.bitwise_and, ops.bitwise_or, ops.bitwise_xor):
            e = op.identity(dt)
            assert all(op(e, v) == v for v in x)
    else:
        assert ops.bitwise_and.identity(dt) is None
    assert ops.logical_and.identity(dt) == np.True_
    assert ops.logical_or.identity(dt) == np.False_


def test_tuple_identities():
    v, i = ops.argmax.identity(("float32", "int64"))
    assert v == -np.inf and i == np.iinfo(np.int64).max
    assert ops.argmin.identity("int8") == (127, np.iinfo(np.int64).max)
    assert ops.minmax.identity("float64") == (np.inf, -np.inf)
    assert ops.affine.identity("float32") == (1.0, 0.0)
    assert ops.welford.identity(("float64",) * 3) == (0.0, 0.0, 0.0)
    assert ops.logaddexp.identity("int32") is None


def test_as_operator():
    op = ops.as_operator(lambda a, b: a - b)
    assert not op.commutative and op.identity("float64") is None and op.arity is None
    assert ops.as_operator(ops.add) is ops.add
    with pytest.raises(TypeError, match="callable"):
        ops.as_operator(None)
    assert "identity 0" in ops.describe(ops.add)


@settings(max_examples=50, deadline=None)
@given(FLOATS, FLOATS)
def test_max_min_propagate_nan(a, b):
    for op, uf in [(ops.maximum, np.maximum), (ops.minimum, np.minimum)]:
        r, ref = op(a, b), uf(a, b)
        assert (math.isnan(r) and math.isnan(ref)) or r == ref


@settings(max_examples=50, deadline=None)
@given(FLOATS, FLOATS)
def test_logaddexp_matches_numpy(a, b):
    with np.errstate(invalid="ignore"):
        ref = np.logaddexp(a, b)
    r = ops.logaddexp(a, b)
    assert (math.isnan(r) and math.isnan(ref)) or math.isclose(r, ref, rel_tol=1e-12,
                                                               abs_tol=1e-300)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.one_of(FINITE, st.just(float("nan"))), min_size=1, max_size=20))
def test_argmax_argmin_fold_like_numpy(xs):
    x = np.array(xs)
    for op, ref in [(ops.argmax, np.argmax), (ops.argmin, np.argmin)]:
        acc = op.identity(("float64", "int64"))
        for i, v in enumerate(xs):
            acc = op(acc, (v, i))
        assert acc[1] == ref(x)
        # any tree order gives the same pair (associative, commutative)
        pairs = [(v, i) for i, v in enumerate(xs)]
        while len(pairs) > 1:
            pairs = [op(pairs[k], pairs[k + 1]) if k + 1 < len(pairs) else pairs[k]
                     for k in range(0, len(pairs), 2)][::-1]
        assert pairs[0][1] == ref(x)


@settings(max_examples=30, deadline=None)
@given(st.lists(FINITE, min_size=1, max_size=30), st.integers(0, 29))
def test_welford_chan_merge(xs, cut):
    x = np.array(xs)
    cut = min(cut, len(xs))

    def fold(v):
        acc = (0.0, 0.0, 0.0)
        for e in v:
            acc = ops.welford(acc, (1.0, e, 0.0))
        return acc

    n, m, m2 = ops.welford(fold(xs[:cut]), fold(xs[cut:]))
    assert n == len(xs)
    assert math.isclose(m, x.mean(), rel_tol=1e-9, abs_tol=1e-6)
    assert math.isclose(m2 / n, x.var(), rel_tol=1e-7, abs_tol=1e-4)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.floats(-2, 2), st.floats(-5, 5)), min_size=3, max_size=3),
       st.floats(-3, 3))
def test_affine_is_composition_and_associative(maps, x):
    p, q, r = maps
    left = ops.affine(ops.affine(p, q), r)
    right = ops.affine(p, ops.affine(q, r))
    assert all(math.isclose(u, v, rel_tol=1e-9, abs_tol=1e-9) for u, v in zip(left, right))
    a, b = ops.affine(p, q)
    assert math.isclose(a * x + b, q[0] * (p[0] * x + p[1]) + q[1], rel_tol=1e-9, abs_tol=1e-9)


def test_minmax_and_bitwise_logical():
    assert ops.minmax((1.0, 3.0), (float("nan"), 0.0))[0] != ops.minmax((1.0, 3.0),
                                                                         (float("nan"), 0.0))[0]
    assert ops.bitwise_xor(6, 3) == 5 and ops.bitwise_and(6, 3) == 2 and ops.bitwise_or(4, 1) == 5
    assert ops.logical_and(2, 3) and not ops.logical_or(0, 0.0)


@pytest.mark.parametrize("name", sorted(ops.BY_NAME))
def test_numba_compiles_type_stable(name):
    op = ops.BY_NAME[name]
    f32 = np.float32
    args = {
        1: (f32(1.5), f32(2.5)),
        2: ((f32(1.5), np.int64(0)), (f32(2.5), np.int64(1))),
        3: ((f32(1), f32(2), f32(0)), (f32(1), f32(4), f32(0))),
    }
    if name.startswith("bitwise"):
        a = (np.int32(6), np.int32(3))
    elif name in ("minmax", "affine"):
        a = ((f32(1), f32(2)), (f32(3), f32(4)))
    else:
        a = args[op.arity]
    jf = numba.njit(op.fn)
    r = jf(*a)
    sig = jf.nopython_signatures[0]
    if name.startswith("logical"):
        assert str(sig.return_type) == "bool"
    elif name.startswith("bitwise"):  # numba widens small integers (int32 & int32 -> int64)
        assert str(sig.return_type) == "int64"
    else:
        assert sig.return_type == sig.args[0], (name, sig)
    py = op(*a)
    np.testing.assert_allclose(np.asarray(r, dtype=float), np.asarray(py, dtype=float),
                               rtol=1e-6)
