"""Full reductions and the generic reduce / mapreduce, differential against NumPy.

In the simulator the launch shapes are tiny (block 64, items 2, <= 4 blocks), so sizes of
a few hundred run the multi-warp, multi-block, peel/tail and last-block paths.  Float
references are computed in float64; integers exactly.
"""

import importlib
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forge_array import ops
from forge_array.runtime import kernels_available
from forge_array.runtime.accumulation import accumulation_dtype, float_result

R = importlib.import_module("forge_array.primitives.reductions")
K = importlib.import_module("forge_array.kernels.reduce")

FEW = settings(max_examples=12, deadline=None)

# sizes: empty, one, warp edges, block edge (64), vector-block edges (64*2*4 = 512 float32)
SIZES = [0, 1, 31, 32, 33, 65, 129, 513]


def host(a):
    if isinstance(a, tuple):
        return tuple(host(c) for c in a)
    return a.get() if hasattr(a, "get") else np.asarray(a)


def to_bk(bk, a):
    return bk.asarray(a)


def data(dtype, n, seed=0):
    rng = np.random.default_rng(seed + n)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(n) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = max(info.min, -100), min(info.max, 100)
        return rng.integers(lo, hi, n, endpoint=True).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    return rng.standard_normal(n).astype(dt)


def close(got, ref, dtype):
    got = np.asarray(got)
    dt = np.dtype(dtype)
    if dt.kind in "fc":
        tol = 2e-5 if dt.itemsize <= 4 or dt == np.complex64 else 1e-12
        np.testing.assert_allclose(got.astype(np.complex128 if dt.kind == "c" else np.float64),
                                   ref, rtol=tol, atol=tol * 10)
    else:
        assert got.tolist() == np.asarray(ref).tolist()


# --------------------------------------------------------------------------- named reductions


@pytest.mark.parametrize("n", SIZES)
def test_sum_float32_sizes(bk, n):
    x = data("float32", n)
    r = R.sum(to_bk(bk, x), None, np.float32)
    assert r.dtype == np.float32 and r.shape == ()
    close(host(r), x.astype(np.float64).sum(), "float32")


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "int32", "int64",
                                   "uint32", "uint64", "float64", "complex64"])
@pytest.mark.parametrize("n", [1, 33, 300])
def test_sum_dtypes(bk, dtype, n):
    x = data(dtype, n)
    acc = accumulation_dtype(np.dtype(dtype))
    r = R.sum(to_bk(bk, x), None, acc)
    assert r.dtype == acc
    ref = x.astype(np.complex128).sum() if acc.kind == "c" else (
        x.astype(np.float64).sum() if acc.kind == "f" else x.astype(acc).sum(dtype=acc))
    close(host(r), ref, acc)


def test_sum_uint8_accumulates_in_uint64(bk):
    x = np.full(1000, 255, np.uint8)
    assert int(host(R.sum(to_bk(bk, x), None, np.uint64))) == 255000


@pytest.mark.parametrize("offset", [0, 1, 2, 3])
def test_misaligned_starts(bk, offset):
    buf = to_bk(bk, data("float32", 400))
    x = buf[offset:offset + 301]
    close(host(R.sum(x, None, np.float32)), host(x).astype(np.float64).sum(), "float32")
    u = to_bk(bk, data("uint8", 700))[offset + 5:]
    assert int(host(R.sum(u, None, np.uint64))) == int(host(u).astype(np.uint64).sum())


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dtype", ["float32", "int8", "uint16", "int64", "bool"])
def test_max_min(bk, name, dtype):
    x = data(dtype, 257)
    r = getattr(R, name)(to_bk(bk, x))
    assert r.dtype == np.dtype(dtype)
    assert host(r).tolist() == getattr(np, name)(x).tolist()


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_nan_and_inf(bk, name):
    x = data("float64", 200)
    x[137] = np.nan
    assert np.isnan(host(getattr(R, name)(to_bk(bk, x))))
    y = np.full(40, -np.inf if name == "max" else np.inf)
    assert host(getattr(R, name)(to_bk(bk, y))) == y[0]


