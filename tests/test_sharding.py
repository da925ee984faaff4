"""Sharded arrays (``forge_array.Sharding``): every sharded operation against the unsharded
result (NumPy as the reference), with 1-4 blocks (uneven and empty blocks), and the errors of
what does not shard. In CI the blocks live on the CPU listed several times (kernels in the
simulator); on a GPU host on the GPUs in turn (``cuda:0`` listed k times on one GPU)."""

import numpy as np
import pytest

import forge_array as xp
from forge_array import ops
from forge_array.runtime import SIMULATE, STATS, caches
from forge_array.sharding import ShardedArray, block_sizes

K = [1, 2, 3, 4]
#: the devices blocks are placed on, in turn, and the one unsharded operands live on
DEVICES = [str(d) for d in xp.__array_namespace_info__().devices()
           if str(d).startswith("cuda")] or ["cpu"]
HOME = DEVICES[0]


def sh(k, axis=0):
    return xp.Sharding([DEVICES[i % len(DEVICES)] for i in range(k)], axis=axis)


def host(a):
    if isinstance(a, tuple):
        return tuple(host(c) for c in a)
    if hasattr(a, "to_device"):
        a = a.to_device("cpu")
    return np.asarray(a)


def close(a, b, exact=False, rtol=2e-5, atol=1e-6):
    a = host(a)
    b = np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    if exact:
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def data(shape, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) > 0.5
    return rng.integers(-5, 6, shape).astype(dtype)


# ---- placement


@pytest.mark.parametrize("k", K)
def test_blocks_scatter_gather(k):
    a = data((7, 3))
    x = xp.asarray(a, device=sh(k))
    assert isinstance(x, ShardedArray) and x.device == sh(k)
    assert [s.shape[0] for s in x.shards] == list(block_sizes(7, k))
    assert x.shape == (7, 3) and x.dtype == xp.float64 and x.ndim == 2 and x.size == 21
    close(x, a, exact=True)
    y = xp.asarray(a, device=HOME).to_device(sh(k, axis=1))
    assert [s.shape for s in y.shards] == [(7, b) for b in block_sizes(3, k)]
    close(y.to_device("cpu"), a, exact=True)
    close(y.to_device(sh(k)), a, exact=True)       # re-split along the same axis
    assert x.to_device(sh(k)) is x


def test_empty_blocks_and_repr():
    x = xp.asarray([1.0, 2.0], device=sh(4))
    assert [s.shape[0] for s in x.shards] == [1, 1, 0, 0]
    assert "blocks=[1, 1, 0, 0]" in repr(x)
    assert float(xp.sum(x)) == 3.0 and float(xp.max(x)) == 2.0 and int(xp.argmin(x)) == 0
    close(xp.cumulative_sum(x), [1.0, 3.0], exact=True)
    z = xp.zeros((0, 2), device=sh(3))
    assert z.shape == (0, 2) and float(xp.sum(z)) == 0.0
    with pytest.raises(ValueError):
        xp.max(z)


@pytest.mark.parametrize("k", K)
def test_creation(k):
    s = sh(k)
    close(xp.zeros((5, 2), dtype=xp.int32, device=s), np.zeros((5, 2), np.int32), exact=True)
    close(xp.ones(5, device=s), np.ones(5), exact=True)
    close(xp.full((5,), 7, device=s), np.full(5, 7), exact=True)
    assert xp.empty((5, 3), device=s).shape == (5, 3)
    close(xp.arange(3, 20, 2, device=s), np.arange(3, 20, 2), exact=True)
    close(xp.arange(0.5, 3.0, 0.25, device=s), np.arange(0.5, 3.0, 0.25))
    close(xp.linspace(0, 1, 9, device=s), np.linspace(0, 1, 9))
    close(xp.linspace(0, 1, 9, endpoint=False, device=s), np.linspace(0, 1, 9, endpoint=False))
    close(xp.eye(5, 4, k=1, device=s), np.eye(5, 4, k=1), exact=True)
    close(xp.eye(4, 6, k=-1, device=sh(k, axis=1)), np.eye(4, 6, k=-1), exact=True)
    x = xp.asarray(data((6, 2)), device=s)
    for like, ref in ((xp.zeros_like(x), np.zeros((6, 2))), (xp.ones_like(x), np.ones((6, 2))),
                      (xp.full_like(x, 2.5), np.full((6, 2), 2.5))):
        assert like.device == s
        close(like, ref, exact=True)
    assert xp.empty_like(x).shape == (6, 2)
    assert xp.zeros_like(x, device="cpu").device == xp.cpu
    close(xp.zeros_like(xp.ones(3, device=HOME), device=s), np.zeros(3), exact=True)
    close(xp.asarray(x, dtype=xp.float32), data((6, 2)).astype(np.float32))


