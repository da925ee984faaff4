"""Scans: accumulate / cumulative_sum / cumulative_prod on the decoupled look-back kernels.

Differential against sequential references (NumPy in float64, or a Python loop for generic
operators). In the simulator the tuning table's tiny tiles (64 threads x 1-4 items) make
look-back windows span many tiles, and the simulator's weak-visibility model makes
predecessors look unpublished (asserted through ``scan_statistics``).
"""

import math
import os
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import forge_array as xp
import forge_array.dispatch.scan.plan
import forge_array.dispatch.scan.state
from forge_array import ops, runtime
from forge_array.dispatch import scan as dispatch_scan
from forge_array.kernels import scan_spec
from forge_array.primitives import accumulate, cumulative_prod, cumulative_sum
from forge_array.primitives import scan as pscan
from forge_array.runtime import tuning
from forge_array.testing import views

FAST = settings(max_examples=8, deadline=None)


def _np(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _tile(dtype="float32"):
    p = tuning.params("scan")
    return p["block"] * dispatch_scan.state.items_for(p, (np.dtype(dtype),))


def ref_scan(op, xs, axis=0, init=None, include_initial=False, exclusive=False, reverse=False):
    """Sequential reference: a Python loop along ``axis`` (tuples for tuple operators)."""
    tup = isinstance(xs, tuple)
    arrs = [np.moveaxis(np.asarray(a), axis, -1) for a in (xs if tup else (xs,))]
    if reverse:
        arrs = [a[..., ::-1] for a in arrs]
    bshape, n = arrs[0].shape[:-1], arrs[0].shape[-1]
    m = n + 1 if include_initial else n
    outs = [np.empty(bshape + (m,), dtype=object) for _ in arrs]
    for b in np.ndindex(*bshape):
        acc = init
        k = 0
        if include_initial or exclusive:
            for o, v in zip(outs, acc if tup else (acc,)):
                o[b + (0,)] = v
            k = 1
        for i in range(n):
            x = tuple(a[b + (i,)] for a in arrs) if tup else arrs[0][b + (i,)]
            acc = x if acc is None else op(acc, x)
            if i + k < m:
                for o, v in zip(outs, acc if tup else (acc,)):
                    o[b + (i + k,)] = v
    res = []
    for o in outs:
        if reverse:
            o = o[..., ::-1]
        res.append(np.moveaxis(o, -1, axis))
    return tuple(res) if tup else res[0]


def close(got, want, rtol=1e-5, atol=1e-6):
    got, want = _np(got), np.asarray(want)
    assert got.shape == want.shape
    if got.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want.astype(got.dtype))
    else:
        np.testing.assert_allclose(got.astype(np.complex128 if got.dtype.kind == "c" else np.float64),
                                   want.astype(np.complex128 if got.dtype.kind == "c" else np.float64),
                                   rtol=rtol, atol=atol)


def rand(bk, shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        a = rng.integers(0, 2, shape).astype(bool)
    elif dt.kind in "iu":
        a = rng.integers(-4 if dt.kind == "i" else 0, 5, shape).astype(dt)
    elif dt.kind == "c":
        a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    else:
        a = rng.standard_normal(shape).astype(dt)
    return bk.asarray(a)


# --------------------------------------------------------------------------- cumulative_sum


@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 255, 256, 257, 1000, 3001])
def test_cumsum_sizes_float32(bk, n):
    x = rand(bk, (n,), "float32", seed=n)
    close(cumulative_sum(x), np.cumsum(_np(x).astype(np.float64)), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
                                   "uint32", "uint64", "float32", "float64", "complex64",
                                   "complex128"])
def test_cumsum_dtypes(bk, dtype):
    x = rand(bk, (300,), dtype, seed=1)
    r = cumulative_sum(x)
    want_dt = {"b": np.int64, "i": np.int64, "u": np.uint64}.get(np.dtype(dtype).kind, dtype)
    if np.dtype(dtype).kind in "iu" and np.dtype(dtype).itemsize == 8:
        want_dt = dtype
    assert r.dtype == np.dtype(want_dt)
    close(r, np.cumsum(_np(x), dtype=np.dtype(want_dt) if np.dtype(dtype).kind in "iub" else
                       (np.complex128 if np.dtype(dtype).kind == "c" else np.float64)),
          rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype,acc", [("int8", "int8"), ("int32", "float64"), ("uint8", "int16"),
                                       ("float32", "float64"), ("int64", "int32")])
def test_cumsum_dtype_argument(bk, dtype, acc):
    x = rand(bk, (200,), dtype, seed=2)
    r = cumulative_sum(x, dtype=acc)
    assert r.dtype == np.dtype(acc)
    with np.errstate(all="ignore"):
        close(r, np.cumsum(_np(x), dtype=acc))


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64", "uint16"])
def test_cumprod(bk, dtype):
    rng = np.random.default_rng(3)
    x = bk.asarray(rng.choice([1, 1, 2, 1], size=150).astype(dtype)
                   if np.dtype(dtype).kind in "iu" else rng.uniform(0.9, 1.1, 150).astype(dtype))
    r = cumulative_prod(x, include_initial=True)
    want = np.concatenate([[1], np.cumprod(_np(x).astype(np.float64))])
    close(r, want, rtol=1e-4)


def test_cumsum_include_initial_and_axes(bk):
    x = rand(bk, (3, 40, 5), "int32", seed=4)
    for ax in (0, 1, 2, -1):
        r = cumulative_sum(x, axis=ax, include_initial=True)
        ref = np.cumsum(_np(x).astype(np.int64), axis=ax)
        ref = np.concatenate([np.zeros_like(np.take(ref, [0], axis=ax)), ref], axis=ax)
        close(r, ref)


def test_cumsum_axis_required(bk):
    with pytest.raises(ValueError):
        cumulative_sum(bk.zeros((2, 3)))
    with pytest.raises(ValueError):
        cumulative_sum(bk.zeros(()))


# --------------------------------------------------------------------------- layouts


@pytest.mark.parametrize("shape", [(37, 50), (50, 37), (3, 300), (300, 3), (70, 9), (5, 1), (1, 600)])
@pytest.mark.parametrize("axis", [0, 1])
def test_matrix_axes(bk, shape, axis):
    x = rand(bk, shape, "float32", seed=5)
    close(cumulative_sum(x, axis=axis), np.cumsum(_np(x).astype(np.float64), axis=axis),
          rtol=1e-4, atol=1e-4)


def test_transposes_and_3d(bk):
    x = rand(bk, (6, 7, 40), "float64", seed=6)
    xt = x.transpose(2, 0, 1)
    for ax in range(3):
        close(cumulative_sum(xt, axis=ax), np.cumsum(_np(xt), axis=ax))


@pytest.mark.parametrize("case", ["offset", "reverse", "step", "zero", "offset2d", "neg2d"])
def test_views(bk, case):
    base = rand(bk, (2000,), "float32", seed=7)
    if case == "offset":
        x = base[3:1500]
    elif case == "reverse":
        x = base[::-1]
    elif case == "step":
        x = base[5::3]
    elif case == "zero":
        x = bk.broadcast_to(base[:1], (700,))
    elif case == "offset2d":
        x = base[1:1001].reshape(20, 50)[:, 1:]
    else:
        x = base[:1000].reshape(20, 50)[::-1, ::-2]
    axis = x.ndim - 1
    close(cumulative_sum(x, axis=axis), np.cumsum(_np(x).astype(np.float64), axis=axis),
          rtol=1e-4, atol=1e-4)


@FAST
@given(data=st.data())
def test_views_hypothesis(bk, data):
    shape = data.draw(st.sampled_from([(40,), (3, 33), (33, 3), (2, 3, 9)]))
    x = data.draw(views(np.float64, shape, xp=bk))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    kw = data.draw(st.sampled_from([{}, {"include_initial": True}, {"exclusive": True},
                                    {"reverse": True}, {"init": 2.5}]))
    got = accumulate(ops.add, x, axis=axis, **kw)
    want = ref_scan(lambda a, b: a + b, _np(x), axis=axis % len(shape),
                    init=kw.get("init", 0.0 if ("include_initial" in kw or "exclusive" in kw) else None),
                    include_initial="include_initial" in kw, exclusive="exclusive" in kw,
                    reverse="reverse" in kw)
    close(got, want.astype(np.float64), rtol=1e-9, atol=1e-9)


def test_accumulate_axis_none_flattens(bk):
    x = rand(bk, (4, 5, 6), "int32", seed=8)
    close(accumulate(ops.add, x), np.cumsum(_np(x)))


# --------------------------------------------------------------------------- options


@pytest.mark.parametrize("n", [1, 33, 300])
def test_exclusive_include_initial_reverse_init(bk, n):
    x = rand(bk, (n,), "int64", seed=9)
    xn = _np(x)
    inc = np.cumsum(xn)
    close(accumulate(ops.add, x, exclusive=True), np.concatenate([[0], inc[:-1]]))
    close(accumulate(ops.add, x, include_initial=True), np.concatenate([[0], inc]))
    close(accumulate(ops.add, x, reverse=True), np.cumsum(xn[::-1])[::-1])
    close(accumulate(ops.add, x, init=5), 5 + inc)
    close(accumulate(ops.add, x, init=5, include_initial=True), np.concatenate([[5], 5 + inc]))
    close(accumulate(ops.add, x, reverse=True, include_initial=True),
          np.concatenate([np.cumsum(xn[::-1])[::-1], [0]]))


def _per_scan_reference(op, xn, init, axis, **kw):
    """:func:`ref_scan` of every scan of ``xn`` along ``axis`` from its own ``init`` value."""
    xm = np.moveaxis(xn, axis, -1)
    rows = [ref_scan(op, xm[b], init=init[b], **kw) for b in np.ndindex(*xm.shape[:-1])]
    out = np.array(rows, dtype=object).reshape(xm.shape[:-1] + (len(rows[0]),))
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("shape,axis", [((70, 37), 0), ((33, 31), 0), ((5, 3, 40), 0),
                                        ((9, 33), 1), ((3, 5, 7), 1), ((130, 2), 0), ((1, 64), 0)])
@pytest.mark.parametrize("kw", [{}, {"include_initial": True}, {"exclusive": True},
                                {"reverse": True}], ids=["inclusive", "initial", "exclusive", "reverse"])
def test_init_per_scan(bk, shape, axis, kw):
    """``init`` as an array of ``x``'s shape without ``axis``: every scan starts from its own
    value (on the GPU the column kernel reads one init per batch row)."""
    x = rand(bk, shape, "int64", seed=3)
    bshape = shape[:axis] + shape[axis + 1:]
    init = rand(bk, bshape, "int64", seed=4) * 7
    want = _per_scan_reference(lambda a, b: a + b, _np(x), _np(init), axis, **kw)
    close(accumulate(ops.add, x, axis=axis, init=init, **kw), want)
    want = _per_scan_reference(max, _np(x), _np(init), axis, **kw)
    close(accumulate(ops.maximum, x, axis=axis, init=init, **kw), want)
    if not kw.get("exclusive") and not kw.get("reverse"):
        inc = kw.get("include_initial", False)
        xf = rand(bk, shape, "float32", seed=5)
        f0 = rand(bk, bshape, "float32", seed=6)
        want = _per_scan_reference(lambda a, b: a + b, _np(xf).astype(np.float64),
                                   _np(f0).astype(np.float64), axis, include_initial=inc)
        close(cumulative_sum(xf, axis=axis, init=f0, include_initial=inc), want.astype(np.float64),
              rtol=1e-4, atol=1e-4)
        xi = rand(bk, shape, "int32", seed=7)
        want = _per_scan_reference(lambda a, b: a * b, _np(xi).astype(np.int64), _np(init), axis,
                                   include_initial=inc)
        close(cumulative_prod(xi, axis=axis, init=init, include_initial=inc), want)


def test_init_per_scan_errors(bk):
    x = rand(bk, (6, 4), "int64")
    with pytest.raises(ValueError, match="does not match"):
        accumulate(ops.add, x, axis=0, init=bk.zeros(6, dtype=np.int64))
    with pytest.raises(ValueError, match="deterministic"):
        accumulate(ops.add, x, axis=0, init=bk.zeros(4, dtype=np.int64), deterministic=True)
    with pytest.raises(ValueError, match="one array"):
        accumulate(lambda p, q: (p[0] + q[0], p[1] + q[1]), (x, x), axis=0,
                   init=(bk.zeros(4, dtype=np.int64), bk.zeros(4, dtype=np.int64)))