def test_max_empty_raises(bk):
    with pytest.raises(ValueError):
        R.max(to_bk(bk, np.zeros(0, np.float32)))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_mean_var_std(bk, dtype):
    x = (data(dtype, 300) * (3 if np.dtype(dtype).kind == "f" else 1)).astype(dtype) + 5
    xb = to_bk(bk, x)
    x64 = x.astype(np.float64)
    out = float_result(np.dtype(dtype))
    r = R.mean(xb)
    assert r.dtype == out
    close(host(r), x64.mean(), out)
    for c in (0, 1):
        close(host(R.var(xb, None, c)), x64.var(ddof=c), out)
        close(host(R.std(xb, None, c)), x64.std(ddof=c), out)


def test_var_large_offset_float32(bk):
    # one-pass Welford keeps accuracy where E[x^2] - E[x]^2 would cancel
    x = (1e4 + data("float32", 500)).astype(np.float32)
    close(host(R.var(to_bk(bk, x))), x.astype(np.float64).var(), "float32")


@pytest.mark.parametrize("name", ["any", "all"])
@pytest.mark.parametrize("dtype", ["bool", "float32", "int16"])
def test_any_all(bk, name, dtype):
    for x in (np.zeros(70, dtype), np.ones(70, dtype), data(dtype, 70)):
        assert bool(host(getattr(R, name)(to_bk(bk, x)))) == bool(getattr(np, name)(x))


def test_any_nan_is_true(bk):
    x = np.zeros(40)
    x[17] = np.nan
    assert bool(host(R.any(to_bk(bk, x))))


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "bool"])
def test_argmax_argmin(bk, name, dtype):
    x = data(dtype, 300)
    r = getattr(R, name)(to_bk(bk, x))
    assert r.dtype == np.int64
    assert int(host(r)) == int(getattr(np, name)(x))


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_ties_nan_views(bk, name):
    x = np.zeros(200)
    x[[30, 70, 150]] = 5.0 if name == "argmax" else -5.0
    assert int(host(getattr(R, name)(to_bk(bk, x)))) == 30
    x[90] = np.nan
    x[120] = np.nan
    assert int(host(getattr(R, name)(to_bk(bk, x)))) == 90
    m = data("float64", 120).reshape(10, 12)
    v = to_bk(bk, m)[::-1, 1::2]
    assert int(host(getattr(R, name)(v))) == int(getattr(np, name)(host(v)))
    assert host(getattr(R, name)(v, None, True)).shape == (1, 1)


def test_prod(bk):
    x = np.array([1, 2, 3, -1, 2] * 7, dtype=np.int32)
    assert int(host(R.prod(to_bk(bk, x), None, np.int64))) == int(np.prod(x, dtype=np.int64))
    y = (1 + data("float64", 100) / 50)
    close(host(R.prod(to_bk(bk, y), None, np.float64)), np.prod(y), "float64")


def test_keepdims_and_full_axis_tuple(bk):
    x = to_bk(bk, data("float32", 60).reshape(3, 4, 5))
    r = R.sum(x, (0, 1, 2), np.float32, True)
    assert r.shape == (1, 1, 1)
    close(host(r).reshape(()), host(x).astype(np.float64).sum(), "float32")
    assert R.max(x, (0, 1, 2), False).shape == ()


# --------------------------------------------------------------------------- views


@FEW
@given(st.data())
def test_views_sum_max_argmax(bk, data_):
    from forge_array.testing import shapes, views

    dtype = data_.draw(st.sampled_from(["float32", "int32", "uint8", "float64"]))
    shape = data_.draw(shapes(min_dims=1, max_dims=3, min_side=1, max_side=9, max_size=300))
    x = data_.draw(views(dtype, shape, xp=bk))
    h = host(x)
    acc = accumulation_dtype(np.dtype(dtype))
    ref = h.astype(np.float64).sum() if acc.kind == "f" else h.astype(acc).sum(dtype=acc)
    close(host(R.sum(x, None, acc)), ref, acc)
    assert host(R.max(x)).tolist() == h.max().tolist()
    assert int(host(R.argmax(x))) == int(np.argmax(h))


def test_strided_and_transposed(bk):
    m = data("float32", 24 * 25).reshape(24, 25)
    mb = to_bk(bk, m)
    for v in (mb[::2], mb.T, mb[:, ::-3], mb[3:, 1:].T, mb[::-1, ::-1]):
        close(host(R.sum(v, None, np.float32)), host(v).astype(np.float64).sum(), "float32")
    t = to_bk(bk, data("int16", 2 * 3 * 4 * 5 * 6).reshape(2, 3, 4, 5, 6))[:, ::2, :, ::2, ::-1]
    assert int(host(R.sum(t, None, np.int64))) == int(host(t).astype(np.int64).sum())