def test_bad_sharding_axis_and_devices():
    with pytest.raises(ValueError, match="out of bounds"):
        xp.zeros(3, device=xp.Sharding(["cpu"], axis=1))
    with pytest.raises(ValueError, match="0-d"):
        xp.asarray(1.0, device=sh(2))
    with pytest.raises(ValueError):
        xp.Sharding([])
    with pytest.raises(TypeError):
        xp.Sharding(["cpu"], axis=1.5)
    with pytest.raises(ValueError, match="tpu"):
        xp.Sharding(["cpu", "tpu:0"])
    with pytest.raises(ValueError, match="copy"):
        xp.asarray([1, 2], device=sh(2), copy=False)


# ---- element-wise


@pytest.mark.parametrize("k", K)
def test_elementwise_and_operators(k):
    a, b = data((9, 3)), data((9, 3), seed=1)
    x, y = xp.asarray(a, device=sh(k)), xp.asarray(b, device=sh(k))
    close(x * y + 1, a * b + 1)
    close(2.0 - x, 2.0 - a)
    close(xp.exp(x) / (1 + y * y), np.exp(a) / (1 + b * b))
    close(x > y, a > b, exact=True)
    close(xp.where(x > 0, x, y), np.where(a > 0, a, b), exact=True)
    close(xp.maximum(x, 0.5), np.maximum(a, 0.5), exact=True)
    close(-abs(x), -np.abs(a), exact=True)
    v = xp.asarray(b[0], device=HOME)                 # replicated (3,) operand
    close(x + v, a + b[0], exact=True)
    close(v * x, b[0] * a, exact=True)
    col = xp.asarray(b[:, :1], device=HOME)           # (9, 1): cut into the blocks
    close(x - col, a - b[:, :1], exact=True)
    close(x * xp.asarray(3.0, device=HOME), a * 3.0, exact=True)
    i = xp.asarray(np.arange(9, dtype=np.int32), device=sh(k))
    close(i % 4 == 1, np.arange(9) % 4 == 1, exact=True)
    close(~(i > 3), ~(np.arange(9) > 3), exact=True)


@pytest.mark.parametrize("k", [2, 3])
def test_in_place_astype_and_views(k):
    a = data((8, 3))
    x = xp.asarray(a, device=sh(k))
    x += 1.0
    x *= xp.asarray(a, device=sh(k))
    close(x, (a + 1.0) * a)
    with pytest.raises(TypeError):
        x += xp.asarray(np.ones((8, 3), np.complex128), device=sh(k))
    xi = xp.astype(x, xp.int32)
    assert xi.dtype == xp.int32 and xi.device == sh(k)
    close(xi, ((a + 1.0) * a).astype(np.int32), exact=True)
    t = x.T
    assert t.shape == (3, 8) and t.device == sh(k, axis=1)
    close(t, ((a + 1.0) * a).T)
    close(xp.permute_dims(x, (1, 0)) * 2, 2 * ((a + 1.0) * a).T)
    e = xp.expand_dims(x, axis=0)
    assert e.shape == (1, 8, 3) and e.device.axis == 1
    close(xp.squeeze(e, axis=0), (a + 1.0) * a)
    close(xp.sort(x, axis=1), np.sort((a + 1.0) * a, axis=1), exact=True)


@pytest.mark.parametrize("k", [1, 3, 4])
def test_indexing(k):
    a = data((10, 4))
    x = xp.asarray(a, device=sh(k))
    close(x[2:9:3], a[2:9:3], exact=True)
    close(x[:, 1], a[:, 1], exact=True)
    close(x[1::2, None, ::-1], a[1::2, None, ::-1], exact=True)
    close(x[..., 2:], a[..., 2:], exact=True)
    r = x[7]
    assert not isinstance(r, ShardedArray)
    close(r, a[7], exact=True)
    assert float(x[-1, 0]) == a[-1, 0]
    with pytest.raises(IndexError):
        x[10]
    with pytest.raises(NotImplementedError, match="negative step"):
        x[::-1]
    x[2:5] = 0.0
    b = a.copy()
    b[2:5] = 0.0
    close(x, b, exact=True)
    x[6, 1] = 5.0
    b[6, 1] = 5.0
    close(x, b, exact=True)


# ---- reductions