def test_out_views(bk):
    x = rand(bk, (20, 30), "float64", seed=10)
    big = bk.zeros((40, 31))
    out = big[::2, 1:]
    r = accumulate(ops.add, x, axis=1, out=out)
    assert r is out
    close(big[::2, 1:], np.cumsum(_np(x), axis=1))
    assert float(_np(big)[1::2].sum()) == 0.0 and float(_np(big)[:, 0].sum()) == 0.0
    with pytest.raises(ValueError):
        accumulate(ops.add, x, axis=1, out=bk.zeros((20, 31)))
    with pytest.raises(ValueError):
        accumulate(ops.add, x, axis=1, out=bk.zeros((20, 30), dtype=np.float32))


def test_out_aliasing_input(bk):
    x = rand(bk, (500,), "int32", seed=11)
    want = np.cumsum(_np(x)).astype(np.int32)
    accumulate(ops.add, x, out=x)
    close(x, want)


# --------------------------------------------------------------------------- generic operators


def matmul2(p, q):
    return (p[0] * q[0] + p[1] * q[2], p[0] * q[1] + p[1] * q[3],
            p[2] * q[0] + p[3] * q[2], p[2] * q[1] + p[3] * q[3])


def maxplus2(p, q):
    return (max(p[0] + q[0], p[1] + q[2]), max(p[0] + q[1], p[1] + q[3]),
            max(p[2] + q[0], p[3] + q[2]), max(p[2] + q[1], p[3] + q[3]))


def quatmul(p, q):
    a1, b1, c1, d1 = p
    a2, b2, c2, d2 = q
    return (a1 * a2 - b1 * b2 - c1 * c2 - d1 * d2,
            a1 * b2 + b1 * a2 + c1 * d2 - d1 * c2,
            a1 * c2 - b1 * d2 + c1 * a2 + d1 * b2,
            a1 * d2 + b1 * c2 - c1 * b2 + d1 * a2)


def running_max_index(p, q):
    if q[0] > p[0]:
        return q
    return p


@pytest.mark.parametrize("n", [1, 33, 400])
def test_affine_recurrence(bk, n):
    rng = np.random.default_rng(12)
    a = rng.uniform(0.5, 1.0, n)
    b = rng.standard_normal(n)
    _, h = accumulate(ops.affine, (bk.asarray(a), bk.asarray(b)))
    acc, want = 0.0, []
    for i in range(n):
        acc = a[i] * acc + b[i]
        want.append(acc)
    close(h, want, rtol=1e-9, atol=1e-9)


