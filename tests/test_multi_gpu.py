"""Arrays on a GPU other than the current one: every operation runs on the arrays' GPU and
returns arrays there (CuPy's current device stays ``cuda:0``, the data lives on ``cuda:1``).
Needs two GPUs; differential against NumPy (float64 references for floats)."""

import numpy as np
import pytest

import forge_array as xp
from forge_array import ops

cp = pytest.importorskip("cupy")


def _gpus():
    try:
        return cp.cuda.runtime.getDeviceCount()
    except Exception:  # no driver
        return 0


pytestmark = pytest.mark.skipif(_gpus() < 2, reason="needs two GPUs")

DEV = "cuda:1"


@pytest.fixture(autouse=True)
def first_gpu_current():
    with cp.cuda.Device(0):
        yield
        assert cp.cuda.runtime.getDevice() == 0


def _h(a):
    if isinstance(a, tuple):
        return tuple(_h(c) for c in a)
    assert str(a.device) == DEV, a.device
    return np.asarray(a.to_device("cpu"))


def _data(seed=0):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(100_000).astype(np.float32)
    m = rng.standard_normal((300, 200)).astype(np.float32)
    return v, m, xp.asarray(v, device=DEV), xp.asarray(m, device=DEV)


def close(got, want, tol=1e-4):
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=tol, atol=tol)


def test_reductions_and_scans_of_the_namespace():
    v, m, x, a = _data()
    w, mw = v.astype(np.float64), m.astype(np.float64)
    close(_h(xp.sum(x)), w.sum(), 1e-2)
    close(_h(xp.mean(a, axis=0)), mw.mean(axis=0))
    close(_h(xp.std(a, axis=1)), mw.std(axis=1))
    close(_h(xp.max(a, axis=0)), mw.max(axis=0))
    assert int(_h(xp.argmax(x))) == int(np.argmax(v))
    close(_h(xp.sum(a, axis=1)), mw.sum(axis=1))
    close(_h(xp.cumulative_sum(a, axis=0)), np.cumsum(mw, axis=0), 1e-3)
    close(_h(xp.cumulative_sum(x))[-1], w.sum(), 1e-1)


def test_generic_reductions_scans_and_products():
    v, m, x, a = _data(1)
    w, mw = v.astype(np.float64), m.astype(np.float64)
    close(_h(xp.reduce(ops.add, x)), w.sum(), 1e-2)
    close(_h(xp.reduce(lambda p, q: max(p, q), a, axis=0)), mw.max(axis=0))
    close(_h(xp.mapreduce(lambda t: t * t, ops.add, a, axis=1)), (mw * mw).sum(axis=1), 1e-3)
    close(_h(xp.accumulate(ops.add, a, axis=0)), np.cumsum(mw, axis=0), 1e-3)
    close(_h(xp.accumulate(ops.add, a, axis=0, init=2.0)), np.cumsum(mw, axis=0) + 2, 1e-3)
    per = xp.asarray(m[0], device=DEV)
    close(_h(xp.accumulate(ops.add, a, axis=0, init=per)), np.cumsum(mw, axis=0) + mw[0], 1e-3)
    g = np.abs(m[:, 0]) * 0.5 + 0.25
    hs = _h(xp.accumulate(ops.affine, (xp.asarray(g, device=DEV), a[:, 1])))
    h, want = 0.0, []
    for gi, bi in zip(g.astype(np.float64), mw[:, 1]):
        h = gi * h + bi
        want.append(h)
    close(hs[1], want, 1e-3)
    u = xp.asarray(m[:, 0].copy(), device=DEV)
    r = xp.asarray(m[0].copy(), device=DEV)
    close(_h(xp.matvec(a, r)), mw @ mw[0], 1e-3)
    close(_h(xp.vecmat(u, a)), mw[:, 0] @ mw, 1e-3)
    close(_h(a @ r), mw @ mw[0], 1e-3)
    close(_h(xp.matmul(a.mT, a)), mw.T @ mw, 1e-2)


def test_element_wise_fused_and_indexing():
    v, m, x, a = _data(2)
    w = v.astype(np.float64)
    close(_h(x * 2 + 1), w * 2 + 1)
    close(_h(xp.exp(x)), np.exp(w), 1e-3)
    close(_h(xp.where(x > 0, x, 0.0)), np.where(w > 0, w, 0.0))
    f = xp.fuse(lambda p, q: xp.sum(p * q + 1))
    close(_h(f(x, x)), (w * w + 1).sum(), 1)
    close(_h(xp.sort(x)), np.sort(w))
    assert np.array_equal(_h(xp.nonzero(x > 1)[0]), np.nonzero(v > 1)[0])
    close(_h(x[x > 1]), w[v > 1])
    close(_h(xp.take(x, xp.asarray([3, 1, 4], device=DEV))), w[[3, 1, 4]])
    close(_h(xp.unique_values(xp.round(x))), np.unique(np.round(w)))