@pytest.mark.parametrize("k,axis", [(1, 0), (3, 0), (2, 1), (4, 1)])
def test_reductions(k, axis):
    a = data((9, 4))
    x = xp.asarray(a, device=sh(k, axis=axis))
    for name in ("sum", "prod", "max", "min", "mean"):
        f, g = getattr(xp, name), getattr(np, name)
        close(f(x), g(a))
        close(f(x, axis=0), g(a, axis=0))
        close(f(x, axis=1, keepdims=True), g(a, axis=1, keepdims=True))
    for corr in (0, 1):
        close(xp.var(x, axis=0, correction=corr), np.var(a, axis=0, ddof=corr))
        close(xp.std(x, correction=corr), np.std(a, ddof=corr))
        close(xp.std(x, axis=(0, 1), keepdims=True, correction=corr),
              np.std(a, ddof=corr, keepdims=True))
    close(xp.argmax(x), np.argmax(a), exact=True)
    close(xp.argmin(x, axis=0), np.argmin(a, axis=0), exact=True)
    close(xp.argmax(x, axis=1, keepdims=True), np.argmax(a, axis=1)[:, None], exact=True)
    b = a > 0.3
    y = xp.asarray(b, device=sh(k, axis=axis))
    close(xp.any(y, axis=0), np.any(b, axis=0), exact=True)
    close(xp.all(y), np.all(b), exact=True)
    close(xp.count_nonzero(y, axis=1), np.count_nonzero(b, axis=1), exact=True)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint16, np.float32])
def test_reduction_dtypes(dtype):
    a = data((11, 2), dtype)
    x = xp.asarray(a, device=sh(3))
    s = xp.sum(x)
    ref = xp.sum(xp.asarray(a, device=HOME))
    assert s.dtype == ref.dtype
    close(s, host(ref), exact=dtype != np.float32)
    close(xp.max(x, axis=0), a.max(axis=0), exact=True)
    close(xp.argmax(x), np.argmax(a), exact=True)


def test_argmax_ties_and_nan_across_blocks():
    a = np.array([[1.0, 5.0], [5.0, 0.0], [5.0, 5.0], [0.0, 1.0]])
    for axis in (0, 1):
        x = xp.asarray(a, device=sh(3, axis=axis))
        assert int(xp.argmax(x)) == 1
        close(xp.argmax(x, axis=0), np.argmax(a, axis=0), exact=True)
    n = a.copy()
    n[2, 0] = np.nan
    n[3, 1] = np.nan
    x = xp.asarray(n, device=sh(2, axis=1))
    assert int(xp.argmax(x)) == 4 and int(xp.argmin(x)) == 4
    assert np.isnan(float(xp.max(x)))


def test_var_degenerate_counts():
    x = xp.asarray([1.0, 2.0], device=sh(3))
    assert np.isnan(float(xp.var(x, correction=2)))
    assert float(xp.var(x, correction=1)) == 0.5
    with pytest.raises(TypeError):
        xp.var(xp.asarray([1, 2], device=sh(2)))


@pytest.mark.parametrize("k", [1, 2, 4])
def test_generic_reduce_and_mapreduce(k):
    a = data((9, 3))
    x = xp.asarray(a, device=sh(k))
    close(xp.reduce(lambda p, q: p + q, x), a.sum())
    close(xp.reduce(ops.maximum, x, axis=0), a.max(axis=0))
    close(xp.reduce(ops.add, x, axis=0, init=10.0), a.sum(axis=0) + 10.0)
    close(xp.reduce(lambda p, q: p * q, x, axis=1), a.prod(axis=1))
    close(xp.mapreduce(lambda v: v * v, ops.add, x, axis=0, keepdims=True),
          (a * a).sum(axis=0, keepdims=True))
    lo, hi = xp.mapreduce(lambda v: (v, v), ops.minmax, x)
    assert float(lo) == a.min() and float(hi) == a.max()
    i = xp.asarray(np.arange(27).reshape(9, 3), device=sh(k))
    v, j = xp.reduce(ops.argmin, (x, i), axis=0)
    close(j, np.argmin(a, axis=0) * 3 + np.arange(3), exact=True)


def test_non_commutative_reduce_order():
    a = data((4, 6))
    x = xp.asarray(a, device=sh(3, axis=1))

    def first(p, q):
        return p

    close(xp.reduce(first, x, axis=1), a[:, 0], exact=True)   # along the split axis: in order
    with pytest.raises(NotImplementedError, match="commutative"):
        xp.reduce(first, x)


# ---- scans