def test_zero_stride_broadcast(bk):
    x = to_bk(bk, np.arange(5.0))
    b = bk.broadcast_to(x, (40, 5))
    close(host(R.sum(b, None, np.float64)), 400.0, "float64")


# --------------------------------------------------------------------------- generic


def test_generic_sum_of_squares(bk):
    x = data("float32", 300)
    r = R.mapreduce(lambda v: v * v, ops.add, to_bk(bk, x))
    close(host(r), (x.astype(np.float64) ** 2).sum(), "float32")


def test_generic_minmax_one_pass(bk):
    x = data("float64", 257)
    lo, hi = R.mapreduce(lambda v: (v, v), ops.minmax, to_bk(bk, x))
    assert float(host(lo)) == x.min() and float(host(hi)) == x.max()


def test_generic_logsumexp(bk):
    x = data("float64", 200)
    r = R.reduce(ops.logaddexp, to_bk(bk, x))
    close(host(r), np.logaddexp.reduce(x), "float64")


def test_generic_count_nans(bk):
    x = data("float64", 150)
    x[[3, 77, 149]] = np.nan
    r = R.mapreduce(lambda v: 1 if v != v else 0, ops.add, to_bk(bk, x))
    assert int(host(r)) == 3


def test_generic_dot_two_arrays(bk):
    a, b = data("float64", 100), data("float64", 100, seed=1)
    r = R.mapreduce(lambda u, v: u * v, ops.add, to_bk(bk, a), to_bk(bk, b)[::-1])
    close(host(r), a @ b[::-1], "float64")


def test_generic_user_operator_no_identity_and_init(bk):
    x = data("int32", 90)
    r = R.reduce(lambda p, q: p + q, to_bk(bk, x))
    assert int(host(r)) == int(x.astype(np.int64).sum())
    r = R.reduce(lambda p, q: p + q, to_bk(bk, x), init=1000)
    assert int(host(r)) == int(x.astype(np.int64).sum()) + 1000
    with pytest.raises(ValueError, match="identity"):
        R.reduce(lambda p, q: p + q, to_bk(bk, np.zeros(0, np.int32)))
    assert int(host(R.reduce(lambda p, q: p + q, to_bk(bk, np.zeros(0, np.int32)), init=7))) == 7
    assert float(host(R.reduce(ops.add, to_bk(bk, np.zeros(0))))) == 0.0


def test_generic_non_commutative_affine_in_order(bk):
    n = 150
    a = 1 + data("float64", n) / 100
    b = data("float64", n, seed=3)
    ref = (1.0, 0.0)
    for i in range(n):
        ref = ops.affine(ref, (a[i], b[i]))
    ra, rb = R.reduce(ops.affine, (to_bk(bk, a), to_bk(bk, b)))
    close(host(ra), ref[0], "float64")
    close(host(rb), ref[1], "float64")
    # non-commutative user operators without identity: first and last element
    d = to_bk(bk, data("int64", 200))
    assert int(host(R.reduce(lambda p, q: p, d))) == int(host(d)[0])
    assert int(host(R.reduce(lambda p, q: q, d[::-3]))) == int(host(d)[::-3][-1])


def test_generic_tuple_argmax_struct_of_arrays(bk):
    v = data("float32", 100)
    i = np.arange(100, dtype=np.int64)
    rv, ri = R.reduce(ops.argmax, (to_bk(bk, v), to_bk(bk, i)))
    assert int(host(ri)) == int(np.argmax(v)) and float(host(rv)) == v.max()


def test_generic_welford_tuple_result_dtypes(bk):
    x = data("float64", 120)
    f = lambda v: (1.0, v, 0.0)  # noqa: E731
    n, m, m2 = R.mapreduce(f, ops.welford, to_bk(bk, x))
    assert float(host(n)) == 120
    close(host(m), x.mean(), "float64")
    close(host(m2) / 120, x.var(), "float64")


def test_generic_axis(bk):
    x = data("float64", 60).reshape(5, 12)
    r = R.mapreduce(lambda v: v * v, ops.add, to_bk(bk, x), axis=1)
    close(host(r), (x ** 2).sum(axis=1), "float64")
    r = R.reduce(ops.maximum, to_bk(bk, x), axis=(0,), keepdims=True)
    assert host(r).tolist() == x.max(axis=0, keepdims=True).tolist()


