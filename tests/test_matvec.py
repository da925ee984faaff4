"""matvec / vecmat (primitives and namespace), semirings, namespace routing of matmul /
vecdot / tensordot, differential against NumPy (float64 references, exact integers) and
Python references for semirings."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import forge_array as xp
from forge_array import ops
from forge_array.dispatch import axis_reduce as dispatch_axis
from forge_array.primitives import axis_reduce as ar
from forge_array.primitives import matvec as mv
from forge_array.testing import shapes, views


def _h(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _mat(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) * 4
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


SHAPES = [(1, 1), (1, 40), (40, 1), (31, 5), (32, 9), (33, 3), (7, 33), (3, 130), (130, 3),
          (2, 300), (300, 2), (65, 64)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("order", ["C", "F"])
def test_matvec_vecmat_float(bk, shape, order):
    A = np.asarray(_mat(shape, np.float64), order=order)
    x = _mat(shape[1], np.float64, 1)
    y = _mat(shape[0], np.float64, 2)
    np.testing.assert_allclose(_h(mv.matvec(bk.asarray(A), bk.asarray(x))), A @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_h(mv.vecmat(bk.asarray(y), bk.asarray(A))), y @ A, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                                   "float32", "complex64", "complex128", "bool"])
def test_dtypes(bk, dtype):
    A = _mat((9, 37), dtype)
    x = _mat(37, dtype, 1)
    y = _mat(9, dtype, 2)
    r, s = mv.matvec(bk.asarray(A), bk.asarray(x)), mv.vecmat(bk.asarray(y), bk.asarray(A))
    assert r.dtype == np.dtype(dtype) and s.dtype == np.dtype(dtype)
    if np.dtype(dtype).kind in "biu":
        np.testing.assert_array_equal(_h(r), A @ x)     # wraps like NumPy
        np.testing.assert_array_equal(_h(s), y @ A)
    else:
        big = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
        tol = 1e-5 if np.dtype(dtype).itemsize <= 8 else 1e-12
        np.testing.assert_allclose(_h(r), A.astype(big) @ x.astype(big), rtol=tol, atol=tol * 40)
        np.testing.assert_allclose(_h(s), y.astype(big) @ A.astype(big), rtol=tol, atol=tol * 40)


def test_mixed_dtypes_promote(bk):
    A = _mat((5, 6), np.int8)
    x = _mat(6, np.int16)
    r = mv.matvec(bk.asarray(A), bk.asarray(x))
    assert r.dtype == np.int16
    np.testing.assert_array_equal(_h(r), A.astype(np.int16) @ x)


@pytest.mark.parametrize("view", ["T", "neg_rows", "neg_cols", "slice", "offset"])
def test_strided_A(bk, view):
    base = _mat((40, 50), np.float32)
    A = {"T": base.T, "neg_rows": base[::-1], "neg_cols": base[:, ::-1], "slice": base[::3, 1::2],
         "offset": base[1:, 3:]}[view]
    x = _mat(A.shape[1], np.float32, 1)[::-1].copy()[::-1]
    y = _mat(A.shape[0], np.float32, 2)
    np.testing.assert_allclose(_h(mv.matvec(bk.asarray(A), bk.asarray(x))), A.astype(np.float64) @ x,
                               rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(_h(mv.vecmat(bk.asarray(y), bk.asarray(A))), y @ A.astype(np.float64),
                               rtol=1e-5, atol=1e-4)
    xs = _mat(2 * A.shape[1], np.float32, 3)[::-2]        # strided negative vector
    np.testing.assert_allclose(_h(mv.matvec(bk.asarray(A), bk.asarray(xs))), A.astype(np.float64) @ xs,
                               rtol=1e-5, atol=1e-4)


def test_batched(bk):
    A = _mat((3, 6, 10), np.float64)
    x = _mat(10, np.float64, 1)
    X = _mat((3, 10), np.float64, 2)
    Y = _mat((4, 1, 6), np.float64, 3)
    np.testing.assert_allclose(_h(mv.matvec(bk.asarray(A), bk.asarray(x))), A @ x)
    np.testing.assert_allclose(_h(mv.matvec(bk.asarray(A), bk.asarray(X))), np.einsum("bij,bj->bi", A, X))
    np.testing.assert_allclose(_h(mv.vecmat(bk.asarray(Y), bk.asarray(A))),
                               np.einsum("...i,...ij->...j", Y, A))


def test_x_none_reduces_rows_and_columns(bk):
    A = _mat((7, 40), np.float32)
    np.testing.assert_allclose(_h(mv.matvec(bk.asarray(A), None)), A.astype(np.float64).sum(1), rtol=1e-5)
    np.testing.assert_array_equal(_h(mv.vecmat(None, bk.asarray(A), op=ops.maximum)), A.max(0))
    np.testing.assert_array_equal(_h(mv.matvec(bk.asarray(A), None, op=max)), A.max(1))


# --------------------------------------------------------------------------- semirings


def _py_semiring(A, x, f, op, init):
    return np.array([_fold(op, init, [f(A[i, j], x[j]) for j in range(A.shape[1])])
                     for i in range(A.shape[0])])


def _fold(op, init, vals):
    acc = init
    for v in vals:
        acc = op(acc, v)
    return acc


def _graph(n, seed, density=0.3):
    rng = np.random.default_rng(seed)
    W = rng.uniform(1, 10, (n, n)).astype(np.float32)
    W[rng.random((n, n)) > density] = np.inf
    np.fill_diagonal(W, 0)
    return W


@pytest.mark.parametrize("n", [1, 5, 33, 70])
def test_min_plus_bellman_ford_step(bk, n):
    W = _graph(n, n)                  # W[i, j]: weight of edge j -> i
    d = np.full(n, np.inf, np.float32)
    d[0] = 0
    plus = lambda w, v: w + v         # noqa: E731
    for _ in range(3):
        ref = _py_semiring(W, d, plus, min, np.inf).astype(np.float32)
        d_new = _h(mv.matvec(bk.asarray(W), bk.asarray(d), f=plus, op=ops.minimum))
        np.testing.assert_array_equal(d_new, ref)
        d = d_new
    # the same relaxation pulled through the transposed graph with vecmat
    np.testing.assert_array_equal(_h(mv.vecmat(bk.asarray(d), bk.asarray(W.T.copy()), f=plus, op=ops.minimum)),
                                  _py_semiring(W, d, plus, min, np.inf))


def test_max_times_viterbi_step(bk):
    rng = np.random.default_rng(3)
    T = rng.random((12, 50))          # T[i, j]: transition j -> i
    p = rng.random(50)
    times = lambda a, b: a * b        # noqa: E731
    r = _h(mv.matvec(bk.asarray(T), bk.asarray(p), f=times, op=ops.maximum))
    np.testing.assert_allclose(r, _py_semiring(T, p, times, max, 0.0), rtol=1e-15)


def test_log_sum_exp_product(bk):
    rng = np.random.default_rng(4)
    LA = rng.standard_normal((9, 45)) * 30
    lx = rng.standard_normal(45) * 30
    r = _h(mv.matvec(bk.asarray(LA), bk.asarray(lx), f=lambda a, b: a + b, op=ops.logaddexp))
    ref = np.array([np.logaddexp.reduce(LA[i] + lx) for i in range(9)])
    np.testing.assert_allclose(r, ref, rtol=1e-12)


def test_boolean_or_and_reachability(bk):
    rng = np.random.default_rng(5)
    Adj = rng.random((40, 40)) < 0.05
    np.fill_diagonal(Adj, True)
    reach = np.zeros(40, bool)
    reach[0] = True
    for _ in range(4):
        new = _h(mv.matvec(bk.asarray(Adj), bk.asarray(reach)))      # bool: or-and
        assert new.dtype == np.bool_
        ref = np.array([any(Adj[i, j] and reach[j] for j in range(40)) for i in range(40)])
        np.testing.assert_array_equal(new, ref)
        reach = new
    gen = _h(mv.matvec(bk.asarray(Adj), bk.asarray(reach), f=lambda a, b: a and b, op=ops.logical_or))
    np.testing.assert_array_equal(gen, Adj.astype(int) @ reach.astype(int) > 0)


def test_int32_min_plus_keeps_dtype(bk):
    A = np.random.default_rng(6).integers(0, 100, (8, 20)).astype(np.int32)
    x = np.random.default_rng(7).integers(0, 100, 20).astype(np.int32)
    r = mv.matvec(bk.asarray(A), bk.asarray(x), f=lambda a, b: a + b, op=ops.minimum)
    assert r.dtype == np.int32
    np.testing.assert_array_equal(_h(r), (A + x).min(axis=1))


def test_init_and_operator_without_identity(bk):
    A = _mat((6, 50), np.float64)
    x = _mat(50, np.float64, 1)
    r = mv.matvec(bk.asarray(A), bk.asarray(x), init=100.0)
    np.testing.assert_allclose(_h(r), A @ x + 100)
    r = mv.matvec(bk.asarray(A), bk.asarray(x), op=lambda a, b: a if a < b else b)
    np.testing.assert_array_equal(_h(r), (A * x).min(axis=1))


@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 66), p=st.integers(1, 66), order=st.sampled_from("CF"),
       dtype=st.sampled_from(["int32", "int64", "uint8"]))
def test_hypothesis_integer(bk, n, p, order, dtype):
    A = np.asarray(np.random.default_rng(n * 67 + p).integers(0, 50, (n, p)), order=order).astype(dtype)
    x = np.random.default_rng(p).integers(0, 50, p).astype(dtype)
    y = np.random.default_rng(n).integers(0, 50, n).astype(dtype)
    np.testing.assert_array_equal(_h(mv.matvec(bk.asarray(A), bk.asarray(x))), A @ x)
    np.testing.assert_array_equal(_h(mv.vecmat(bk.asarray(y), bk.asarray(A))), y @ A)


@settings(max_examples=8, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(["float32", "float64", "int32", "int64"]),
       shape=shapes(min_dims=2, max_dims=3, min_side=1, max_side=45, edges=(31, 32, 33), max_size=3000))
def test_hypothesis_views(bk, data, dtype, shape):
    # A, x and y any views (offset, strided, reversed, broadcast, transposed), against NumPy
    el = {"min_value": -20, "max_value": 20}
    A = data.draw(views(dtype, shape, xp=bk, elements=el), label="A")
    x = data.draw(views(dtype, shape[-1:], xp=bk, elements=el), label="x")
    y = data.draw(views(dtype, shape[-2:-1], xp=bk, elements=el), label="y")
    Ah, xh, yh = _h(A), _h(x), _h(y)
    if np.dtype(dtype).kind == "i":
        np.testing.assert_array_equal(_h(mv.matvec(A, x)), Ah @ xh)
        np.testing.assert_array_equal(_h(mv.vecmat(y, A)), yh @ Ah)
    else:
        A64 = Ah.astype(np.float64)
        np.testing.assert_allclose(_h(mv.matvec(A, x)), A64 @ xh, rtol=1e-5, atol=1e-3)
        np.testing.assert_allclose(_h(mv.vecmat(y, A)), yh @ A64, rtol=1e-5, atol=1e-3)


@pytest.fixture
def fresh_plans():
    dispatch_axis.PLANS.clear()
    dispatch_axis.FAST.clear()
    yield
    dispatch_axis.PLANS.clear()
    dispatch_axis.FAST.clear()


def _kinds():
    return {p["kind"] for p in dispatch_axis.PLANS.values() if isinstance(p, dict)}


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("n,p,c0", [(7, 9, 1), (130, 12, 0), (20, 150, 3), (3, 80, 2)])
def test_vecmat_vectorised_columns(bk, fresh_plans, dtype, n, p, c0):
    # x @ A with 16-byte-aligned row strides: one 128-bit load of A and one load of x per row
    # serve VEC outputs; misaligned first columns, odd widths, several tiles, split rows
    width = -(-(p + c0 + 1) // 8) * 8
    base = _mat((n, width), dtype, n + p)
    A = base[:, c0:c0 + p]
    y = _mat(n, dtype, 5)
    r = mv.vecmat(bk.asarray(y), bk.asarray(base)[:, c0:c0 + p])
    if np.dtype(dtype).kind == "i":
        np.testing.assert_array_equal(_h(r), y @ A)
    else:
        np.testing.assert_allclose(_h(r), y.astype(np.float64) @ A, rtol=1e-5, atol=1e-3)
    Y = _mat((2, n), dtype, 6)                    # a stack of vectors, one matrix
    r = mv.vecmat(bk.asarray(Y), bk.asarray(base)[:, c0:c0 + p], f=lambda u, v: u + v, op=ops.minimum)
    np.testing.assert_array_equal(_h(r), (Y[:, :, None] + A[None]).min(axis=1))
    assert _kinds() == {"make_colvec_kernel"}


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int16"])
@pytest.mark.parametrize("n,p,off", [(300, 10, 0), (300, 10, 1), (50, 33, 2), (9, 100, 0), (64, 3, 3)])
def test_matvec_staged_short_rows(bk, fresh_plans, dtype, n, p, off):
    # A @ x with short contiguous rows: tiles of rows staged by 128-bit loads
    flat = _mat(n * p + 4, dtype, n + p)
    A = flat[off:off + n * p].reshape(n, p)
    x = _mat(p, dtype, 7)
    r = mv.matvec(bk.asarray(flat)[off:off + n * p].reshape(n, p), bk.asarray(x))
    if np.dtype(dtype).kind == "i":
        np.testing.assert_array_equal(_h(r), A @ x)
    else:
        np.testing.assert_allclose(_h(r), A.astype(np.float64) @ x, rtol=1e-5, atol=1e-3)
    B = _mat((3, 4, p), dtype, 8)                 # batched matrices and vectors
    X = _mat((3, p), dtype, 9)
    r = mv.matvec(bk.asarray(B), bk.asarray(X), f=lambda a, b: a + b, op=ops.maximum)
    np.testing.assert_array_equal(_h(r), (B + X[:, None, :]).max(axis=2))
    assert _kinds() == {"make_rowtile_kernel"}


# --------------------------------------------------------------------------- errors


@pytest.fixture(params=["new", "v4"])
def new_variants(rowcol_params, request):
    """The launch variants that tuning parameters select: occupancy-sized grids, one warp per
    staged tile, narrow column tiles, four vectors in flight in the long-row kernel."""
    new = {"occupancy": True, "row_tile_warp": True, "row_tile_min_blocks": 0, "col_tile": 32, "unroll": 8}
    if request.param == "v4":   # + st.shared.v4 tiles from the 16-byte boundary, bank-free groups
        new.update(row_tile_v4=True, row_tile_banks=True)
    rowcol_params(**new)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_new_variants(bk, new_variants, dtype):
    big = np.float64 if dtype == "float32" else np.int64
    for n, p in [(300, 10), (9, 100), (70, 33), (40, 150), (3, 700), (33, 10), (31, 32)]:
        A = _mat((n, p), dtype, n)
        x = _mat(p, dtype, 1)
        y = _mat(n, dtype, 2)
        np.testing.assert_allclose(_h(mv.matvec(bk.asarray(A), bk.asarray(x))), A.astype(big) @ x,
                                   rtol=1e-5, atol=1e-3)
        np.testing.assert_allclose(_h(mv.vecmat(bk.asarray(y), bk.asarray(A))), y.astype(big) @ A,
                                   rtol=1e-5, atol=1e-3)
        d = mv.matvec(bk.asarray(A), bk.asarray(x), f=lambda a, b: a + b, op=ops.minimum)
        np.testing.assert_array_equal(_h(d), (A + x[None, :]).min(axis=1))
    assert {"make_rowtile_kernel", "make_colvec_kernel", "make_row_kernel"} <= _kinds()


def test_errors(bk):
    A = bk.asarray(np.ones((3, 4)))
    with pytest.raises(ValueError, match="do not match"):
        mv.matvec(A, bk.asarray(np.ones(3)))
    with pytest.raises(ValueError, match="do not match"):
        mv.vecmat(bk.asarray(np.ones(4)), A)
    with pytest.raises(ValueError, match="2 dimensions"):
        mv.matvec(bk.asarray(np.ones(3)), bk.asarray(np.ones(3)))
    with pytest.raises(ValueError, match="broadcast"):
        mv.matvec(bk.asarray(np.ones((2, 3, 4))), bk.asarray(np.ones((3, 4))))
    with pytest.raises(TypeError, match="numba"):
        mv.matvec(A, bk.asarray(np.ones(4)), f=lambda a, b: a + "x")
    with pytest.raises(TypeError):
        mv.matvec(A, bk.asarray(np.ones(4)), op=3)


def test_namespace_errors():
    A = xp.asarray(np.ones((3, 4)))
    with pytest.raises(TypeError, match="forge_array array"):
        xp.matvec(np.ones((3, 4)), A)
    with pytest.raises(ValueError):
        xp.matvec(A, xp.asarray(np.ones(5)))


# --------------------------------------------------------------------------- namespace


def test_namespace_matvec_vecmat():
    A = _mat((6, 9), np.float64)
    x = _mat(9, np.float64, 1)
    r = xp.matvec(xp.asarray(A), xp.asarray(x), f=lambda a, b: a + b, op=ops.minimum)
    np.testing.assert_array_equal(np.from_dlpack(r, device="cpu"), (A + x).min(axis=1))
    r = xp.vecmat(xp.asarray(x[:6]), xp.asarray(A))
    np.testing.assert_allclose(np.from_dlpack(r, device="cpu"), x[:6] @ A)


@pytest.mark.parametrize("dtype", ["float32", "int32", "complex64"])
def test_routing_matmul_vecdot_tensordot(dtype):
    A = _mat((3, 6, 10), dtype)
    M = _mat((6, 10), dtype, 1)
    v = _mat(10, dtype, 2)
    w = _mat(6, dtype, 3)
    fa = xp.asarray
    big = {"f": np.float64, "i": np.int64, "c": np.complex128}[np.dtype(dtype).kind]
    tol = dict(rtol=1e-4, atol=1e-3)

    def eq(r, ref):
        r = np.from_dlpack(r, device="cpu")
        assert r.dtype == np.dtype(dtype) and r.shape == ref.shape
        if np.dtype(dtype).kind == "i":
            np.testing.assert_array_equal(r, ref.astype(dtype))
        else:
            np.testing.assert_allclose(r, ref, **tol)

    A64, M64, v64, w64 = (t.astype(big) for t in (A, M, v, w))
    eq(fa(M) @ fa(v), M64 @ v64)
    eq(fa(w) @ fa(M), w64 @ M64)
    eq(fa(A) @ fa(v), A64 @ v64)
    eq(fa(v) @ fa(v), np.asarray(v64 @ v64))
    eq(fa(A) @ fa(v[:, None]), A64 @ v64[:, None])
    eq(xp.vecdot(fa(A), fa(v)), np.vecdot(A64, v64))
    eq(xp.vecdot(fa(v), fa(A)), np.vecdot(v64, A64))
    eq(xp.vecdot(fa(A), fa(w[:, None]), axis=-2), np.vecdot(A64, w64[:, None], axis=-2))
    eq(xp.tensordot(fa(A), fa(M), axes=([1, 2], [0, 1])), np.tensordot(A64, M64, axes=([1, 2], [0, 1])))
    eq(xp.tensordot(fa(M.T.copy()), fa(A), axes=([1, 0], [1, 2])),
       np.tensordot(M64.T, A64, axes=([1, 0], [1, 2])))
    eq(fa(M) @ fa(M.T.copy()), M64 @ M64.T)       # not matrix-vector work: backend


def test_empty_shapes(bk):
    r = mv.matvec(bk.asarray(np.ones((0, 4))), bk.asarray(np.ones(4)))
    assert r.shape == (0,)
    r = mv.matvec(bk.asarray(np.ones((3, 0))), bk.asarray(np.ones(0)))
    np.testing.assert_array_equal(_h(r), [0, 0, 0])
    assert math.prod(mv.vecmat(bk.asarray(np.ones(0)), bk.asarray(np.ones((0, 2)))).shape) == 2


PTX_SRC = r"""
import numpy as np
from forge_array import ops
from forge_array.runtime import compile_ptx_offline
from forge_array.runtime.param_types import I64, ptr, to_numba, tuple_of, unituple
from forge_array.kernels import rowcol as k
from forge_array.dispatch.axis_reduce.plan import _buf_t
from forge_array.primitives.matvec import _swap, _mul