@pytest.mark.parametrize("k", K)
def test_cumulative(k):
    a = data((9, 3))
    x = xp.asarray(a, device=sh(k))
    close(xp.cumulative_sum(x, axis=0), np.cumsum(a, axis=0))
    close(xp.cumulative_sum(x, axis=1), np.cumsum(a, axis=1))
    close(xp.cumulative_prod(x, axis=0), np.cumprod(a, axis=0))
    i = np.arange(1, 12, dtype=np.int32)
    y = xp.asarray(i, device=sh(k))
    r = xp.cumulative_sum(y, include_initial=True)
    close(r, np.concatenate([[0], np.cumsum(i)]), exact=True)
    assert r.device == sh(k)
    close(xp.cumulative_sum(y, dtype=xp.int8), np.cumsum(i).astype(np.int8), exact=True)


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("n", [1, 3, 10])
def test_cumulative_1d_carries(k, n):
    """1-D scans along the split axis take totals first and scan each block with its carry
    as init (blocks empty where n < k)."""
    a = data(n) + 1.5
    x = xp.asarray(a, device=sh(k))
    close(xp.cumulative_sum(x), np.cumsum(a))
    close(xp.cumulative_prod(x), np.cumprod(a))
    close(xp.cumulative_sum(x, include_initial=True), np.concatenate([[0.0], np.cumsum(a)]))
    close(xp.cumulative_sum(x, dtype=xp.float32), np.cumsum(a).astype(np.float32))
    b = xp.asarray((np.arange(n) % 2).astype(bool), device=sh(k))
    r = xp.cumulative_sum(b)
    assert r.dtype == xp.int64
    close(r, np.cumsum(np.arange(n) % 2), exact=True)
    close(xp.accumulate(lambda p, q: p if p > q else q, x),        # branches on values
          np.maximum.accumulate(a), exact=True)
    close(xp.accumulate(ops.add, x, init=2.0, include_initial=True),
          np.concatenate([[2.0], 2.0 + np.cumsum(a)]))


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("n", [1, 3, 10])
def test_cumulative_matrix_carries(k, n):
    """Scans of arrays of more dimensions along the split axis take totals first too: every
    block's sums along the axis, then each block scanned from its carries, one per scan
    (blocks empty where n < k)."""
    a = data((n, 35))
    x = xp.asarray(a, device=sh(k))
    close(xp.cumulative_sum(x, axis=0), np.cumsum(a, axis=0))
    close(xp.cumulative_prod(x, axis=0), np.cumprod(a, axis=0))
    r = xp.cumulative_sum(x, axis=0, include_initial=True)
    close(r, np.concatenate([np.zeros((1, 35)), np.cumsum(a, axis=0)]))
    assert r.device == x.device
    i = data((2, n, 3), dtype=np.int32, seed=1)
    y = xp.asarray(i, device=sh(k, axis=1))
    r = xp.cumulative_sum(y, axis=1)
    assert r.dtype == xp.int64
    close(r, np.cumsum(i, axis=1), exact=True)
    close(xp.cumulative_sum(y, axis=1, dtype=xp.int8), np.cumsum(i, axis=1).astype(np.int8),
          exact=True)
    close(xp.cumulative_prod(y, axis=1), np.cumprod(i.astype(np.int64), axis=1), exact=True)


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("n", [1, 3, 10])
def test_accumulate_carries(k, n):
    """``accumulate`` of one array along the split axis takes totals first with any
    operator: every block's ``reduce``, the totals scanned from ``init``, each block scanned
    from its carry (a value per scan for a matrix)."""
    a = data((n, 5))
    m = xp.asarray(a, device=sh(k))
    close(xp.accumulate(ops.add, m, axis=0), np.cumsum(a, axis=0))
    close(xp.accumulate(lambda p, q: p if p > q else q, m, axis=0),   # branches on values
          np.maximum.accumulate(a, axis=0), exact=True)
    close(xp.accumulate(ops.add, m, axis=0, init=2.0, include_initial=True),
          np.concatenate([np.full((1, 5), 2.0), 2.0 + np.cumsum(a, axis=0)]))
    iv = xp.asarray(np.arange(5.0), device=DEVICES[0])
    close(xp.accumulate(ops.add, m, axis=0, init=iv), np.arange(5.0) + np.cumsum(a, axis=0))
    v = xp.asarray(a[:, 0].copy(), device=sh(k))
    close(xp.accumulate(lambda p, q: p + q, v, init=1.0), 1.0 + np.cumsum(a[:, 0]))
    i = data((n, 3), dtype=np.int32, seed=2)
    r = xp.accumulate(ops.multiply, xp.asarray(i, device=sh(k)), axis=0)
    assert r.dtype == xp.int32
    close(r, np.cumprod(i, axis=0).astype(np.int32), exact=True)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_generic_scans(k):
    rng = np.random.default_rng(3)
    n = 10
    A, B = rng.uniform(0.5, 1.0, n), rng.standard_normal(n)
    ref_a, ref_b = np.cumprod(A), np.zeros(n)
    h = 0.0
    for t in range(n):
        h = A[t] * h + B[t]
        ref_b[t] = h
    s = sh(k)
    pa, pb = xp.asarray(A, device=s), xp.asarray(B, device=s)
    ra, rb = xp.accumulate(lambda p, q: (p[0] * q[0], q[0] * p[1] + q[1]), (pa, pb))
    close(ra, ref_a)
    close(rb, ref_b)
    _, rb = xp.accumulate(ops.affine, (pa, pb), init=(1.0, 2.0))
    close(rb, ref_b + 2.0 * ref_a)
    r = data((6, 2), seed=4)
    m = xp.asarray(r, device=s)
    close(xp.accumulate(lambda p, q: p if p > q else q, m, axis=0),     # branches on values
          np.maximum.accumulate(r, axis=0), exact=True)
    m = xp.asarray(np.arange(12.0).reshape(6, 2), device=s)
    close(xp.accumulate(ops.add, m, include_initial=True, init=1.0),
          np.concatenate([[1.0], 1.0 + np.cumsum(np.arange(12.0))]))
    with pytest.raises(NotImplementedError, match="exclusive"):
        xp.accumulate(ops.add, m, axis=0, exclusive=True)