def test_generic_result_type_follows_numba(bk):
    x = np.arange(10, dtype=np.int16)
    r = R.mapreduce(lambda v: v * 0.5, ops.add, to_bk(bk, x))
    assert r.dtype == np.float64
    close(host(r), 22.5, "float64")


# --------------------------------------------------------------------------- errors


def test_error_not_callable(bk):
    x = to_bk(bk, np.arange(4.0))
    with pytest.raises(TypeError, match="callable"):
        R.reduce(3, x)
    with pytest.raises(TypeError, match="callable"):
        R.mapreduce("f", ops.add, x)


def test_error_uncompilable_operator_names_it(bk):
    x = to_bk(bk, np.arange(4.0))

    def bad_op(a, b):
        return a + undefined_name  # noqa: F821

    with pytest.raises(TypeError, match="bad_op"):
        R.reduce(bad_op, x)


def test_error_result_type_mismatch(bk):
    x = to_bk(bk, np.arange(4.0))
    with pytest.raises(TypeError):
        R.reduce(lambda a, b: (a, b), x)


def test_error_axis_and_shapes(bk):
    x = to_bk(bk, np.arange(6.0).reshape(2, 3))
    with pytest.raises((ValueError, IndexError)):
        R.reduce(ops.add, x, axis=2)
    with pytest.raises((ValueError, IndexError)):
        R.reduce(ops.add, x, axis=(0, 0))
    with pytest.raises(ValueError, match="shape"):
        R.mapreduce(lambda a, b: a * b, ops.add, x, to_bk(bk, np.arange(3.0)))
    with pytest.raises(ValueError, match="shape"):
        R.reduce(ops.argmax, (x, to_bk(bk, np.arange(3))))


def test_error_init_shape(bk):
    x = to_bk(bk, np.arange(6.0))
    with pytest.raises(TypeError):
        R.reduce(ops.minmax, (x, x), init=1.0)


# --------------------------------------------------------------------------- kernel internals


def test_collapse():
    from forge_array.dispatch._common import collapse

    assert collapse((2, 3, 4), [(12, 4, 1)]) == ((24,), [(1,)])
    assert collapse((4, 1, 6), [(6, 99, -1)]) == ((4, 6), [(6, -1)])
    assert collapse((3, 4), [(4, 1), (1, 3)]) == ((3, 4), [(4, 1), (1, 3)])
    assert collapse((1, 1), [(5, 7)]) == ((), [()])


def test_deterministic(bk):
    x = to_bk(bk, data("float32", 2000))
    a = [float(host(R.sum(x, None, np.float32))) for _ in range(3)]
    assert a[0] == a[1] == a[2]


def test_ticket_reset_between_calls(bk, sim):
    # the last block resets the ticket: consecutive launches see a zero counter
    from forge_array.runtime import temp

    x = to_bk(bk, data("float64", 700))
    R.sum(x, None, np.float64)
    R.sum(x, None, np.float64)
    if sim:
        assert int(temp.counters(1, np.zeros(1))[0]) == 0


def test_fallback_cpu_generic_without_kernels(monkeypatch):
    for part in (R.generic, R.named):
        monkeypatch.setattr(part, "kernels_available", lambda x: False)
    x = data("float64", 50).reshape(5, 10)
    r = R.mapreduce(lambda v: abs(v), ops.maximum, x, axis=0)
    assert r.tolist() == np.abs(x).max(axis=0).tolist()
    r = R.reduce(lambda p, q: q, np.arange(1, 5))
    assert int(r) == 4
    assert math.isclose(float(R.sum(x, None, np.float64)), x.sum())


def test_kernels_available_flag(bk):
    assert kernels_available(to_bk(bk, np.zeros(3)))


# --------------------------------------------------------------------------- GPU code path