def argt(ins, acc, K):
    return to_numba((tuple_of(tuple(_buf_t(d) for d in ins)), _buf_t(acc), _buf_t(acc), ptr(np.uint32))
                    + (I64,) * 4 + (unituple(I64, K),) * 4 + (I64,) * 7)

f32, i32 = np.dtype("float32"), np.dtype("int32")
plus = lambda a, b: a + b
n = 0
for fac, fargs, at in [
    (k.make_row_kernel, (_mul, ops.add.fn, 2, f32, np.float32(0), False, None, 32, 256, 1, False,
                         False, 4, 4), argt((f32, f32), f32, 2)),
    (k.make_row_kernel, (plus, ops.minimum.fn, 2, f32, np.float32(np.inf), False, None, 256, 256, 4,
                         False, False, 4, 4), argt((f32, f32), f32, 2)),
    (k.make_col_kernel, (_swap(plus), ops.minimum.fn, 2, i32, np.int32(2**31 - 1), False, None, 256,
                         8, False, False, 4), argt((i32, i32), i32, 2)),
    (k.make_col_kernel, (_mul, ops.add.fn, 2, i32, np.int32(0), False, None, 256, 1, False, False, 4),
     argt((i32, i32), i32, 2)),
]:
    assert ".entry" in compile_ptx_offline(fac, fargs, at)
    n += 1