@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("include_initial", [False, True])
def test_tuple_scans_along_the_split_axis_of_matrices(k, include_initial):
    """A tuple operator's scan along the split axis of (n, 3) arrays (uneven and empty blocks
    at k = 5), from ``init`` and with the initial row: the blocks' totals per column carried
    into each block's scan, as on one device."""
    rng = np.random.default_rng(11)
    A, B = rng.uniform(0.5, 1.0, (7, 3)), rng.standard_normal((7, 3))
    ref = xp.accumulate(ops.affine, (xp.asarray(A), xp.asarray(B)), axis=0, init=(1.0, 0.5),
                        include_initial=include_initial)
    s = sh(k)
    got = xp.accumulate(ops.affine, (xp.asarray(A, device=s), xp.asarray(B, device=s)), axis=0,
                        init=(1.0, 0.5), include_initial=include_initial)
    for g, r in zip(got, ref):
        close(g, np.asarray(r))


# ---- products


@pytest.mark.parametrize("k", [1, 2, 3])
def test_products(k):
    A, v, w = data((7, 5)), data(5, seed=1), data(7, seed=2)
    rows, cols = xp.asarray(A, device=sh(k)), xp.asarray(A, device=sh(k, axis=1))
    xv, xw = xp.asarray(v, device=HOME), xp.asarray(w, device=HOME)
    r = rows @ xv
    assert r.device == sh(k)
    close(r, A @ v)
    close(cols @ xv, A @ v)
    close(xw @ rows, w @ A)
    c = xw @ cols
    assert c.device == sh(k)
    close(c, w @ A)
    close(xp.asarray(w, device=sh(k)) @ rows, w @ A)
    close(rows @ xp.asarray(A.T, device=HOME), A @ A.T)
    close(xp.vecdot(rows, rows), np.sum(A * A, axis=1))
    close(xp.vecdot(rows, rows, axis=0), np.sum(A * A, axis=0))
    close(xp.linalg.vecdot(xp.asarray(w, device=sh(k)), xp.asarray(w, device=sh(k))), w @ w)
    close(xp.matvec(rows, xv, f=lambda a, b: a + b, op=ops.minimum),
          np.min(A + v, axis=1))
    close(xp.matvec(cols, xv, f=lambda a, b: a + b, op=ops.minimum, init=-1.0),
          np.minimum(np.min(A + v, axis=1), -1.0))
    close(xp.vecmat(xw, rows), w @ A)
    close(xp.vecmat(xw, cols, f=lambda a, b: a * b, op=ops.maximum), np.max(w[:, None] * A, axis=0))
    close(xp.matvec(rows, None, op=ops.add), A.sum(axis=1))


# ---- errors and dispatch


def test_no_sharded_path_says_so():
    x = xp.asarray(data((6, 2)), device=sh(2))
    for call in (lambda: xp.reshape(x, (12,)), lambda: xp.unique_values(x),
                 lambda: xp.linalg.svd(x), lambda: xp.concat([x, x]),
                 lambda: xp.fft.fft(x, axis=1), lambda: np.asarray(x)):
        with pytest.raises(NotImplementedError, match=rf"x\.to_device\('{HOME}'\)"):
            call()
    with pytest.raises(NotImplementedError, match=r"reshape\(\) has no sharded"):
        xp.reshape(x, (12,))
    with pytest.raises(NotImplementedError, match="split axis"):
        xp.sort(x, axis=0)
    from forge_array import _manipulation  # a path around the namespace: the same error
    with pytest.raises(NotImplementedError, match=r"flip\(\)"):
        _manipulation.flip(x)