def test_ptx_compiles_for_specialisations(offline_ptx):
    out = offline_ptx("""
        import numpy as np
        from forge_array import ops
        from forge_array.kernels import reduce as K
        from forge_array.primitives.reductions.named import _welford_map, _var_post, _pair, _index_post
        from forge_array.runtime import compile_ptx_offline
        from forge_array.runtime.param_types import to_numba
        S = K.ReduceSpec
        cases = [
            (S(op=ops.add.fn, acc_dtypes=("<f4",), identity=(0.0,)), ("<f4",), "vec", 1, 4, 4),
            (S(op=ops.add.fn, acc_dtypes=("<u8",), identity=(0,)), ("|u1",), "vec", 1, 1, 16),
            (S(op=ops.maximum.fn, acc_dtypes=("<f4",), identity=(float("-inf"),)),
             ("<f4",), "strided", 2, 4, 1),
            (S(op=ops.welford.fn, acc_dtypes=("<f4",) * 3, identity=(0.0,) * 3,
               f=_welford_map(np.dtype("f4")), acc_tuple=True, post=_var_post,
               out_dtypes=("<f4",)), ("<f4",), "vec", 1, 4, 4),
            (S(op=ops.argmax.fn, acc_dtypes=("<f4", "<i8"), identity=(float("-inf"), 2**63 - 1),
               f=_pair, with_index=True, acc_tuple=True, post=_index_post,
               out_dtypes=("<i8",)), ("<f4",), "vec", 1, 4, 4),
            (S(op=(lambda a, b: a + b), acc_dtypes=("<f8",), identity=None, commutative=False,
               has_init=True), ("<f8",), "flat", 1, 4, 1),
            (S(op=ops.affine.fn, acc_dtypes=("<f8", "<f8"), identity=(1.0, 0.0), acc_tuple=True,
               commutative=False, struct=(2,)), ("<f8", "<f8"), "strided", 1, 4, 1),
            (S(op=ops.logical_or.fn, acc_dtypes=("|b1",), identity=(False,)), ("|u1",), "vec",
             1, 1, 16),
            (S(op=ops.add.fn, acc_dtypes=("<c8",), identity=(0j,)), ("<c8",), "flat", 1, 4, 1),
            (S(op=ops.add.fn, acc_dtypes=("<f8",), identity=(0.0,), f=(lambda u, v: u * v)),
             ("<f4", "<f4"), "strided", 3, 4, 1),
        ]
        for spec, ind, mode, nd, items, vec in cases:
            ptx = compile_ptx_offline(K.make_reduce_kernel, (spec, ind, mode, nd, items, vec, 512),
                                      to_numba(K.kernel_argtypes(spec, ind, mode, nd)))
            assert ".entry" in ptx and "atom" in ptx
            if mode == "vec":
                assert "ld.global.v4" in ptx or "ld.global.nc.v4" in ptx, K.spec_name(spec)
            print("ok", K.spec_name(spec), mode)
    """)
    assert out.count("ok") == 10


def test_axis_mean_var_std(bk):
    m = data("float32", 60).reshape(6, 10) + 3
    x = to_bk(bk, m)
    ref = m.astype(np.float64)
    close(host(R.mean(x, (1,))), ref.mean(axis=1), "float32")
    close(host(R.var(x, (0,), 1)), ref.var(axis=0, ddof=1), "float32")
    close(host(R.std(x, (1,), 0, True)), ref.std(axis=1, keepdims=True), "float32")


@pytest.mark.parametrize("dtype, path", [("float16", "shifted"), ("float32", "shifted"),
                                         ("float32", "welford")])
def test_axis_var_std_both_paths(bk, dtype, path):
    """var / std along axes by the shifted float64 sums and by Welford triples (the
    ``moments`` tuning picks by size for float32; float16 always sums): shapes at warp edges, several axes, keepdims,
    corrections, views, a large offset and a constant column, against float64 NumPy."""
    import forge_array as xp

    rng = np.random.default_rng(7)
    shifted_min = 0 if path == "shifted" else 1 << 40
    cases = []
    for shape, axes in [((33, 5), (0,)), ((31, 4), (1,)), ((1, 3), (0,)), ((6, 65), (0,)),
                        ((4, 5, 6), (0, 2)), ((4, 5, 6), (1,))]:
        cases.append((rng.standard_normal(shape).astype(dtype) * 3 + 50, axes))
    m = rng.standard_normal((40, 3)).astype(dtype)
    m[:, 1] = 7          # constant: variance 0, not a rounding below it
    m[0, 2] = 300        # the pivot far from the rest
    cases += [(m, (0,)), (rng.standard_normal((8, 12)).astype(dtype).T, (0,)),
              (rng.standard_normal((20, 9)).astype(dtype)[::3, 1:], (0,))]
    tol = 2e-3 if dtype == "float16" else 2e-5
    with xp.flags(tuning={"moments": {"shifted_min": shifted_min}}):
        for a, axes in cases:
            x = to_bk(bk, a)
            ref = a.astype(np.float64)
            for correction, keepdims in ((0, False), (1, True)):
                if math.prod(a.shape[d] for d in axes) <= correction:
                    continue
                v = R.var(x, axes, correction, keepdims)
                sd = R.std(x, axes, correction, keepdims)
                assert v.dtype == np.dtype(dtype) and sd.dtype == np.dtype(dtype)
                want = ref.var(axis=axes, ddof=correction, keepdims=keepdims)
                np.testing.assert_allclose(host(v).astype(np.float64), want, rtol=tol,
                                           atol=tol * float(np.max(want, initial=0)))
                np.testing.assert_allclose(host(sd).astype(np.float64), np.sqrt(want),
                                           rtol=tol, atol=tol * 10)
        if dtype == "float32":
            assert host(R.var(to_bk(bk, m), (0,), 0))[1] == 0.0
        special = np.array([[1.0, np.nan, np.inf, 2.0], [2.0, 1.0, 1.0, -np.inf],
                            [3.0, 2.0, 3.0, np.inf]], dtype=dtype)
        got = host(R.std(to_bk(bk, special), (0,), 0))
        assert got[0] == pytest.approx(np.std([1.0, 2.0, 3.0]), rel=tol)
        assert np.isnan(got[1:]).all()