# x @ A: vectorised columns (A by 128-bit loads, x one scalar per row); A @ x: staged short rows
for fac, fargs, at in [
    (k.make_colvec_kernel, (_swap(_mul), ops.add.fn, 2, f32, np.float32(0), False, None, 256, 8, False,
                            False, 4, 4, (1, 0)), argt((f32, f32), f32, 2)),
    (k.make_colvec_kernel, (_swap(plus), ops.minimum.fn, 2, i32, np.int32(2**31 - 1), False, None, 256, 1,
                            False, False, 4, 4, (1, 0)), argt((i32, i32), i32, 2)),
    (k.make_rowtile_kernel, (_mul, ops.add.fn, 2, f32, np.float32(0), False, None, 1, 256, False, 4, (1, 0),
                             (f32, None), 4), argt((f32, f32), f32, 2)),
    (k.make_rowtile_kernel, (_mul, ops.add.fn, 2, f32, np.float32(0), False, None, 8, 256, False, 4, (1, 0),
                             (f32, None), 4), argt((f32, f32), f32, 2)),
]:
    ptx = compile_ptx_offline(fac, fargs, at)
    assert "ld.global.v4" in ptx or "ld.global.nc.v4" in ptx, "no 128-bit loads"
    n += 1
print("ok", n)
"""


def test_ptx_compiles_offline(offline_ptx):
    assert offline_ptx(PTX_SRC).strip().endswith("ok 8")


def test_replayed_plans_use_new_operands(bk):
    # the second call of a layout replays the cached launch plan: it must read the new data
    for seed in range(3):
        A = _mat((7, 40), np.float32, seed)
        x = _mat(40, np.float32, seed + 10)
        y = _mat(7, np.float32, seed + 20)
        np.testing.assert_allclose(_h(mv.matvec(bk.asarray(A), bk.asarray(x))), A.astype(np.float64) @ x,
                                   rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(_h(mv.vecmat(bk.asarray(y), bk.asarray(A))), y @ A.astype(np.float64),
                                   rtol=1e-5, atol=1e-4)
        At = bk.asarray(A)[::-1]
        np.testing.assert_allclose(_h(mv.matvec(At, bk.asarray(x))), A[::-1].astype(np.float64) @ x,
                                   rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_row_fill_splits_few_long_rows(bk, rowcol_params, sm_count, dtype):
    """Few groups of long rows (A @ x of (2, 5000), (5, 2100), sums along axis 1) split down to
    ``row_fill`` blocks per SM: more blocks per row than ``min_items`` allows, the same
    results; on a device of 16 SMs so that the rule (fewer groups than a quarter of the SMs)
    applies in the simulator too."""
    sm_count(16)
    big = np.float64 if dtype == "float32" else np.int64
    grids = {}
    for fill in (0, 2):
        rowcol_params(row_fill=fill, min_items=16)
        for n, p in [(2, 5000), (5, 2100)]:   # rows of several 256 x 4-element blocks on a GPU
            A, x = _mat((n, p), dtype, n), _mat(p, dtype, 1)
            np.testing.assert_allclose(_h(mv.matvec(bk.asarray(A), bk.asarray(x))), A.astype(big) @ x,
                                       rtol=1e-5)
            np.testing.assert_allclose(_h(ar.axis_mapreduce(None, ops.add, (bk.asarray(A),), 1, None, False, big)),
                                       A.astype(big).sum(axis=1), rtol=1e-5)
        grids[fill] = sorted(pl["grid"] for pl in dispatch_axis.PLANS.values() if isinstance(pl, dict) and "grid" in pl)
    assert grids[2] != grids[0] and max(grids[2]) > max(grids[0])