def test_mismatched_shardings():
    a = data((6, 2))
    x = xp.asarray(a, device=sh(2))
    with pytest.raises(ValueError, match="mismatched shardings"):
        x + xp.asarray(a, device=sh(3))
    with pytest.raises(ValueError, match="mismatched shardings"):
        x + xp.asarray(a, device=sh(2, axis=1))
    with pytest.raises(ValueError, match="mismatched shardings"):
        x + x[1:]
    close(x + xp.asarray(a, device=sh(3)).to_device(x.device), 2 * a)
    y = x[1:]
    close(y.to_device(y.device) + xp.asarray(a[1:], device=sh(2)), 2 * a[1:])


def test_metadata_functions_and_unsharded_calls():
    x = xp.asarray(data((4, 2), np.float32), device=sh(2))
    assert xp.result_type(x, xp.float64) == xp.float64
    assert xp.isdtype(x.dtype, "real floating") and xp.can_cast(x, xp.float64)
    assert "sum" in xp.sharding.sharded_functions()
    y = xp.asarray([1.0, 2.0], device=HOME)        # unsharded calls are untouched
    assert type(xp.sum(y)) is xp.Array and float(xp.sum(y)) == 3.0


def test_hypothesis_blocks_match_numpy():
    hyp = pytest.importorskip("hypothesis")
    st = hyp.strategies

    @hyp.given(n=st.integers(0, 9), k=st.integers(1, 4), m=st.integers(1, 3))
    @hyp.settings(max_examples=8, deadline=None)
    def check(n, k, m):
        a = np.arange(n * m, dtype=np.float64).reshape(n, m) - 3.0
        x = xp.asarray(a, device=sh(k))
        close(x * 2.0 - 1.0, a * 2.0 - 1.0, exact=True)
        close(xp.sum(x, axis=0), a.sum(axis=0))
        close(xp.cumulative_sum(x, axis=0), np.cumsum(a, axis=0))

    check()


def test_more_block_functions():
    a = np.arange(20.0).reshape(5, 4)
    x = xp.asarray(a, device=sh(3))
    c = xp.asarray(a, device=sh(3, axis=1))
    close(xp.clip(x, min=2.0, max=7.0), np.clip(a, 2.0, 7.0), exact=True)
    close(xp.tril(x, k=1), np.tril(a, 1), exact=True)
    close(xp.triu(c, k=-1), np.triu(a, -1), exact=True)
    close(xp.flip(x, axis=1), a[:, ::-1], exact=True)
    close(xp.diff(x, axis=1), np.diff(a, axis=1), exact=True)
    close(xp.from_dlpack(a, device=sh(2)), a, exact=True)
    v = np.arange(4.0)
    close(xp.matvec(c, xp.asarray(v, device=sh(3)), f=lambda p, q: p * q, op=ops.add), a @ v)


def test_gpu_blocks():
    """On a GPU host: the CUDA paths (peer copies, per-device launches) with cuda:0 listed
    twice and with every GPU."""
    gpus = [d for d in xp.__array_namespace_info__().devices() if str(d).startswith("cuda")]
    if not gpus:
        pytest.skip("no GPU")
    a = data((1001, 7), np.float32)
    for devs in (["cuda:0", "cuda:0"], [str(d) for d in gpus] + ["cuda:0"]):
        s = xp.Sharding(devs)
        x = xp.asarray(a, device=s)
        assert [str(b.device) for b in x.shards] == devs
        close(xp.sum(x * 2.0 + 1.0), np.sum(a * 2.0 + 1.0, dtype=np.float64), rtol=1e-4)
        close(xp.std(x, axis=0), a.std(axis=0), rtol=1e-4)
        close(xp.argmax(x), np.argmax(a), exact=True)
        close(xp.cumulative_sum(x, axis=0), np.cumsum(a, axis=0, dtype=np.float64), atol=1e-3)
        close(x @ xp.asarray(a[0], device="cuda:0"), a @ a[0], rtol=1e-4, atol=1e-4)
        _, h = xp.accumulate(ops.affine, (x[:, 0] * 0.5, x[:, 1]))
        ref = np.zeros(1001)
        for t in range(1001):
            ref[t] = a[t, 0] * 0.5 * (ref[t - 1] if t else 0.0) + a[t, 1]
        close(h, ref, rtol=1e-4, atol=1e-4)
        close(x.to_device("cuda:0"), a, exact=True)