def test_namespace_reduce_mapreduce():
    import forge_array as xp

    x = xp.asarray(data("float64", 70))
    h = host(x._array)
    r = xp.mapreduce(lambda v: v * v, xp.ops.add, x)
    assert isinstance(r, xp.Array) and r.dtype == xp.float64
    close(host(r._array), (h ** 2).sum(), "float64")
    lo, hi = xp.mapreduce(lambda v: (v, v), xp.ops.minmax, x)
    assert float(lo) == h.min() and float(hi) == h.max()
    m = xp.reshape(x, (7, 10))
    r = xp.reduce(xp.ops.maximum, m, axis=1, keepdims=True)
    assert r.shape == (7, 1)
    assert host(r._array).ravel().tolist() == h.reshape(7, 10).max(axis=1).tolist()
    assert float(xp.sum(x)) == pytest.approx(h.sum())
    assert int(xp.argmax(x)) == int(np.argmax(h))
    with pytest.raises(TypeError):
        xp.reduce(xp.ops.add, h)  # a NumPy array, not a forge_array Array


@pytest.mark.parametrize("values", [[float("nan")], [1.0, float("inf")], [2.0, float("nan"), 3.0]])
def test_var_std_of_nan_or_inf_is_nan(values):
    import forge_array as xp

    x = xp.asarray(np.asarray(values))
    for fn in (xp.var, xp.std):
        assert np.isnan(float(fn(x)))
        assert np.isnan(float(fn(xp.reshape(x, (1, -1)), axis=1)[0]))
    assert np.isnan(float(xp.var(xp.asarray(np.float64("nan")))))


def test_failed_launch_leaves_later_launches_correct(bk, sim):
    """A simulated kernel that stops half-way (a Python exception in one thread) may leave
    the ticket counter and the scan tickets dirty: the runtime drops them, so the next
    reductions and scans are right."""
    if not sim:
        pytest.skip("only the simulator runs operators as Python")
    import forge_array as xp
    from forge_array.runtime import temp

    def boom(a, b):
        if b == 7.0:
            raise ValueError("boom")
        return a + b

    h = data("float64", 900)
    h[-5] = 7.0
    x = to_bk(bk, h)
    with pytest.raises(Exception, match="boom"):
        xp.reduce(boom, xp.asarray(h))
    assert int(temp.counters(1, np.zeros(1))[0]) == 0
    close(R.sum(x, None, np.float64), h.sum(), "float64")
    # kernels built after the failure compile (numba.cuda is back in the modules' globals)
    np.testing.assert_allclose(np.asarray(xp.cumulative_sum(xp.asarray(h[::-3]))),
                               np.cumsum(h[::-3]), rtol=1e-12)
    dispatch_scan = importlib.import_module("forge_array.dispatch.scan")
    states = list(getattr(dispatch_scan.state.THREAD_LOCAL, "states", {}).values())
    assert states and any(st.base for st in states)
    temp.discard()  # what a failed launch calls: the scan's tile states start afresh too
    assert all(st.base == 0 and st.epoch == 1 and not st.counter.any() for st in states)
    np.testing.assert_allclose(np.asarray(xp.cumulative_sum(xp.asarray(h[::-3]))),
                               np.cumsum(h[::-3]), rtol=1e-12)