def test_affine_float32_columns(bk):
    rng = np.random.default_rng(13)
    a = rng.uniform(0.5, 1.0, (90, 40)).astype(np.float32)
    b = rng.standard_normal((90, 40)).astype(np.float32)
    got = accumulate(ops.affine, (bk.asarray(a), bk.asarray(b)), axis=0)
    want = ref_scan(ops.affine.fn, (a.astype(np.float64), b.astype(np.float64)), axis=0)
    for g, w in zip(got, want):
        assert g.dtype == np.float32
        close(g, w.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_matrix_products_noncommutative(bk):
    rng = np.random.default_rng(14)
    n = 300
    m = tuple(bk.asarray(rng.uniform(-1, 1, n) * 0.7) for _ in range(4))
    got = accumulate(matmul2, m)
    want = ref_scan(matmul2, tuple(_np(c) for c in m))
    for g, w in zip(got, want):
        close(g, w.astype(np.float64), rtol=1e-9, atol=1e-12)
    got = accumulate(matmul2, m, reverse=True, init=(1.0, 0.0, 0.0, 1.0), include_initial=True)
    want = ref_scan(matmul2, tuple(_np(c) for c in m), reverse=True, init=(1.0, 0.0, 0.0, 1.0),
                    include_initial=True)
    for g, w in zip(got, want):
        close(g, w.astype(np.float64), rtol=1e-9, atol=1e-12)


def test_max_plus_int(bk):
    rng = np.random.default_rng(15)
    m = tuple(bk.asarray(rng.integers(-9, 9, 260).astype(np.int32)) for _ in range(4))
    got = accumulate(maxplus2, m)
    want = ref_scan(maxplus2, tuple(_np(c).astype(np.int64) for c in m))
    for g, w in zip(got, want):
        close(g, w)


def test_quaternions(bk):
    rng = np.random.default_rng(16)
    q = rng.standard_normal((4, 200))
    q /= np.linalg.norm(q, axis=0)
    got = accumulate(quatmul, tuple(bk.asarray(c) for c in q))
    want = ref_scan(quatmul, tuple(q))
    for g, w in zip(got, want):
        close(g, w.astype(np.float64), rtol=1e-9, atol=1e-9)


def test_running_max_with_index(bk):
    rng = np.random.default_rng(17)
    v = rng.integers(0, 50, (3, 120)).astype(np.float32)
    idx = np.broadcast_to(np.arange(120, dtype=np.int64), (3, 120))
    gv, gi = accumulate(running_max_index, (bk.asarray(v), bk.asarray(np.ascontiguousarray(idx))), axis=1)
    wv, wi = ref_scan(running_max_index, (v, idx), axis=1)
    close(gv, wv.astype(np.float64))
    close(gi, wi.astype(np.int64))


def test_logaddexp(bk):
    x = rand(bk, (5, 80), "float64", seed=18)
    got = accumulate(ops.logaddexp, x, axis=1, include_initial=True)
    want = np.logaddexp.accumulate(_np(x), axis=1)
    close(got[:, 1:], want, rtol=1e-12)
    assert np.all(_np(got)[:, 0] == -np.inf)


def test_plain_function_scalar_op(bk):
    x = rand(bk, (150,), "int16", seed=19)
    close(accumulate(lambda a, b: max(a, b), x), np.maximum.accumulate(_np(x)))
    close(accumulate(lambda a, b: a if a < b else b, x), np.minimum.accumulate(_np(x)))
    close(accumulate(lambda a, b: a ^ b, x), np.bitwise_xor.accumulate(_np(x)))


# --------------------------------------------------------------------------- 128-bit paths, plan replay


def _phased(bk, n, dtype, offset, seed):
    """``n`` elements starting ``offset`` elements after a 16-byte boundary."""
    isz = np.dtype(dtype).itemsize
    base = rand(bk, (n + 32,), dtype, seed=seed)
    k = (-(runtime.misalignment(base) // isz)) % (16 // isz)
    return base[k + offset:k + offset + n]


@pytest.mark.parametrize("offset,kw", [(0, {}), (3, {}), (1, {"include_initial": True}),
                                       (0, {"include_initial": True}), (2, {"exclusive": True})])
def test_vector_load_store_phases(bk, offset, kw):
    # input tiles are shifted by `lead` = offset; output stores are 128-bit when the output
    # has the same phase (offset == shift mod 4), scalar otherwise; tile edges partial
    n = 2 * _tile("int32") + 5
    x = _phased(bk, n, "int32", offset, seed=30 + offset)
    xn = _np(x).astype(np.int64)
    inc = np.cumsum(xn)
    want = {"include_initial": np.concatenate([[0], inc]),
            "exclusive": np.concatenate([[0], inc[:-1]])}.get(next(iter(kw), None), inc)
    close(accumulate(ops.add, x, **kw), want.astype(np.int32))


@pytest.mark.parametrize("cols", [4 * 33, 4 * 33 + 2])
def test_vector_rows(bk, cols):
    # batched rows: 128-bit loads and stores when the row stride is a multiple of 4 elements
    x = rand(bk, (3, cols), "float32", seed=cols)
    for kw in ({}, {"include_initial": True}):
        want = np.cumsum(_np(x).astype(np.float64), axis=1)
        if kw:
            want = np.concatenate([np.zeros((3, 1)), want], axis=1)
        close(accumulate(ops.add, x, axis=1, **kw), want, rtol=1e-4, atol=1e-4)


def test_plan_replay(bk, monkeypatch):
    """A second call with operands of the same layouts replays the cached plan (no
    planning), with the right offsets for reversed and flattened views and tuples."""
    n = 2 * _tile("float32") + 9
    calls = [
        lambda x, y: (cumulative_sum(x), np.cumsum(_np(x).astype(np.float64))),
        lambda x, y: (accumulate(ops.add, x, reverse=True, include_initial=True),
                      ref_scan(lambda a, b: a + b, _np(x).astype(np.float64), init=0.0,
                               include_initial=True, reverse=True)),
        lambda x, y: (accumulate(ops.add, x[1:], exclusive=True),
                      np.concatenate([[0.0], np.cumsum(_np(x)[1:-1].astype(np.float64))])),
        lambda x, y: (accumulate(ops.add, x.reshape(-1)[: n - n % 3].reshape(3, -1)[:, ::2]),
                      np.cumsum(_np(x)[: n - n % 3].reshape(3, -1)[:, ::2].astype(np.float64))),
        lambda x, y: (accumulate(ops.affine, (x, y))[1],
                      ref_scan(ops.affine.fn, (_np(x).astype(np.float64),
                                               _np(y).astype(np.float64)))[1]),
        lambda x, y: (cumulative_sum(bk.stack([x, y]), axis=0),
                      np.cumsum(np.stack([_np(x), _np(y)]).astype(np.float64), axis=0)),
    ]
    for k, call in enumerate(calls):
        got, want = call(rand(bk, (n,), "float32", seed=50 + k), rand(bk, (n,), "float32", seed=60 + k))
        close(got, want.astype(np.float64), rtol=1e-4, atol=1e-4)
    plans = dict(dispatch_scan.fast_plans())

    def no_planning(*a, **kw):
        raise AssertionError("planned again")

    monkeypatch.setattr(dispatch_scan.plan, "plan_scan", no_planning)
    for k, call in enumerate(calls):
        got, want = call(rand(bk, (n,), "float32", seed=70 + k), rand(bk, (n,), "float32", seed=80 + k))
        close(got, want.astype(np.float64), rtol=1e-4, atol=1e-4)
    assert len(dispatch_scan.fast_plans()) == len(plans)
    states = {id(p.state): p.state for p in plans.values() if p.state is not None}
    for st_ in states.values():  # tile states grown in place by a larger scan: still valid
        st_.grow(st_.slots + 64)
    x = rand(bk, (n,), "float32", seed=90)
    close(cumulative_sum(x), np.cumsum(_np(x).astype(np.float64)), rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------- look-back and determinism


def test_lookback_meets_unpublished_predecessors(bk, sim):
    before = pscan.scan_statistics()
    n = 12 * _tile("float32")
    x = bk.ones(n, dtype=np.float32)
    close(cumulative_sum(x), np.arange(1, n + 1))
    after = pscan.scan_statistics()
    if sim:
        assert after["spins"] > before["spins"]


def test_lookback_beyond_one_window(bk):
    """More tiles than one look-back window holds (32 x ``lookback`` predecessors): a tile
    whose window has only aggregates goes further back; exact with integers."""
    lb = tuning.params("scan").get("lookback", 4)
    n = (32 * lb + 9) * _tile("int32") + 5
    x = bk.asarray((np.arange(n) % 7 - 3).astype(np.int32))
    close(cumulative_sum(x, dtype=np.int32), np.cumsum(_np(x)).astype(np.int32))


@pytest.mark.parametrize("window", [False, True], ids=["groups", "window"])
def test_deterministic_reproducible(bk, sim, monkeypatch, window):
    """Deterministic scans give the same bits whatever the timing (in the simulator: whatever
    order its memory model makes stores visible in): with the group look-back (tiles wait for
    group aggregates and a PREFIX groups back) and with the fixed window (a PREFIX 32 x
    det_lookback tiles back)."""
    if window:
        _override(monkeypatch, scan={"det_group": 0})
    rng = np.random.default_rng(20)
    # more tiles than the simulator's windows and groups span
    x = bk.asarray(rng.standard_normal(34 * _tile("float32")).astype(np.float32))
    results = []
    for seed in (1, 2) if sim else (1, 2, 3):
        if sim:
            from forge_array.intrinsics import sim_impl
            sim_impl.memory_model.reset(seed=seed)
        results.append(_np(accumulate(ops.add, x, deterministic=True)))
    assert all(np.array_equal(results[0], r) for r in results[1:])
    close(results[0], np.cumsum(_np(x).astype(np.float64)), rtol=1e-3, atol=1e-3)
    y = bk.asarray(rng.standard_normal((70, 30)))
    a = _np(accumulate(ops.add, y, axis=0, deterministic=True))
    b = _np(accumulate(ops.add, y, axis=0, deterministic=True))
    assert np.array_equal(a, b)
    close(a, np.cumsum(_np(y), axis=0), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("flags", [{}, {"exclusive": True}, {"reverse": True},
                                   {"include_initial": True}],
                         ids=["inclusive", "exclusive", "reverse", "include_initial"])
def test_deterministic_rows_in_groups(bk, sim, flags):
    """The group look-back on a batch of rows along the last axis: rows of 13 tiles and 2
    (groups restart at each row's first tile, a row's last tile may end a group), strided
    rows, an int32 sum exact; the bits the same whatever the memory model's order."""
    T = _tile("float32")
    rng = np.random.default_rng(22)
    a = rng.standard_normal((2, 13 * T + 5)).astype(np.float32)
    x = bk.asarray(a)[:, ::-1]
    s = bk.asarray(rng.standard_normal((4, 2 * T)).astype(np.float32))
    runs = []
    for seed in (3, 4) if sim else (1, 2):
        if sim:
            from forge_array.intrinsics import sim_impl
            sim_impl.memory_model.reset(seed=seed)
        runs.append([_np(accumulate(ops.add, v, axis=-1, deterministic=True, **flags)) for v in (x, s)])
    assert all(np.array_equal(p, q) for p, q in zip(runs[0], runs[1]))
    for got, v in zip(runs[0], (x, s)):
        want = ref_scan(ops.add.fn, _np(v).astype(np.float64), axis=-1, init=0.0, **flags)
        close(got, want.astype(np.float64), rtol=1e-4, atol=1e-3 * math.sqrt(v.shape[-1]))
    i = bk.asarray(rng.integers(-9, 10, (2, 9 * T + 3)).astype(np.int32))
    got = accumulate(ops.add, i, axis=-1, deterministic=True, **flags)
    close(got, ref_scan(ops.add.fn, _np(i).astype(np.int64), axis=-1, init=0, **flags).astype(np.int64))


def test_deterministic_tuple(bk):
    rng = np.random.default_rng(21)
    n = 6 * _tile("float64")
    a, b = bk.asarray(rng.uniform(0.9, 1.0, n)), bk.asarray(rng.standard_normal(n))
    r1 = accumulate(ops.affine, (a, b), deterministic=True)
    r2 = accumulate(ops.affine, (a, b), deterministic=True)
    assert all(np.array_equal(_np(p), _np(q)) for p, q in zip(r1, r2))


@pytest.mark.parametrize("over", [{"ticket": "block"}, {"ticket": "persist", "persist": 1},
                                  {"wide": False, "release": True, "spin_ns": 8},
                                  {"lookback": 4}, {"lookback": 2}],
                         ids=["block", "persist", "narrow-release-spin", "lookback4", "lookback2"])
def test_tile_variants(bk, monkeypatch, over):
    """Every tuning variant of the tile and column kernels (ticket modes, 16-byte or flag
    status words, release fences, back-off, look-back widths: ``lookback`` predecessors per
    lane, for the column kernel too) on multi-tile rows, batches of rows, rows of one tile,
    the column kernel, 16-byte packed values (float64, (float32, float32)) and
    flag-and-slot values ((float64, float64))."""
    monkeypatch.setitem(tuning.OVERRIDES, "scan", dict(tuning.OVERRIDES.get("scan", {}), **over))
    if "lookback" in over:
        monkeypatch.setitem(tuning.OVERRIDES, "scan_columns",
                            dict(tuning.OVERRIDES.get("scan_columns", {}), lookback=over["lookback"]))
    monkeypatch.setattr(tuning, "_CACHE", {})
    monkeypatch.setattr(dispatch_scan.state.THREAD_LOCAL, "plans", {}, raising=False)
    T = _tile("float32")
    rng = np.random.default_rng(31)
    x = rand(bk, (5 * T + 3,), "float32", seed=30)
    close(cumulative_sum(x), np.cumsum(_np(x).astype(np.float64)), rtol=1e-4, atol=1e-4)
    for v in (x[1:], x[3:-2]):  # misaligned: the first tile starts `lead` elements early
        close(cumulative_sum(v), np.cumsum(_np(v).astype(np.float64)), rtol=1e-4, atol=1e-4)
    y = bk.asarray(rng.standard_normal(4 * _tile("float64") + 1))
    close(cumulative_sum(y, include_initial=True), np.concatenate([[0.0], np.cumsum(_np(y))]))
    z = bk.asarray(rng.integers(-9, 9, (3, 2 * T + 5)).astype(np.int8))
    close(cumulative_sum(z, axis=1), np.cumsum(_np(z).astype(np.int64), axis=1))
    w = bk.asarray(rng.standard_normal((70, 9)).astype(np.float32))   # rows of one tile
    close(cumulative_sum(w, axis=1), np.cumsum(_np(w).astype(np.float64), axis=1), rtol=1e-4, atol=1e-4)
    close(cumulative_sum(w, axis=0), np.cumsum(_np(w).astype(np.float64), axis=0), rtol=1e-4, atol=1e-4)
    for dt in ("float32", "float64"):
        n = 3 * _tile(dt) + 7
        a = bk.asarray(rng.uniform(0.5, 1.0, n).astype(dt))
        b = bk.asarray(rng.standard_normal(n).astype(dt))
        A, H = accumulate(ops.affine, (a, b))
        wa, wh = ref_scan(ops.affine.fn, (_np(a).astype(np.float64), _np(b).astype(np.float64)))
        close(A, wa.astype(np.float64), rtol=1e-4)
        close(H, wh.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_status_words_roundtrip():
    """pack_words / unpack_words keep every member's bits (simulator or GPU typing)."""
    from forge_array.intrinsics import words as fw

    assert fw.words_for(("float32",)) == 2 and fw.words_for(("int64",)) == 4
    assert fw.words_for(("float32",) * 4) is None
    if not runtime.SIMULATE:
        return
    v = (np.bool_(True), np.int8(-3), np.float32(1.25), np.uint16(7))
    w = fw.pack_words(np.uint32(41), v, 4)
    assert len(w) == 4 and w[0] == 41
    assert fw.unpack_words(w, v) == v
    c = (np.complex64(1 - 2j),)
    assert fw.unpack_words(fw.pack_words(np.uint32(1), c, 4), c) == c
    from forge_array.intrinsics import sim_impl

    model = sim_impl.memory_model
    saved = model.seed, model.stale
    try:
        # a relaxed load may see any published value not older than one it already saw:
        # with stale reads off it sees the newest, with them on the old zeros or w
        model.reset(stale=0.0)
        buf = dispatch_scan.state._zeros16(np, 8, np.uint32)
        fw.store_relaxed_words(buf, 4, w)
        assert fw.load_relaxed_words(buf, 4, 4) == w
        model.reset(seed=7, stale=1.0)
        buf = dispatch_scan.state._zeros16(np, 8, np.uint32)
        fw.store_relaxed_words(buf, 4, w)
        seen = [fw.load_relaxed_words(buf, 4, 4) for _ in range(40)]
        assert all(s in (w, (np.uint32(0),) * 4) for s in seen)
        assert w in seen  # stale runs are bounded, so the newest value does show up
    finally:
        model.reset(seed=saved[0], stale=saved[1])
    with pytest.raises(ValueError):
        fw.store_relaxed_words(buf, 2, w)


# --------------------------------------------------------------------------- errors


def test_errors(bk):
    x = bk.zeros(10, dtype=np.float32)
    with pytest.raises(TypeError, match="numba"):
        accumulate(lambda a, b: a.nosuchattr + b, x)
    with pytest.raises(TypeError):
        accumulate(lambda a, b: a, (x, x))          # scalar op on a tuple? returns a tuple: fine
        accumulate(lambda p, q: p[0] + q[0], (x, x))  # returns a scalar for pairs
    with pytest.raises(TypeError):
        accumulate(lambda a, b: a + 1j * b, x)     # complex result for float32 elements
    with pytest.raises(TypeError):
        accumulate(3, x)
    with pytest.raises(ValueError):
        accumulate(ops.affine, (x, bk.zeros(11, dtype=np.float32)))
    with pytest.raises(np.exceptions.AxisError):
        accumulate(ops.add, x, axis=1)
    with pytest.raises(IndexError):
        accumulate(ops.add, x, axis=-2)
    with pytest.raises(ValueError):
        accumulate(lambda a, b: a + b, x, include_initial=True)   # no identity, no init
    with pytest.raises(ValueError):
        accumulate(ops.add, x, include_initial=True, exclusive=True)
    with pytest.raises(ValueError):
        accumulate(ops.affine, (x, x), init=(1.0,))


# --------------------------------------------------------------------------- CPU path


def test_cpu_path_matches(monkeypatch):
    monkeypatch.setattr(pscan.generic.runtime, "kernels_available", lambda a: False)
    x = np.arange(24, dtype=np.int32).reshape(4, 6)
    close(cumulative_sum(x, axis=1, include_initial=True),
          np.concatenate([np.zeros((4, 1)), np.cumsum(x, axis=1)], axis=1))
    a, b = np.full(5, 0.5), np.ones(5)
    _, h = accumulate(ops.affine, (a, b), reverse=True)
    want = ref_scan(ops.affine.fn, (a, b), reverse=True)[1]
    close(h, want.astype(np.float64))
    close(accumulate(matmul2, tuple(np.ones(3) for _ in range(4)), exclusive=True,
                     init=(1.0, 0.0, 0.0, 1.0))[0], [1.0, 1.0, 2.0])
    y = np.arange(-12, 12, dtype=np.int64).reshape(4, 6)[::-1]
    init = np.arange(6, dtype=np.int64) * 3 - 8
    for op, f in ((ops.add, lambda a, b: a + b), (ops.maximum, max)):  # a ufunc, numba's loop
        for kw in ({}, {"include_initial": True}, {"exclusive": True}, {"reverse": True}):
            close(accumulate(op, y, axis=0, init=init, **kw),
                  _per_scan_reference(f, y, init, 0, **kw))


# --------------------------------------------------------------------------- namespace


def test_out_replay(bk, monkeypatch):
    """A call with ``out=`` replays the plan of an earlier call with operands and outputs of
    the same layouts (no planning), writing where ``out`` says on new data; another output
    layout, or an output of the wrong shape or dtype, takes the full path."""
    n = 2 * _tile("float32") + 9
    big = bk.zeros((2 * n + 2,), dtype=np.float32)
    wide = bk.zeros((n + 1,), dtype=np.float32)

    def calls():
        return [
            (lambda x, y: accumulate(ops.add, x, out=bk.empty((n,), dtype=np.float32)),
             lambda x, y: np.cumsum(_np(x).astype(np.float64))),
            (lambda x, y: accumulate(ops.add, x, out=big[1::2][:n]),   # offset, stride 2
             lambda x, y: np.cumsum(_np(x).astype(np.float64))),
            (lambda x, y: accumulate(ops.add, x, include_initial=True, out=wide),
             lambda x, y: np.concatenate([[0.0], np.cumsum(_np(x).astype(np.float64))])),
            (lambda x, y: accumulate(ops.add, x, reverse=True, out=big[: 2 * n][::-2]),
             lambda x, y: np.cumsum(_np(x)[::-1].astype(np.float64))[::-1]),
            (lambda x, y: accumulate(ops.affine, (x, y), out=(bk.empty((n,), dtype=np.float32),
                                                               bk.empty((n,), dtype=np.float32)))[1],
             lambda x, y: ref_scan(ops.affine.fn, (_np(x).astype(np.float64),
                                                   _np(y).astype(np.float64)))[1]),
        ]

    for k, (call, ref) in enumerate(calls()):
        x, y = rand(bk, (n,), "float32", seed=150 + k), rand(bk, (n,), "float32", seed=160 + k)
        close(call(x, y), ref(x, y), rtol=1e-4, atol=1e-4)
    plans = len(dispatch_scan.fast_plans())

    def no_planning(*a, **kw):
        raise AssertionError("planned again")

    monkeypatch.setattr(dispatch_scan.plan, "plan_scan", no_planning)
    for k, (call, ref) in enumerate(calls()):
        x, y = rand(bk, (n,), "float32", seed=170 + k), rand(bk, (n,), "float32", seed=180 + k)
        got = call(x, y)
        close(got, ref(x, y), rtol=1e-4, atol=1e-4)
    assert len(dispatch_scan.fast_plans()) == plans
    x = rand(bk, (n,), "float32", seed=190)
    r = accumulate(ops.add, x, out=big[1::2][:n])   # the replay returns out itself
    assert r.shape == (n,) and _np(big)[0] == 0.0
    close(big[1::2][:n], np.cumsum(_np(x).astype(np.float64)), rtol=1e-4, atol=1e-4)
    monkeypatch.undo()
    with pytest.raises(ValueError):   # the wrong shape or dtype: the full path's checks
        accumulate(ops.add, x, out=bk.empty((n + 1,), dtype=np.float32))
    with pytest.raises(ValueError):
        accumulate(ops.add, x, out=bk.empty((n,), dtype=np.float64))


def test_namespace_accumulate_replays(monkeypatch):
    """``xp.accumulate`` of one array, with and without ``out=``, replays the plan of an
    earlier call without the primitive's full path, on new data; a call it cannot replay
    (another operator object, a bad axis, ``out`` on another layout) takes the full path."""
    dev = "cpu" if runtime.SIMULATE else "cuda:0"
    n = 2 * _tile("float32") + 5
    host = [np.random.default_rng(k).random(n, dtype=np.float32) for k in range(4)]
    x0 = xp.asarray(host[0], device=dev, copy=True)
    o = xp.empty_like(x0)
    xp.accumulate(ops.add, x0)
    xp.accumulate(ops.add, x0, out=o)
    full = []
    real = pscan.accumulate
    monkeypatch.setattr(pscan, "accumulate", lambda *a, **k: full.append(1) or real(*a, **k))
    for h in host[1:]:
        x = xp.asarray(h, device=dev, copy=True)
        want = np.cumsum(h.astype(np.float64))
        close(np.asarray(xp.asarray(xp.accumulate(ops.add, x), device="cpu")), want, rtol=1e-4)
        r = xp.accumulate(ops.add, x, out=o)
        close(np.asarray(xp.asarray(r, device="cpu")), want, rtol=1e-4)
        close(np.asarray(xp.asarray(o, device="cpu")), want, rtol=1e-4)
    assert not full
    with pytest.raises(Exception):
        xp.accumulate(ops.add, x0, axis=3)
    xp.accumulate(ops.add, x0, out=xp.empty((2 * n,), dtype=xp.float32, device=dev)[::2])
    assert len(full) == 2


def test_replay_lookup_keeps_no_closure_alive():
    """The operators ``accumulate`` remembers for its replay hold nothing else: a closure
    (made anew at each call, it may capture arrays) is not kept, and still scans right."""
    x = np.arange(50.0)

    def make(c):
        return lambda a, b: a + b * c

    f = make(1.0)
    close(accumulate(f, x), np.cumsum(x))
    assert f not in pscan.generic._RESOLVED
    close(accumulate(ops.add, x), np.cumsum(x))
    assert ops.add in pscan.generic._RESOLVED
    assert pscan.generic._holds_nothing(max) and pscan.generic._holds_nothing(lambda a, b: a + b)
    assert not pscan.generic._holds_nothing([].append)


def test_namespace_replay_never_serves_another_call():
    """The namespace's hot path (arguments checked before, a plan for the layout) replays
    only calls of the same kind: dtype argument, include_initial, axis (negative too),
    layout (views, offsets), input dtype and the operation must all match; errors still
    raise after a replay."""
    rng = np.random.default_rng(70)
    h = rng.standard_normal((6, 50)).astype(np.float32)
    x = xp.asarray(h)
    for _ in range(2):  # the second round replays
        for name, ref in (("cumulative_sum", np.cumsum), ("cumulative_prod", np.cumprod)):
            f = getattr(xp, name)
            for axis in (0, 1, -1, -2):
                got = np.from_dlpack(f(x, axis=axis), device="cpu")
                close(got, ref(h.astype(np.float64), axis=axis), rtol=1e-4, atol=1e-4)
            r = np.from_dlpack(f(x, axis=1, include_initial=True), device="cpu")
            assert r.shape == (6, 51) and np.all(r[:, 0] == (0 if name == "cumulative_sum" else 1))
            r64 = f(x, axis=1, dtype=xp.float64)
            assert r64.dtype == xp.float64
            close(np.from_dlpack(r64, device="cpu"), ref(h.astype(np.float64), axis=1), rtol=1e-4, atol=1e-4)
            for v, hv in ((x[1:, 3:], h[1:, 3:]), (x[:, ::-2], h[:, ::-2]), (x[2], h[2])):
                close(np.from_dlpack(f(v, axis=-1), device="cpu"), ref(hv.astype(np.float64), axis=-1),
                      rtol=1e-4, atol=1e-4)
        i = xp.asarray(np.arange(12, dtype=np.int8).reshape(3, 4))
        assert xp.cumulative_sum(i, axis=1).dtype == xp.int64
        assert xp.cumulative_sum(i, axis=1, dtype=xp.int8).dtype == xp.int8
        with pytest.raises(ValueError):
            xp.cumulative_sum(x)  # 2-D without axis
        with pytest.raises((ValueError, IndexError)):
            xp.cumulative_sum(x, axis=2)
        with pytest.raises(TypeError):
            xp.cumulative_sum(x, axis=0, include_initial=1)


def test_namespace():
    x = xp.asarray(np.arange(10, dtype=np.int32))
    r = xp.cumulative_sum(x, include_initial=True)
    assert r.dtype == xp.int64
    assert np.from_dlpack(r, device="cpu").tolist() == [0] + list(np.cumsum(np.arange(10)))
    p = xp.cumulative_prod(xp.asarray([1.0, 2.0, 3.0]))
    assert np.from_dlpack(p, device="cpu").tolist() == [1.0, 2.0, 6.0]
    _, h = xp.accumulate(ops.affine, (xp.asarray([0.5, 0.5]), xp.asarray([1.0, 1.0])))
    assert np.from_dlpack(h, device="cpu").tolist() == [1.0, 1.5]
    with pytest.raises(TypeError):
        xp.accumulate(ops.add, np.zeros(3))


# --------------------------------------------------------------------------- GPU code path (PTX)


def test_ptx_compiles(offline_ptx, tmp_path):
    ptx_file = tmp_path / "scan_f32.ptx"
    out = offline_ptx("""
        import numpy as np
        from forge_array import ops, runtime
        from forge_array.kernels import scan as k
        I64 = runtime.i64
        def tail(acc):
            st = runtime.ptr_t(np.uint32)
            return (st, runtime.tuple_ptr_t(acc), runtime.ptr_t(np.uint64), I64, I64)
        def heads(ind, acc):
            return (runtime.tuple_ptr_t(ind), runtime.tuple_ptr_t(acc), runtime.tuple_ptr_t(acc))
        f32, f64, i8, i64 = (np.dtype(d) for d in ("float32", "float64", "int8", "int64"))
        ptx = runtime.compile_ptx_offline(k.make_tile_scan,
            (ops.add.fn, False, (f32,), (f32,), 256, 16, 0, False, False, True, True),
            heads((f32,), (f32,)) + (I64,) * 11 + tail((f32,)) + (I64,), launch_bounds=(256, 5))
        print("vec", ptx.count("ld.global.v4"), "acq", ptx.count("ld.relaxed.gpu.global.v2"),
              "rel", ptx.count("st.relaxed.gpu.global.v2"), "vst", ptx.count("st.global.v4"),
              "bar", ptx.count("bar.sync"), "fence", ptx.count("fence.") + ptx.count("st.release"))
        open(PTX_FILE, "w").write(ptx)
        sv = runtime.compile_ptx_offline(k.make_tile_scan,   # shared_vec, 8 vectors per thread
            (ops.add.fn, False, (f32,), (f32,), 256, 32, 0, False, False, True, True, "atomic",
             True, False, 0, False, 1, True),
            heads((f32,), (f32,)) + (I64,) * 11 + tail((f32,)) + (I64,))
        print("svld", sv.count("ld.shared.v4"), "svst", sv.count("st.shared.v4"),
              "unaligned", sum(sv.count(f".shared .align {a} ") for a in (1, 2, 4, 8)))
        runtime.compile_ptx_offline(k.make_tile_scan,
            (ops.add.fn, False, (i8,), (i64,), 256, 8, 1, True, True, False),
            heads((i8,), (i64,)) + (I64,) * 11 + tail((i64,)) + (I64,))
        runtime.compile_ptx_offline(k.make_tile_scan,
            (ops.affine.fn, True, (f32, f32), (f32, f32), 256, 8, 0, False, False, False),
            heads((f32, f32), (f32, f32)) + (I64,) * 11 + tail((f32, f32)) + (I64,))
        runtime.compile_ptx_offline(k.make_column_scan,
            (ops.affine.fn, True, (f64, f64), (f64, f64), 256, 8, 1, True, True),
            heads((f64, f64), (f64, f64)) + (I64,) * 13 + tail((f64, f64)))
        print("ok")
    """.replace("PTX_FILE", repr(str(ptx_file))))
    assert "ok" in out
    words = out.split()
    assert int(words[words.index("vec") + 1]) > 0
    # packed 8-byte status words: relaxed vector accesses, no fence, no release store
    assert int(words[words.index("acq") + 1]) > 0 and int(words[words.index("rel") + 1]) > 0
    assert int(words[words.index("fence") + 1]) == 0
    # 128-bit stores; block barriers: ticket, warp totals, look-back result (the load and
    # store transposes only need warp barriers)
    assert int(words[words.index("vst") + 1]) > 0 and int(words[words.index("bar") + 1]) == 3
    # shared_vec: 128-bit shared accesses of whole tiles (8 per thread per transpose or pass:
    # the load transpose and the second pass store, both passes and the store transpose load),
    # every shared array 16-byte aligned
    assert int(words[words.index("svst") + 1]) == 16 and int(words[words.index("svld") + 1]) == 24
    assert int(words[words.index("unaligned") + 1]) == 0
    ptxas = shutil.which("ptxas") or next(
        (p for p in ("/usr/local/cuda/bin/ptxas", "/usr/local/cuda-13.0/bin/ptxas") if os.path.exists(p)), None)
    if ptxas:  # the float32 main kernel: no local memory under the 5-blocks launch bound
        info = subprocess.run([ptxas, "-arch=sm_90", "-v", str(ptx_file), "-o", os.devnull],
                              capture_output=True, text=True)
        if info.returncode == 0:
            assert "0 bytes spill stores" in info.stderr and "0 bytes stack frame" in info.stderr, info.stderr


def test_tile_sizes_are_tiny_in_simulator(sim):
    if sim:
        assert _tile("float32") <= 256
    assert math.isfinite(_tile("float64"))


# --------------------------------------------------------------------------- staged columns, fitted tiles


def _override(monkeypatch, **kinds):
    for kind, over in kinds.items():
        monkeypatch.setitem(tuning.OVERRIDES, kind, dict(tuning.OVERRIDES.get(kind, {}), **over))
    monkeypatch.setattr(tuning, "_CACHE", {})
    monkeypatch.setattr(dispatch_scan.state.THREAD_LOCAL, "plans", {}, raising=False)


@pytest.mark.parametrize("staged", [True, False], ids=["staged", "strided"])
def test_column_kernel_staged(bk, monkeypatch, staged):
    """The column kernel's staged path (each block's elements one dense range, read and
    written through shared memory with coalesced accesses): tall narrow matrices along
    axis 0 (one strip of contiguous rows), short contiguous rows along axis 1 (one chunk),
    with include_initial / exclusive / reverse (staged loads only), out views, tuples of a
    non-commutative operator, deterministic mode and a non-additive operator."""
    # rows_staged_vecs 0 / narrow_max 0: short rows along axis 1 and few columns along axis 0
    # go to the column kernel, not make_row_scan / make_narrow_scan
    _override(monkeypatch, scan_columns={"items": 8, "staged": staged, "rows_staged_vecs": 0,
                                         "narrow_max": 0})
    rng = np.random.default_rng(41)
    for shape, axis in [((301, 10), 0), ((33, 1), 0), ((97, 7), 1), ((130, 8), 1), ((64, 1), 1),
                        ((257, 31), 0)]:
        x = bk.asarray(rng.standard_normal(shape).astype(np.float32))
        ref = np.cumsum(_np(x).astype(np.float64), axis=axis)
        close(cumulative_sum(x, axis=axis), ref, rtol=1e-4, atol=1e-4)
        close(cumulative_sum(x, axis=axis, include_initial=True),
              np.concatenate([np.zeros_like(np.take(ref, [0], axis=axis)), ref], axis=axis),
              rtol=1e-4, atol=1e-4)
        close(accumulate(ops.add, x, axis=axis, reverse=True),
              np.flip(np.cumsum(np.flip(_np(x).astype(np.float64), axis), axis=axis), axis),
              rtol=1e-4, atol=1e-4)
        close(accumulate(ops.maximum, x, axis=axis), np.maximum.accumulate(_np(x), axis=axis))
        r1 = accumulate(ops.add, x, axis=axis, deterministic=True)
        assert np.array_equal(_np(r1), _np(accumulate(ops.add, x, axis=axis, deterministic=True)))
        close(r1, ref, rtol=1e-4, atol=1e-4)
    # out: a view of another layout (staged loads, strided stores)
    x = bk.asarray(rng.standard_normal((301, 10)))
    o = bk.zeros((10, 301)).T
    accumulate(ops.add, x, axis=0, out=o)
    close(o, np.cumsum(_np(x), axis=0))
    # int8 -> int64 conversion while staging
    z = bk.asarray(rng.integers(-9, 9, (150, 6)).astype(np.int8))
    close(cumulative_sum(z, axis=0), np.cumsum(_np(z).astype(np.int64), axis=0))
    close(cumulative_sum(z, axis=1), np.cumsum(_np(z).astype(np.int64), axis=1))
    # affine pairs (non-commutative tuples) along both axes
    for shape, axis in [((203, 5), 0), ((90, 6), 1)]:
        a = rng.uniform(0.5, 1.0, shape).astype(np.float32)
        b = rng.standard_normal(shape).astype(np.float32)
        got = accumulate(ops.affine, (bk.asarray(a), bk.asarray(b)), axis=axis)
        want = ref_scan(ops.affine.fn, (a.astype(np.float64), b.astype(np.float64)), axis=axis)
        for g, w in zip(got, want):
            close(g, w.astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_row_scan_staged(bk, monkeypatch, dtype):
    """Many short contiguous rows scanned in shared memory by warps (make_row_scan): rows of
    1 .. a whole warp tile, tiles split across warps and blocks (partial last tile),
    misaligned starts of the input and of an ``out`` view with another phase, an init, a
    non-commutative operator; include_initial, reverse and tuple operators keep the other
    kernels (checked here through the plan's kernel)."""
    _override(monkeypatch, scan_columns={"rows_staged_vecs": 1, "rows_staged_block": 64,
                                         "rows_staged_blocks_per_sm": 1})
    dt = np.dtype(dtype)
    vec = 16 // dt.itemsize
    tw = 32 * vec           # elements per warp tile
    rng = np.random.default_rng(47)
    made = []
    orig = dispatch_scan.plan._plan_rows
    monkeypatch.setattr(dispatch_scan.plan, "_plan_rows", lambda *a: made.append(1) or orig(*a))
    exact = dt.kind == "i"
    for rows, n, off in [(64, 2, 0), (100, 10, 1), (200, 3, 3), (70, 7, 2), (65, tw // 2 + 1, 1),
                         (66, tw, 0), (300, 5, 1)]:
        flat = rng.integers(-50, 50, rows * n + 8) if exact else rng.standard_normal(rows * n + 8)
        flat = flat.astype(dt)
        h = flat[off:off + rows * n].reshape(rows, n)
        x = bk.asarray(flat)[off:off + rows * n].reshape(rows, n)
        before = len(made)
        got = accumulate(ops.add, x, axis=1)
        assert len(made) == before + 1, (rows, n, off)
        want = np.cumsum(h.astype(np.int64 if exact else np.float64), axis=1)
        close(got, want, rtol=1e-4 if dt.itemsize == 4 else 1e-9, atol=1e-4)
        # out view whose 16-byte phase differs from the input's
        buf = bk.zeros(rows * n + 8, dtype=dt)
        o = buf[off + 1:off + 1 + rows * n].reshape(rows, n)
        accumulate(ops.add, x, axis=1, out=o)
        close(o, want, rtol=1e-4 if dt.itemsize == 4 else 1e-9, atol=1e-4)
        # init and a non-commutative operator: the last element seen (cast to the dtype)
        close(accumulate(ops.add, x, axis=1, init=dt.type(3)), want + 3,
              rtol=1e-4 if dt.itemsize == 4 else 1e-9, atol=1e-4)
        close(accumulate(lambda a, b: b, x, axis=1), h)
    # namespace: cumulative_sum along the last axis in the input's dtype
    if dt.kind == "f":
        y = rng.standard_normal((90, 6)).astype(dt)
        r = xp.cumulative_sum(xp.asarray(bk.asarray(y)), axis=1, dtype=getattr(xp, dtype))
        close(np.asarray(r.to_device("cpu")), np.cumsum(y.astype(np.float64), axis=1), rtol=1e-4,
              atol=1e-4)
    # not taken: a tuple operator, rows of a strided view
    x = bk.asarray(rng.standard_normal((80, 6)).astype(np.float32))
    before = len(made)
    a = rng.uniform(0.5, 1.0, (80, 6)).astype(np.float32)
    accumulate(ops.affine, (bk.asarray(a), x), axis=1)
    close(accumulate(ops.add, x[:, ::2], axis=1), np.cumsum(_np(x)[:, ::2].astype(np.float64), axis=1),
          rtol=1e-4, atol=1e-4)
    assert len(made) == before


@pytest.mark.parametrize("dtype,long", [("float32", False), ("int64", False), ("float32", True),
                                        ("float64", True)])
def test_row_scan_staged_shifted_reversed(bk, monkeypatch, dtype, long):
    """The short-row scan with include_initial (output rows one longer, starting with the
    init), exclusive (the init first, the last result dropped) and reverse (rows running
    backwards in memory, the staged range read from its end), alone and together: rows of
    a lane each and rows scanned as segmented sequences (``long``: 16-vector tiles), the init
    or the identity, a non-commutative operator, misaligned inputs and out views of another
    phase, a widening conversion; each call on make_row_scan."""
    _override(monkeypatch, scan={"pipeline": False},
              scan_columns={"rows_staged_vecs": 1, "rows_staged_block": 64,
                            "rows_staged_blocks_per_sm": 1, "rows_staged_long_vecs": 2 if long else 1,
                            "rows_staged_max": 10**6})
    dt = np.dtype(dtype)
    tw = 32 * (16 // dt.itemsize) * (2 if long else 1)
    rng = np.random.default_rng(50)
    exact = dt.kind == "i"
    tol = dict(rtol=1e-4 if dt.itemsize == 4 else 1e-9, atol=1e-3)
    shapes = [(64, tw - 1, 0), (65, 33, 3)] if long else \
        [(70, 2, 0), (100, 3, 1), (66, 10, 2), (64, tw // 2, 1)]
    combos = [(True, False, False), (False, True, False), (False, False, True),
              (True, False, True), (False, True, True)]
    add = lambda a, b: a + b   # noqa: E731
    for i, (rows, n, off) in enumerate(shapes):
        dispatch_scan.fast_plans().clear()
        flat = rng.integers(-50, 50, rows * n + 8) if exact else rng.standard_normal(rows * n + 8)
        flat = flat.astype(dt)
        h = flat[off:off + rows * n].reshape(rows, n)
        x = bk.asarray(flat)[off:off + rows * n].reshape(rows, n)
        ref = h.astype(np.int64 if exact else np.float64)
        for inc, exc, rev in combos:            # the identity as the init
            flags = dict(include_initial=inc, exclusive=exc, reverse=rev)
            want = ref_scan(add, ref, 1, 0 if (inc or exc) else None, **flags)
            close(accumulate(ops.add, x, axis=1, **flags), want.astype(np.float64), **tol)
        # one combination per shape (in turn): an init, a non-commutative operator (the
        # last element seen) and an out view whose 16-byte phase differs from the input's
        inc, exc, rev = combos[i % len(combos)]
        flags = dict(include_initial=inc, exclusive=exc, reverse=rev)
        close(accumulate(ops.add, x, axis=1, init=dt.type(5), **flags),
              ref_scan(add, ref, 1, 5, **flags).astype(np.float64), **tol)
        close(accumulate(lambda a, b: b, x, axis=1, init=dt.type(-7), **flags),
              ref_scan(lambda a, b: b, ref, 1, -7, **flags).astype(np.float64))
        m = n + 1 if inc else n
        buf = bk.zeros(rows * m + 8, dtype=dt)
        o = buf[off + 1:off + 1 + rows * m].reshape(rows, m)
        accumulate(ops.add, x, axis=1, out=o, **flags)
        close(o, ref_scan(add, ref, 1, 0, **flags).astype(np.float64), **tol)
        if dt == np.dtype("float32") and n < 32:     # widening: float32 rows into float64
            r = cumulative_sum(x, axis=1, dtype=np.float64, include_initial=True)
            close(r, ref_scan(add, ref, 1, 0, include_initial=True).astype(np.float64),
                  rtol=1e-9, atol=1e-9)
        kernels = {p.kernel.name for p in dispatch_scan.fast_plans().values() if getattr(p, "kernel", None)}
        assert kernels == {"make_row_scan"}, (n, kernels)


@pytest.mark.parametrize("src,dst", [("int32", "int64"), ("float32", "float64"), ("uint32", "int64"),
                                     ("int32", "float64")])
def test_row_scan_staged_conversions(bk, monkeypatch, src, dst):
    """The short-row scan with a widening conversion (int32 rows summed into int64, the
    namespace's default for cumulative_sum of int32): the input staged in a tile of its own
    type, read through a cast; rows of one lane each and rows scanned as a segmented sequence,
    misaligned inputs, sums and products, on 16-vector tiles too."""
    _override(monkeypatch, scan={"pipeline": False},
              scan_columns={"rows_staged_vecs": 1, "rows_staged_block": 128,
                            "rows_staged_blocks_per_sm": 1, "rows_staged_long_vecs": 2,
                            "rows_staged_max": 10**6})
    sd, dd = np.dtype(src), np.dtype(dst)
    tw = 32 * (16 // dd.itemsize)
    rng = np.random.default_rng(49)
    for rows, n, off in [(70, 2, 0), (66, 7, 1), (65, tw - 1, 3), (64, tw + 5, 1)]:
        dispatch_scan.fast_plans().clear()
        flat = rng.integers(0 if sd.kind == "u" else -50, 50, rows * n + 8).astype(sd)
        h = flat[off:off + rows * n].reshape(rows, n)
        x = bk.asarray(flat)[off:off + rows * n].reshape(rows, n)
        want = np.cumsum(h.astype(dd), axis=1)
        got = cumulative_sum(x, axis=1, dtype=dd)
        assert got.dtype == dd
        close(got, want)
        small = bk.asarray((flat % 3).astype(sd))[off:off + rows * n].reshape(rows, n)
        close(cumulative_prod(small, axis=1, dtype=dd),
              np.cumprod((flat % 3).astype(dd)[off:off + rows * n].reshape(rows, n), axis=1))
        kernels = {p.kernel.name for p in dispatch_scan.fast_plans().values() if getattr(p, "kernel", None)}
        assert kernels == {"make_row_scan"}, (src, dst, n, kernels)
    if sd == np.dtype("int32") and dd == np.dtype("int64"):
        y = rng.integers(-9, 9, (100, 5)).astype(np.int32)
        r = xp.cumulative_sum(xp.asarray(bk.asarray(y)), axis=1)
        assert r.dtype == xp.int64
        np.testing.assert_array_equal(np.asarray(r.to_device("cpu")), np.cumsum(y.astype(np.int64), axis=1))


def test_row_scan_staged_long_rows(bk, monkeypatch):
    """Rows longer than a warp tile of ``rows_staged_vecs`` vectors per lane take tiles of
    2, 4 ... times as many, up to ``rows_staged_long_vecs`` (blocks of fewer warps, more of
    them per SM), scanned as one segmented sequence per warp tile (lanes' runs crossing row
    starts, a row per tile); rows that fit the short tile keep it; rows beyond the longest
    tile go to another kernel. (A few calls: long rows are slow in the simulator.)"""
    _override(monkeypatch, scan={"pipeline": False},
              scan_columns={"rows_staged_vecs": 1, "rows_staged_block": 128,
                            "rows_staged_blocks_per_sm": 1, "rows_staged_long_vecs": 4,
                            "rows_staged_max": 10**6})
    rng = np.random.default_rng(48)
    for dtype, rows, n, block, full in [("float32", 70, 128, 128, True), ("float32", 65, 131, 64, True),
                                        ("float64", 66, 129, 32, False), ("float32", 64, 516, None, False)]:
        dt = np.dtype(dtype)
        dispatch_scan.fast_plans().clear()
        h = rng.standard_normal((rows, n)).astype(dt)
        x = bk.asarray(h)
        tol = dict(rtol=1e-4 if dt.itemsize == 4 else 1e-9, atol=1e-4 * math.sqrt(n))
        close(accumulate(ops.add, x, axis=1), np.cumsum(h.astype(np.float64), axis=1), **tol)
        if full:
            close(accumulate(lambda a, b: b, x, axis=1), h)
            close(accumulate(ops.add, x, axis=1, init=dt.type(2)),
                  np.cumsum(h.astype(np.float64), axis=1) + 2, **tol)
        plans = [p for p in dispatch_scan.fast_plans().values() if getattr(p, "kernel", None)]
        if block is None:
            assert all(p.kernel.name != "make_row_scan" for p in plans)
        else:
            assert {p.kernel.name for p in plans} == {"make_row_scan"}
            assert {p.block for p in plans} == {block}, (n, [p.block for p in plans])


@pytest.mark.parametrize("fit", [True, False], ids=["fit", "pow2"])
def test_fitted_tiles(bk, monkeypatch, fit):
    """Items per thread fitted to the row (fit_items: equal tiles, items a multiple of the
    vector width, not a power of two) at sizes around tile edges, batches of rows, views,
    include_initial, float64 and a tuple operator."""
    _override(monkeypatch, scan={"block": 64, "item_bytes": 64, "items_max": 16, "fit_items": fit})
    rng = np.random.default_rng(43)
    T = 64 * 16
    for n in (0, 1, 31, 32, 33, T - 1, T, T + 1, T + 300, 2 * T + 5, 5 * T + 3):
        x = bk.asarray(rng.standard_normal(n).astype(np.float32))
        close(cumulative_sum(x), np.cumsum(_np(x).astype(np.float64)), rtol=1e-4, atol=1e-4)
    x = bk.asarray(rng.standard_normal((3, T + 200)).astype(np.float32))
    close(cumulative_sum(x, axis=1), np.cumsum(_np(x).astype(np.float64), axis=1), rtol=1e-4, atol=1e-4)
    close(cumulative_sum(x[:, 1:], axis=1, include_initial=True)[:, 1:],
          np.cumsum(_np(x)[:, 1:].astype(np.float64), axis=1), rtol=1e-4, atol=1e-4)
    y = bk.asarray(rng.standard_normal(T + 77))
    close(cumulative_sum(y), np.cumsum(_np(y)))
    r1 = accumulate(ops.add, y, deterministic=True)
    assert np.array_equal(_np(r1), _np(accumulate(ops.add, y, deterministic=True)))
    a = rng.uniform(0.5, 1.0, T + 50)
    b = rng.standard_normal(T + 50)
    A, H = accumulate(ops.affine, (bk.asarray(a), bk.asarray(b)))
    wa, wh = ref_scan(ops.affine.fn, (a, b))
    close(H, wh, rtol=1e-9, atol=1e-9)
    if fit:
        f32 = (np.dtype("float32"),)
        assert dispatch_scan.state.fit_items({"block": 64}, 16, T + 300, f32, f32, False) == 12


def _affine_c(p, q):
    """(a1, b1) then (a2, b2) as complex numbers a + b i: (a1 a2, b1 a2 + b2); associative,
    not commutative."""
    return complex(p.real * q.real, p.imag * q.real + q.imag)


@pytest.mark.parametrize("item_bytes", [16, 64, 128])
def test_shared_vector_layout(bk, monkeypatch, item_bytes):
    """shared_vec: whole tiles through shared memory as 128-bit vectors in rotated rows (1, 4
    and 8 vectors per thread: no rotation, a new rotation every 2 rows, every row), partial
    tiles in the scalar layout. Sizes at tile edges, misaligned views (the tiles' lead),
    include_initial and exclusive (vector stores shifted by one), an output phase that forces
    scalar stores of whole tiles, float64, int32, and a non-commutative operator on complex64
    (affine maps as a + b i)."""
    _override(monkeypatch, scan={"block": 64, "item_bytes": item_bytes, "items_max": 32,
                                 "shared_vec": True, "fit_items": False})
    rng = np.random.default_rng(item_bytes)
    T = 64 * min(32, item_bytes // 4)
    for n in (1, 33, T, T + 1, 3 * T + 5):
        x = bk.asarray(rng.standard_normal(n).astype(np.float32))
        close(cumulative_sum(x), np.cumsum(_np(x).astype(np.float64)), rtol=1e-4, atol=1e-4)
    x = _phased(bk, 3 * T + 6, "int32", 0, seed=item_bytes)
    xn = _np(x).astype(np.int64)
    for v, vn in ((x, xn), (x[3:], xn[3:]), (x[1:-1], xn[1:-1])):
        c = np.cumsum(vn).astype(np.int32)
        close(accumulate(ops.add, v), c)
        close(accumulate(ops.add, v, include_initial=True), np.concatenate([[0], c]).astype(np.int32))
        close(accumulate(ops.add, v, exclusive=True), np.concatenate([[0], c[:-1]]).astype(np.int32))
    out = bk.empty(3 * T + 7, dtype=np.int32)   # output one element off the input's phase
    accumulate(ops.add, x, out=out[1:])
    close(out[1:], np.cumsum(xn).astype(np.int32))
    y = bk.asarray(rng.standard_normal(2 * T + 3))
    close(cumulative_sum(y, include_initial=True), np.concatenate([[0.0], np.cumsum(_np(y))]))
    a, b = rng.uniform(0.9, 1.0, 2 * T + 9), rng.standard_normal(2 * T + 9)
    z = bk.asarray((a + 1j * b).astype(np.complex64))
    wa, wh = ref_scan(ops.affine.fn, (a, b))
    got = _np(accumulate(_affine_c, z))
    close(got.real, wa, rtol=1e-4, atol=1e-4)
    close(got.imag, wh, rtol=1e-3, atol=1e-3)


# --------------------------------------------------------------------------- direct column scan


@pytest.mark.parametrize("cols", [1, 31, 32, 33, 257])
@pytest.mark.parametrize("n", [1, 5, 16])
def test_direct_columns(bk, sim, cols, n):
    """Short columns along axis 0 (n <= direct_rows): one thread per group of adjacent
    columns, registers only; 128-bit groups with scalar ends, misaligned views."""
    x = rand(bk, (n, cols + 3), "float32", seed=cols + n)
    for v in (x[:, :cols], x[:, 1:cols + 1], x[:, 3:]):
        close(cumulative_sum(v, axis=0), np.cumsum(_np(v).astype(np.float64), axis=0), rtol=1e-5, atol=1e-5)
        close(cumulative_sum(v, axis=0, include_initial=True),
              ref_scan(lambda a, b: a + b, _np(v).astype(np.float64), axis=0, init=0.0, include_initial=True),
              rtol=1e-5, atol=1e-5)
    if cols > 1:  # the direct kernel took it (no tile states), also for columns of one row
        assert any(p.state is None for p in dispatch_scan.fast_plans().values())


def test_direct_columns_generic(bk, sim):
    x = rand(bk, (7, 45), "int32", seed=3)
    close(cumulative_sum(x, axis=0), np.cumsum(_np(x).astype(np.int64), axis=0))   # int32 -> int64
    x8 = rand(bk, (9, 40), "int8", seed=4)
    close(cumulative_sum(x8, axis=0, dtype=np.int32), np.cumsum(_np(x8).astype(np.int32), axis=0))
    f = rand(bk, (6, 3, 37), "float64", seed=5)      # two batch dimensions
    close(cumulative_prod(f[:, :, 1:], axis=0), np.cumprod(_np(f)[:, :, 1:], axis=0), rtol=1e-9)
    first = lambda a, b: a  # noqa: E731  non-commutative (keeps the first element)
    for rev in (False, True):
        g = rand(bk, (11, 50), "float32", seed=6)
        close(accumulate(first, g, axis=0, reverse=rev),
              ref_scan(first, _np(g), axis=0, reverse=rev))
        close(accumulate(ops.add, g, axis=0, reverse=rev, exclusive=True),
              ref_scan(lambda a, b: a + b, _np(g).astype(np.float64), axis=0, init=0.0, exclusive=True,
                       reverse=rev), rtol=1e-5, atol=1e-5)
        close(accumulate(ops.add, g, axis=0, reverse=rev, init=2.5),
              ref_scan(lambda a, b: a + b, _np(g).astype(np.float64), axis=0, init=2.5, reverse=rev),
              rtol=1e-5, atol=1e-5)
    for w in (rand(bk, (64, 1), "float32", seed=10), rand(bk, (1, 64), "float64", seed=11)[:, 1:]):
        dispatch_scan.fast_plans().clear()  # scans of length 1 along either axis: the direct kernel
        close(cumulative_sum(w, axis=w.shape.index(1)), _np(w))
        close(cumulative_sum(w, axis=w.shape.index(1), include_initial=True),
              np.concatenate([np.zeros_like(_np(w)), _np(w)], axis=w.shape.index(1)))
        assert all(p.state is None for p in dispatch_scan.fast_plans().values())
    big = rand(bk, (17, 40), "float32", seed=7)     # n > direct_rows: the chunked kernel
    close(cumulative_sum(big, axis=0), np.cumsum(_np(big).astype(np.float64), axis=0), rtol=1e-5, atol=1e-5)
    a, b = rand(bk, (5, 33), "float32", seed=8), rand(bk, (5, 33), "float32", seed=9)   # tuples
    A, H = accumulate(ops.affine, (a, b), axis=0)
    wa, wh = ref_scan(ops.affine.fn, (_np(a).astype(np.float64), _np(b).astype(np.float64)), axis=0)
    close(A, wa.astype(np.float64), rtol=1e-4, atol=1e-5)
    close(H, wh.astype(np.float64), rtol=1e-4, atol=1e-5)
    d = accumulate(ops.add, g, axis=0, deterministic=True)
    assert np.array_equal(_np(d), _np(accumulate(ops.add, g, axis=0, deterministic=True)))


def test_column_warp_lookback(bk, monkeypatch):
    """Few columns per block (axis 0 of a tall thin matrix): a warp looks back for each
    column over windows of 32 chunks; more than one window of chunks, exact integers,
    include_initial, reverse, a non-additive operator, deterministic mode."""
    _override(monkeypatch, scan_columns={"warp_lookback_cols": 16, "narrow_max": 0})
    rng = np.random.default_rng(60)
    rows = 34 * (64 // 10) * tuning.params("scan_columns")["items"] + 5  # > 32 chunks in the simulator
    z = bk.asarray(rng.integers(-9, 9, (rows, 10)).astype(np.int32))
    close(cumulative_sum(z, axis=0, dtype=np.int32), np.cumsum(_np(z), axis=0).astype(np.int32))
    x = bk.asarray(rng.standard_normal((100, 7)).astype(np.float32))
    ref = np.cumsum(_np(x).astype(np.float64), axis=0)
    close(cumulative_sum(x, axis=0, include_initial=True)[1:], ref, rtol=1e-5, atol=1e-5)
    close(accumulate(ops.maximum, x, axis=0, reverse=True),
          np.flip(np.maximum.accumulate(np.flip(_np(x), 0), axis=0), 0))
    r1 = accumulate(ops.add, x, axis=0, deterministic=True)
    assert np.array_equal(_np(r1), _np(accumulate(ops.add, x, axis=0, deterministic=True)))
    close(r1, ref, rtol=1e-5, atol=1e-5)


def _narrow_inclusive(bk, x, h, want, off, tol):
    """Inclusive scans along axis 0 of the matrix ``x`` (``h`` on the host, ``want`` its
    cumulative sum, ``off`` its misalignment in elements): the sum, into an ``out`` view
    of another 16-byte phase, from an init, and the last element seen (non-commutative)."""
    n, p = h.shape
    close(accumulate(ops.add, x, axis=0), want, **tol)
    buf = bk.zeros(n * p + 8, dtype=h.dtype)
    o = buf[off + 1:off + 1 + n * p].reshape(n, p)
    accumulate(ops.add, x, axis=0, out=o)
    close(o, want, **tol)
    close(accumulate(ops.add, x, axis=0, init=h.dtype.type(3)), want + 3, **tol)
    close(accumulate(lambda a, b: b, x, axis=0), h)


@pytest.mark.parametrize("dtype,packed", [("float32", 0), ("int64", 0), ("float32", 4)])
def test_narrow_scan(bk, monkeypatch, dtype, packed):
    """Axis 0 of C-contiguous matrices of 2 .. 32 columns scanned as rows of p-vectors
    (make_narrow_scan): one tile and many, a partial last tile, one and several rows per
    thread, look-backs over several windows of aggregates only (``narrow_prefix_every``),
    misaligned starts of the input and of an ``out`` view with another 16-byte phase, an
    init, a non-commutative operator, include_initial and exclusive scans; the cases it does
    not take (reverse, a conversion, deterministic mode, a tuple operator, more than
    ``narrow_max`` columns) keep the column kernel. With a flag word per tile, and with packed words per (tile, column)
    looked back 4 tiles at a time."""
    dt = np.dtype(dtype)
    # prefixes only every 40 tiles (12 with look-back windows of 4 tiles)
    every = 12 if packed else 40
    base = {"narrow_block": 64, "narrow_bytes": 8 * dt.itemsize, "narrow_prefix_every": every,
            "direct_rows": 4, "narrow_packed": packed, "narrow_max": 32}
    _override(monkeypatch, scan_columns=base)
    rng = np.random.default_rng(48)
    made = []
    orig = dispatch_scan.plan._plan_narrow
    monkeypatch.setattr(dispatch_scan.plan, "_plan_narrow", lambda *a: made.append(1) or orig(*a))
    exact = dt.kind == "i"
    tol = {} if exact else {"rtol": 1e-4, "atol": 1e-4}

    def values(shape):
        v = rng.integers(-50, 50, shape) if exact else rng.standard_normal(shape)
        return v.astype(dt)

    # tiles of 512 elements: (G, R) = (6, 1) for 10 columns, (4, 7) for 16, (2, 8) for 32
    for n, p, off in [(5, 2, 0), (6, 10, 1), (13, 10, 0), (70, 32, 2), (40, 16, 3), (50, 3, 1)]:
        flat = values(n * p + 8)
        h = flat[off:off + n * p].reshape(n, p)
        x = bk.asarray(flat)[off:off + n * p].reshape(n, p)
        before = len(made)
        want = np.cumsum(h.astype(np.int64 if exact else np.float64), axis=0)
        _narrow_inclusive(bk, x, h, want, off, tol)
        assert len(made) == before + 4, (n, p, off)
        close(accumulate(ops.maximum, x, axis=0), np.maximum.accumulate(h, axis=0))
        # include_initial and exclusive (output shifted by a row), into an out view of another
        # 16-byte phase too
        zero = np.zeros((1, p), want.dtype)
        close(cumulative_sum(x, axis=0, include_initial=True), np.concatenate([zero, want]), **tol)
        close(accumulate(ops.add, x, axis=0, exclusive=True, init=dt.type(2)),
              np.concatenate([zero, want[:-1]]) + 2, **tol)
        buf = bk.zeros((n + 1) * p + 8, dtype=dt)
        o = buf[off + 3:off + 3 + (n + 1) * p].reshape(n + 1, p)
        accumulate(ops.add, x, axis=0, include_initial=True, out=o)
        close(o, np.concatenate([zero, want]), **tol)
    # tiles of 6 rows, prefixes only at tile 0 and every `every` tiles: look-backs over two
    # windows of 32 tiles (7 of 4 tiles when packed)
    h = values(((every + 5) * 6 + 5, 10))
    close(accumulate(ops.add, bk.asarray(h), axis=0),
          np.cumsum(h.astype(np.int64 if exact else np.float64), axis=0), **tol)
    # tiles of 2048 elements: 33 rows per thread (R = 1 mod 16 for 10 columns), two tiles
    _override(monkeypatch, scan_columns=dict(base, narrow_bytes=32 * dt.itemsize))
    h = values((250, 10))
    close(accumulate(ops.add, bk.asarray(h)[1:], axis=0),
          np.cumsum(h[1:].astype(np.int64 if exact else np.float64), axis=0), **tol)
    # namespace: cumulative_sum along axis 0 in the input's dtype
    y = rng.standard_normal((30, 10)).astype(np.float32)
    before = len(made)
    r = xp.cumulative_sum(xp.asarray(bk.asarray(y)), axis=0)
    close(np.asarray(r.to_device("cpu")), np.cumsum(y.astype(np.float64), axis=0), rtol=1e-4,
          atol=1e-4)
    assert len(made) == before + 1
    # not taken
    x = bk.asarray(rng.standard_normal((80, 6)).astype(np.float32))
    ref = np.cumsum(_np(x).astype(np.float64), axis=0)
    before = len(made)
    close(accumulate(ops.add, x, axis=0, reverse=True),
          np.flip(np.cumsum(np.flip(_np(x).astype(np.float64), 0), axis=0), 0), rtol=1e-4,
          atol=1e-4)
    close(cumulative_sum(x, axis=0, dtype=np.float64), ref)
    close(accumulate(ops.add, x, axis=0, deterministic=True), ref, rtol=1e-4, atol=1e-4)
    a = rng.uniform(0.5, 1.0, (80, 6)).astype(np.float32)
    accumulate(ops.affine, (bk.asarray(a), x), axis=0)
    w = bk.asarray(rng.standard_normal((40, 33)).astype(np.float32))
    close(cumulative_sum(w, axis=0), np.cumsum(_np(w).astype(np.float64), axis=0), rtol=1e-4,
          atol=1e-4)
    assert len(made) == before


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_narrow_scan_many_columns(bk, monkeypatch, dtype):
    """More than 32 columns take the narrow kernel with packed status words (a thread per
    column looks back along its column): one and several rows per tile, blocks wider than
    ``narrow_block`` for 100 columns (``narrow_max`` threads), misaligned inputs and ``out`` views, an init for
    all columns and one per column (inclusive, include_initial, exclusive), a
    non-commutative operator; with flag words (``narrow_packed`` 0) or beyond ``narrow_max``
    the column kernel takes them."""
    dt = np.dtype(dtype)
    base = {"narrow_block": 64, "narrow_bytes": 2 * dt.itemsize,
            "narrow_packed": 4, "narrow_max": 128, "direct_rows": 4}
    _override(monkeypatch, scan_columns=base)
    rng = np.random.default_rng(49)
    made = []
    orig = dispatch_scan.plan._plan_narrow
    monkeypatch.setattr(dispatch_scan.plan, "_plan_narrow", lambda *a: made.append(a[2]) or orig(*a))
    exact = dt.kind == "i"
    wide = np.int64 if exact else np.float64
    tol = {} if exact else {"rtol": 1e-4, "atol": 1e-4}

    def values(shape):
        v = rng.integers(-50, 50, shape) if exact else rng.standard_normal(shape)
        return v.astype(dt)

    # (n, p, misalignment, bytes per thread): one row per tile (R = 1 mod 32 for 33
    # columns), 25 rows per tile for 40 columns, 16 for 64, 128-thread blocks for 100
    for n, p, off, nbytes in [(9, 33, 1, 2), (60, 40, 0, 16), (40, 64, 3, 16), (5, 100, 2, 2)]:
        _override(monkeypatch, scan_columns=dict(base, narrow_bytes=nbytes * dt.itemsize))
        flat = values(n * p + 8)
        h = flat[off:off + n * p].reshape(n, p)
        x = bk.asarray(flat)[off:off + n * p].reshape(n, p)
        want = np.cumsum(h.astype(wide), axis=0)
        before = len(made)
        _narrow_inclusive(bk, x, h, want, off, tol)
        assert len(made) == before + 4 and made[-1].nbatch == p, (n, p)
        per = values((p,))
        close(accumulate(ops.add, x, axis=0, init=bk.asarray(per)), want + per.astype(wide), **tol)
        zero = np.zeros((1, p), want.dtype)
        close(accumulate(ops.add, x, axis=0, init=bk.asarray(per), include_initial=True),
              np.concatenate([zero, want]) + per.astype(wide), **tol)
        close(accumulate(ops.add, x, axis=0, exclusive=True, init=bk.asarray(per)),
              np.concatenate([zero, want[:-1]]) + per.astype(wide), **tol)
        close(accumulate(ops.maximum, x, axis=0, init=bk.asarray(per)),
              np.maximum.accumulate(np.concatenate([per[None], h]), axis=0)[1:])
        assert len(made) == before + 8, (n, p)
    # not taken: flag words hold 32 columns, and narrow_max caps the packed layout
    x = bk.asarray(values((12, 40)))
    before = len(made)
    _override(monkeypatch, scan_columns=dict(base, narrow_packed=0))
    close(accumulate(ops.add, x, axis=0), np.cumsum(_np(x).astype(wide), axis=0), **tol)
    _override(monkeypatch, scan_columns=dict(base, narrow_max=39))
    close(accumulate(ops.add, x, axis=0), np.cumsum(_np(x).astype(wide), axis=0), **tol)
    assert len(made) == before


# --------------------------------------------------------------------------- pipelined tile scan


def _pipeline_kernels():
    return {p.kernel.name for p in dispatch_scan.fast_plans().values() if getattr(p, "kernel", None)}


@pytest.mark.parametrize("dtype,lookers,group", [("float32", 1, 1), ("float64", 1, 1), ("int32", 1, 1),
                                                ("float32", 2, 1), ("int32", 2, 1), ("float32", 1, 3),
                                                ("float64", 2, 2)])
def test_pipelined_tile_scan(bk, sim, monkeypatch, dtype, lookers, group):
    """scan.pipeline: warp-specialised blocks (a producer warp's bulk copies, compute warps,
    a look-back warp) walking their tiles through a ring of shared-memory buffers. Sizes at
    tile edges and of many tiles (every buffer reused, look-backs across the block's own
    earlier tiles), misaligned views (partial first tiles copied by the producer's lanes),
    include_initial / exclusive (bulk stores shifted by one, or scalar stores when the output
    is out of phase), an output view, rows of a matrix (axis -1), cumprod and max with an
    initial value, and a non-commutative operator (left projection). ``lookers`` 2: two
    look-back warps taking the tiles in turn (two end marks close the ring); ``group`` 2 or 3:
    tickets of consecutive tiles (partial last groups; the counter's advance per launch must
    match the host's count, or the next launches' tile ids would be off)."""
    _override(monkeypatch, scan={"pipeline": True, "pipe_min": 0, "pipe_lookers": lookers,
                                 "pipe_group": group})
    p = tuning.params("scan")
    V = 16 // np.dtype(dtype).itemsize
    T = p["pipe_warps"] * 32 * p["pipe_vectors"] * V
    kind = np.dtype(dtype).kind
    for n in (1, T - 1, T + 1, 3 * T + 5, (4 * p["pipe_stages"] + 1) * T + 3):
        for off in (0, 3) if n != 3 * T + 5 else (1, 3):
            x = _phased(bk, n, dtype, off, seed=n + off)
            xn = _np(x).astype(np.float64 if kind == "f" else np.int64)
            c = np.cumsum(xn)
            r = accumulate(ops.add, x)
            assert r.dtype == np.dtype(dtype)
            if kind == "f":
                close(r, c, rtol=1e-4, atol=1e-3 * max(1.0, math.sqrt(n)))
            else:
                close(r, c.astype(dtype))
            if n == 3 * T + 5:
                got = _np(accumulate(ops.add, x, include_initial=True))
                exp = np.concatenate([[0], c]).astype(dtype)
                ex = _np(accumulate(ops.add, x, exclusive=True))
                if kind == "f":
                    close(got, exp, rtol=1e-4, atol=1e-3 * math.sqrt(n))
                    close(ex, exp[:-1], rtol=1e-4, atol=1e-3 * math.sqrt(n))
                else:
                    assert np.array_equal(got, exp) and np.array_equal(ex, exp[:-1])
    assert "make_pipeline_scan" in _pipeline_kernels()
    n = 5 * T + 7
    x = _phased(bk, n, dtype, 0, seed=5)
    xn = _np(x)
    out = bk.empty(n + 1, dtype=dtype)   # one element off the input's phase: scalar stores
    accumulate(ops.add, x, out=out[1:])
    close(out[1:], np.cumsum(xn.astype(np.float64 if kind == "f" else np.int64)).astype(dtype),
          rtol=1e-4, atol=1e-3 * math.sqrt(n))
    m = rand(bk, (3, 4 * T), dtype, seed=9)[:, 1:]
    close(accumulate(ops.add, m, axis=-1),
          np.cumsum(_np(m).astype(np.float64 if kind == "f" else np.int64), axis=-1).astype(dtype),
          rtol=1e-4, atol=1e-3 * math.sqrt(4 * T))
    assert np.array_equal(_np(accumulate(ops.maximum, x, init=xn[7])),
                          np.maximum.accumulate(np.maximum(xn, xn[7])))
    left = accumulate(lambda a, b: a, x)
    assert np.array_equal(_np(left), np.full(n, xn[0]))
    if kind == "f":
        y = bk.asarray(rng_uniform(n, dtype))
        close(accumulate(ops.multiply, y), np.cumprod(_np(y).astype(np.float64)), rtol=1e-3)


@pytest.mark.parametrize("window", [False, True], ids=["groups", "window"])
def test_pipelined_deterministic_scan(bk, sim, monkeypatch, window):
    """Deterministic mode on the pipelined kernel, in groups and with the fixed window: rows
    of 36 tiles (tiles wait for group aggregates, which the reduce squad publishes, and for a
    PREFIX groups back; or for the PREFIX 32 tiles back; the aggregates of the row's first
    tiles read from their own slots), the same bits whatever order the simulator's memory
    model makes stores visible in, close to float64; a batch of rows and include_initial too."""
    _override(monkeypatch, scan={"pipeline": True, "pipe_min": 0, "det_lookback": 1,
                                 "det_group": 0 if window else 4})
    p = tuning.params("scan")
    T = p["pipe_warps"] * 32 * p["pipe_vectors"] * 4
    x = _phased(bk, 35 * T + 9, "float32", 0, seed=35)
    m = rand(bk, (2, 3 * T + 1), "float32", seed=36)
    runs = []
    for seed in (1, 2) if sim else (1, 2, 3):
        if sim:
            from forge_array.intrinsics import sim_impl
            sim_impl.memory_model.reset(seed=seed)
        runs.append((_np(accumulate(ops.add, x, deterministic=True)),
                     _np(accumulate(ops.add, m, axis=-1, deterministic=True, include_initial=True))))
    assert "make_pipeline_scan" in _pipeline_kernels()
    for a, b in runs[1:]:
        assert np.array_equal(runs[0][0], a) and np.array_equal(runs[0][1], b)
    n = x.shape[0]
    close(runs[0][0], np.cumsum(_np(x).astype(np.float64)), rtol=1e-4, atol=1e-3 * math.sqrt(n))
    ref = np.concatenate([np.zeros((2, 1)), np.cumsum(_np(m).astype(np.float64), axis=-1)], axis=1)
    close(runs[0][1], ref, rtol=1e-4, atol=1e-3 * math.sqrt(3 * T))


def test_pipeline_trace_stamps(bk, sim, monkeypatch):
    """The timeline diagnostic (``FORGE_ARRAY_SCAN_TRACE``): every tile of a traced launch
    stamps, in order, its ticket, its published state, its look-back and its store, and the
    block that ran it; the result is unchanged."""
    _override(monkeypatch, scan={"pipeline": True, "pipe_min": 0})
    monkeypatch.setattr(scan_spec, "TRACE", True)
    p = tuning.params("scan")
    T = p["pipe_warps"] * 32 * p["pipe_vectors"] * 4
    n = 6 * T + 5
    x = _phased(bk, n, "float32", 0, seed=21)
    close(accumulate(ops.add, x), np.cumsum(_np(x).astype(np.float64)), rtol=1e-4,
          atol=1e-3 * math.sqrt(n))
    plan = next(q for q in dispatch_scan.fast_plans().values() if "pipeline" in q.kernel.name)
    ntiles, grid = plan.tail[0], plan.grid
    assert ntiles == 7
    c = _np(plan.state.counter)
    assert c.size >= scan_spec.trace_words(ntiles)
    stamps = c[scan_spec.STAT_WORDS:scan_spec.trace_words(ntiles)].reshape(ntiles, scan_spec.TRACE_STAMPS)
    assert (stamps[:, :4] > 0).all()
    assert (np.diff(stamps[:, :4].astype(np.int64), axis=1) >= 0).all()
    assert (stamps[:, 4] < grid).all()


@pytest.mark.parametrize("row_tiles,short,long", [(3, 2.0, 3.0), (0.5, 0.4, 0.75)])
def test_pipelined_scan_keeps_short_rows_on_the_tile_scan(bk, sim, monkeypatch, row_tiles, short,
                                                          long):
    """Rows of a batch shorter than ``pipe_row_tiles`` tiles (a float: 0.5 on sm_90) go to the
    tile scan; rows long enough take the pipeline, whole tiles and partial ones (rows of 0.75
    tile: one partial tile each, its aligned middle in one bulk copy)."""
    _override(monkeypatch, scan={"pipeline": True, "pipe_min": 0, "pipe_row_tiles": row_tiles})
    p = tuning.params("scan")
    T = p["pipe_warps"] * 32 * p["pipe_vectors"] * 4
    for k, (frac, pipelined) in enumerate(((short, False), (long, True))):
        dispatch_scan.fast_plans().clear()
        n = -(-int(frac * T) // 4) * 4      # rows of one 16-byte phase (pipeline: needed)
        x = rand(bk, (3, n), "float32", seed=11 + k)
        close(accumulate(ops.add, x, axis=-1), np.cumsum(_np(x).astype(np.float64), axis=-1),
              rtol=1e-4, atol=1e-3 * math.sqrt(n))
        assert ("make_pipeline_scan" in _pipeline_kernels()) == pipelined, (frac, _pipeline_kernels())


@pytest.mark.parametrize("rcm,kernel", [(None, "make_column_scan"), (0, "make_tile_scan")])
def test_short_rows_column_kernel_cap(bk, sim, monkeypatch, rcm, kernel):
    """Many short rows go to the column kernel (a thread per row) up to ``rows_column_max``
    elements (default: a quarter of the tile scan's tile); beyond it the tile scan takes them,
    with the same values."""
    cols = {"rows_staged_vecs": 0}
    if rcm is not None:
        cols["rows_column_max"] = rcm
    _override(monkeypatch, scan={"pipeline": False}, scan_columns=cols)
    dispatch_scan.fast_plans().clear()
    x = rand(bk, (70, 3), "float32", seed=5)
    close(accumulate(ops.add, x, axis=1), np.cumsum(_np(x).astype(np.float64), axis=1),
          rtol=1e-5, atol=1e-5)
    assert kernel in _pipeline_kernels(), _pipeline_kernels()


def rng_uniform(n, dtype):
    return np.random.default_rng(n).uniform(0.999, 1.001, n).astype(dtype)


def test_pipelined_scan_ptx(offline_ptx, tmp_path):
    """The pipelined scan's GPU code: one bulk copy in and one out per whole tile and per
    partial tile's aligned middle (two of each in the PTX), mbarriers, named barriers,
    128-bit shared reads (float32), static and dynamic tile buffers (the latter with two
    look-back warps); ptxas (sm_90) accepts it without spilling."""
    ptx_file = tmp_path / "pipe.ptx"
    out = offline_ptx("""
        import numpy as np
        from forge_array import ops, runtime
        from forge_array.kernels.scan import pipeline as kp
        I64 = runtime.i64
        f32 = np.dtype("float32")
        args = ((runtime.tuple_ptr_t((f32,)),) * 3 + (I64,) * 11
                + (runtime.ptr_t(np.uint32), runtime.tuple_ptr_t((f32,)), runtime.ptr_t(np.uint64),
                   I64, I64, I64))
        for dyn in (False, True):
            ptx = runtime.compile_ptx_offline(kp.make_pipeline_scan,
                (ops.add.fn, f32, 4, 13 if dyn else 7, 4 if dyn else 3, 0, False, True, True, False,
                 0, 1, dyn, 2 if dyn else 1), args)
            print("load", ptx.count("cp.async.bulk.shared::cluster.global"),
                  "store", ptx.count("cp.async.bulk.global.shared::cta"),
                  "try_wait", ptx.count("mbarrier.try_wait.parity"), "named", ptx.count("bar.sync"),
                  "v4", ptx.count("ld.shared.v4.f32"), "extern", ptx.count(".extern .shared"))
        open(PTX_FILE, "w").write(ptx)
    """.replace("PTX_FILE", repr(str(ptx_file))))
    static, dynamic = (line.split() for line in out.strip().splitlines()[-2:])
    for words in (static, dynamic):
        got = dict(zip(words[::2], map(int, words[1::2])))
        assert got["load"] == 2 and got["store"] == 2 and got["try_wait"] >= 4
        assert got["named"] >= 3 and got["v4"] > 0
    assert int(static[-1]) == 0 and int(dynamic[-1]) == 1
    ptxas = shutil.which("ptxas") or next(
        (p for p in ("/usr/local/cuda/bin/ptxas", "/usr/local/cuda-13.0/bin/ptxas") if os.path.exists(p)), None)
    if ptxas:
        info = subprocess.run([ptxas, "-arch=sm_90", "-v", str(ptx_file), "-o", os.devnull],
                              capture_output=True, text=True)
        assert info.returncode == 0, info.stderr
        assert "0 bytes spill stores" in info.stderr, info.stderr


@pytest.mark.parametrize("n", [1, 33, 700, 3000])
def test_mid_size_scans_take_smaller_tiles(monkeypatch, bk, n):
    """``min_tiles``: fewer items per thread while a scan would fill few tiles; results
    unchanged."""
    from forge_array.dispatch.scan import state

    p = dict(tuning.params("scan"), min_tiles=8, item_bytes_min=4)
    monkeypatch.setattr(tuning, "params", lambda kind, _p=tuning.params: p if kind == "scan" else _p(kind))
    f32 = (np.dtype(np.float32),)
    items = state.items_for(p, f32)
    small = state.items_for_size(p, items, n, f32)
    assert small <= items and (small == 1 or n >= 8 * p["block"] * small)
    dispatch_scan.fast_plans().clear()  # plan these launches with the parameters above
    a = np.random.default_rng(n).random(n, dtype=np.float32)
    got = cumulative_sum(bk.asarray(a))
    dispatch_scan.fast_plans().clear()
    np.testing.assert_allclose(got if bk is np else got.get(), np.cumsum(a, dtype=np.float64),
                               rtol=1e-4)


def test_namespace_accumulate_init_per_scan():
    """``xp.accumulate`` takes a forge_array array of one value per scan as ``init``."""
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    x = xp.asarray(a)
    r = xp.accumulate(ops.add, x, axis=0, init=xp.asarray(np.array([1, -2, 3, 40])))
    np.testing.assert_array_equal(np.from_dlpack(r), np.cumsum(a, axis=0) + [1, -2, 3, 40])
    r = xp.accumulate(ops.maximum, x, axis=1, init=xp.asarray(np.array([5, 0, 9])),
                      include_initial=True)
    want = np.maximum.accumulate(np.concatenate([[[5], [0], [9]], a], axis=1), axis=1)
    np.testing.assert_array_equal(np.from_dlpack(r), want)
    with pytest.raises(ValueError, match="does not match"):
        xp.accumulate(ops.add, x, axis=0, init=xp.asarray(np.zeros(3, dtype=np.int64)))