@pytest.mark.parametrize("k", [2, 3])
def test_operations_on_views(k):
    a = data((12, 5))
    x = xp.asarray(a, device=sh(k))
    v, av = x[1::3, ::-2], a[1::3, ::-2]          # uneven blocks of strided views
    close(xp.sum(v, axis=0), av.sum(axis=0))
    close(xp.std(v), av.std())
    close(xp.argmax(v), np.argmax(av), exact=True)
    close(xp.cumulative_sum(v, axis=0), np.cumsum(av, axis=0))
    t, at = x.T[::2], a.T[::2]                     # split along axis 1 after the transpose
    close(xp.mean(t, axis=1), at.mean(axis=1))
    close(xp.argmin(t, axis=1), np.argmin(at, axis=1), exact=True)
    close(xp.cumulative_prod(t, axis=1), np.cumprod(at, axis=1))
    close(t @ xp.asarray(a[:, 0], device=HOME), at @ a[:, 0])
    w = xp.asarray(av, device=sh(k))
    if k == 3:
        with pytest.raises(ValueError, match="mismatched"):
            v - w
    close(v.to_device(v.device) * 2 - w, av)              # v's blocks made even, as w's


@pytest.mark.parametrize("k", [1, 3])
def test_fuse_on_sharded_arrays(k):
    """``xp.fuse`` of sharded arrays: each block's element-wise steps computed inside the
    reduction or scan that consumes them, the same values as plain code."""
    a, b = data((13, 4)), data((13, 4), seed=1)
    x, y = xp.asarray(a, device=sh(k)), xp.asarray(b, device=sh(k))

    @xp.fuse
    def f(u, w):
        return xp.sum(u * w + 1), xp.mean(u - w, axis=0), xp.cumulative_sum(u * 2, axis=0)

    # a structure that earlier tests compiled with other constants (x * y + 2, ...) would
    # run eagerly here (codegen.MAX_CONSTANT_SETS): start from empty caches
    caches.clear_all()
    before = STATS["fused"]
    s, m, c = f(x, y)
    close(s, np.sum(a * b + 1))
    close(m, (a - b).mean(axis=0))
    close(c, np.cumsum(a * 2, axis=0))
    if SIMULATE or HOME != "cpu":  # kernels run: u*w+1, u-w and u*2 fused into each block's
        assert STATS["fused"] - before >= 3 * k
    g = xp.fuse(lambda u, w: u * w - 1)           # element-wise results stay sharded
    r = g(x, y)
    assert isinstance(r, ShardedArray) and r.device == x.device
    close(r, a * b - 1)


@pytest.mark.parametrize("k", [2, 4])
def test_spread_of_data_far_from_zero(k):
    """var/std across blocks (one Welford pass per block, Chan's merge) stay within float32's
    conditioning when the mean is 10^4 standard deviations from zero: a float32 value holds
    the deviations to about eps * 10^4 = 6e-4 of a standard deviation."""
    a = (data((1001, 5), np.float32) + np.float32(1e4)).astype(np.float32)
    x = xp.asarray(a, device=sh(k))
    ref = a.astype(np.float64)
    for axis in (0, None):
        close(xp.std(x, axis=axis, correction=1), ref.std(axis=axis, ddof=1), rtol=1e-3)
        close(xp.var(x, axis=axis), ref.var(axis=axis), rtol=2e-3)
    assert host(xp.std(x, axis=0)).dtype == np.float32


@pytest.mark.parametrize("dtype, shifted_min", [(np.float32, 0), (np.float32, 1 << 40),
                                                 (np.float64, 0)])
def test_spread_blocks_by_shifted_sums_or_welford(dtype, shifted_min):
    """The blocks' (count, mean, M2) from shifted float64 sums (float32 from the ``moments``
    tuning's size) or from Welford triples (float32 below it, float64) merge to the unsharded result;
    uneven blocks, an empty one, a constant column."""
    a = (data((37, 4), np.float64) * 3 + 20).astype(dtype)
    a[:, 2] = 5
    ref = a.astype(np.float64)
    tol = 1e-5
    with xp.flags(tuning={"moments": {"shifted_min": shifted_min}}):
        for k in (3, 40):   # 40 blocks of 37 rows: some empty
            x = xp.asarray(a, device=sh(k))
            for corr in (0, 1):
                close(xp.var(x, axis=0, correction=corr), ref.var(axis=0, ddof=corr), rtol=tol,
                      atol=tol)
                close(xp.std(x, axis=0, correction=corr), ref.std(axis=0, ddof=corr), rtol=tol,
                      atol=tol)
            assert host(xp.var(x, axis=0))[2] == 0.0
            assert host(xp.std(x, axis=0)).dtype == dtype


def test_first_use_inside_a_creation_call():
    """``xp.asarray(a, device=xp.Sharding(...))`` as a program's first line: the function is
    looked up before the sharded dispatch exists, and still makes a sharded array."""
    import subprocess
    import sys

    code = ("import numpy as np, forge_array as xp\n"
            "x = xp.asarray(np.arange(6.0), device=xp.Sharding(['cpu'] * 2))\n"
            "z = xp.zeros((4, 2), device=xp.Sharding(['cpu'] * 2, axis=1))\n"
            "print(type(x).__name__, [b.shape for b in x.shards], [b.shape for b in z.shards])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "ShardedArray [(3,), (3,)] [(4, 1), (4, 1)]"


def test_blocks_on_the_cpu_without_the_simulator():
    """A process with no simulator (a CPU machine's default): every sharded reduction of CPU
    blocks runs NumPy's functions and consults no GPU tuning."""
    import os
    import subprocess
    import sys

    code = ("import numpy as np, forge_array as xp\n"
            "a = np.random.default_rng(0).random((3001, 40)).astype(np.float32)\n"
            "x = xp.asarray(a, device=xp.Sharding(['cpu'] * 3))\n"
            "h = lambda r: np.asarray(r.to_device('cpu'))\n"
            "for name in ('sum', 'mean', 'var', 'std', 'max', 'min', 'prod'):\n"
            "    for axis in (None, 0, 1):\n"
            "        got = h(getattr(xp, name)(x, axis=axis))\n"
            "        ref = getattr(np, name)(a.astype(np.float64), axis=axis)\n"
            "        assert np.allclose(got, ref, rtol=1e-4), (name, axis)\n"
            "assert int(h(xp.argmax(x))) == int(np.argmax(a))\n"
            "assert np.allclose(h(xp.cumulative_sum(x, axis=0)), np.cumsum(a, axis=0), rtol=1e-5)\n"
            "v = xp.asarray(np.ones(40, np.float32))\n"
            "assert np.allclose(h(x @ v), a.sum(axis=1), rtol=1e-5)\n"
            "print('ok')")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update(FORGE_ARRAY_SIMULATE="0", FORGE_ARRAY_DEVICE="cpu")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"


def test_replicated_operands_are_copied_once_while_nothing_is_written(monkeypatch):
    """A small private array replicated to another device (``v`` of a sharded ``x @ v``)
    keeps its copy for later calls until anything is written through forge_array; shared
    memory (another library can write it) and large arrays are copied at every call."""
    from forge_array import _ownership
    from forge_array.sharding import _transfer

    moves = []

    def move(arr, src, dst):
        moves.append((src, dst))
        return arr.copy()

    monkeypatch.setattr(_transfer, "move", move)
    _transfer._REPLICAS.clear()
    v = np.arange(4.0)
    first = _transfer.replica(v, "gpu0", "gpu1")
    assert _transfer.replica(v, "gpu0", "gpu1") is first and len(moves) == 1
    _transfer.replica(v, "gpu0", "gpu2")                      # another destination: its own copy
    assert len(moves) == 2
    assert _transfer.replica(v[1:], "gpu0", "gpu1") is not first and len(moves) == 3   # a view elsewhere
    x = xp.asarray(np.zeros(3))
    x[0] = 1.0                                                # any write through forge_array
    assert _transfer.replica(v, "gpu0", "gpu1") is not first and len(moves) == 4
    assert _transfer.replica(v, "gpu0", "gpu1") is _transfer.replica(v, "gpu0", "gpu1") and len(moves) == 4
    _ownership.share(v)                                       # now another library can write it
    _transfer.replica(v, "gpu0", "gpu1")
    _transfer.replica(v, "gpu0", "gpu1")
    assert len(moves) == 6
    big = np.zeros(_transfer.REPLICA_BYTES // 8 + 1)
    _transfer.replica(big, "gpu0", "gpu1")
    _transfer.replica(big, "gpu0", "gpu1")
    assert len(moves) == 8
    w = np.arange(3.0)
    _transfer.replica(w, "gpu0", "gpu0")
    _transfer.replica(w, "gpu0", "gpu0")                      # the same device: move's (no copy), never kept
    assert moves[-2:] == [("gpu0", "gpu0")] * 2 and len(_transfer._REPLICAS) == 3
