"""The host fast paths of reductions along axes and of matrix-vector products: a repeated
call of the namespace (``xp.sum(X, axis=k)``, ``A @ x``, ``x @ A``, ``vecdot``,
``tensordot``) replays the launch cached for its operands' layout without planning again;
a replay reads the new data, never serves another layout (strides, 16-byte phase, dtype,
shape), never lets through arguments the checked path rejects, and the per-stream scratch
(partials, tickets) that replays share gives right results when plans interleave."""

import numpy as np
import pytest

import forge_array as xp
from forge_array.dispatch import axis_reduce as dispatch_axis
from forge_array.primitives import axis_reduce as ar
from forge_array.primitives import matvec as mv
from forge_array.runtime import config

_DEVICE = xp.__array_namespace_info__().default_device()


def _x(a):
    """An Array on the default device (cpu in the simulator, the GPU with CuPy): asarray of
    a NumPy array alone would stay on the cpu, where the kernels do not run on a GPU machine."""
    return xp.asarray(a, device=_DEVICE)


def _np(r):
    return np.asarray(r.to_device("cpu"))


def _data(shape, seed, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _counting(monkeypatch, owner, name):
    """Count the calls of ``owner.name`` (a module function or a class attribute)."""
    calls = []
    orig = getattr(owner, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return orig(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


@pytest.fixture
def fresh():
    dispatch_axis.PLANS.clear()
    dispatch_axis.FAST.clear()
    yield
    dispatch_axis.PLANS.clear()
    dispatch_axis.FAST.clear()


def _close(r, exp, rtol=1e-4):
    assert r.shape == np.shape(exp)
    np.testing.assert_allclose(_np(r).astype(np.float64), np.asarray(exp, np.float64), rtol=rtol,
                               atol=1e-4)


def test_axis_reduction_replays_its_plan(fresh, monkeypatch):
    plans = _counting(monkeypatch, dispatch_axis.layout, "plan_launch")
    slow = _counting(monkeypatch, ar, "axis_mapreduce")
    host = _data((40, 12), 0)
    X = _x(host.copy())
    _close(xp.sum(X, axis=0), host.sum(0, dtype=np.float64))
    assert (len(plans), len(slow)) == (1, 1)
    new = host * np.float32(-2) + np.float32(1)
    X[...] = _x(new)
    for _ in range(2):   # the same layout: replayed from the namespace, on the new data
        _close(xp.sum(X, axis=0), new.sum(0, dtype=np.float64))
    assert (len(plans), len(slow)) == (1, 1)
    # axis=1, axis=-1 and axis=(1,) are one reduction: one plan
    for axis in (1, -1, (1,), (-1,)):
        _close(xp.sum(X, axis=axis), new.sum(1, dtype=np.float64))
    assert len(plans) == 2 and len(slow) == 2
    # keepdims, another dtype argument and another reduction are other calls
    _close(xp.sum(X, axis=1, keepdims=True), new.sum(1, keepdims=True, dtype=np.float64))
    _close(xp.sum(X, axis=1, dtype=xp.float64), new.sum(1, dtype=np.float64))
    assert xp.sum(X, axis=1, dtype=xp.float64).dtype == xp.float64
    assert len(slow) == 4
    for _ in range(2):
        _close(xp.max(X, axis=0), new.max(0))
        r = xp.any(X > 0.5, axis=1)
        assert r.dtype == xp.bool and _np(r).tolist() == (new > 0.5).any(1).tolist()
        _close(xp.prod(X[:4], axis=1), new[:4].prod(1, dtype=np.float64))
    assert len(slow) == 7


def test_axis_replays_never_serve_another_layout(fresh, monkeypatch):
    plans = _counting(monkeypatch, dispatch_axis.layout, "plan_launch")
    host = _data((40, 12), 1)
    X = _x(host.copy())
    _close(xp.sum(X, axis=0), host.sum(0, dtype=np.float64))
    assert len(plans) == 1
    # the same layout at another address (16 bytes on: the same phase) replays
    same = xp.reshape(_x(np.concatenate([np.zeros(4, np.float32), host.ravel()]))[4:], (40, 12))
    _close(xp.sum(same, axis=0), host.sum(0, dtype=np.float64))
    assert len(plans) == 1
    others = [
        ("strides", _x(host.T.copy()).mT, host),
        ("phase", xp.reshape(_x(np.concatenate([np.zeros(1, np.float32), host.ravel()]))[1:], (40, 12)),
         host),
        ("dtype", _x(host.astype(np.float64)), host),
        ("shape", _x(host[:, :11].copy()), host[:, :11]),
        ("reversed", _x(host[::-1].copy())[::-1], host),
        ("ndim", _x(host.reshape(40, 3, 4)), host.reshape(40, 3, 4)),
    ]
    for what, v, h in others:
        n = len(plans)
        for _ in range(2):
            _close(xp.sum(v, axis=0), h.sum(0, dtype=np.float64))
        assert len(plans) == n + 1, what


def test_errors_survive_warm_axis_caches():
    X = _x(_data((6, 5), 2))
    for _ in range(2):
        xp.sum(X, axis=0), xp.max(X, axis=1), xp.all(X, axis=0), xp.sum(X, axis=(0,))
    with pytest.raises(IndexError):
        xp.sum(X, axis=2)
    with pytest.raises(IndexError):
        xp.max(X, axis=-3)
    with pytest.raises(TypeError):
        xp.sum(X, axis=0, keepdims=1)
    with pytest.raises(TypeError):
        xp.sum(X, axis=True)
    with pytest.raises(TypeError):
        xp.sum(X, axis=0, dtype="float32")
    with pytest.raises(ValueError):
        xp.sum(X, axis=(0, 0))
    with pytest.raises(TypeError):
        xp.max(X > 0, axis=0)
    with pytest.raises(ValueError):
        xp.max(_x(np.zeros((0, 5), np.float32)), axis=0)
    with pytest.raises(TypeError):
        xp.sum(_x(np.ones((3, 2), np.complex64)), axis=0, dtype=xp.float32)


def test_kernels_off_after_warm_up(fresh, monkeypatch):
    X = _x(_data((8, 6), 3))
    A, v = _x(_data((5, 6), 4)), _x(_data(6, 5))
    xp.sum(X, axis=0), A @ v, A @ v
    replays = _counting(monkeypatch, dispatch_axis.Replay, "__call__")
    monkeypatch.setattr(config, "KERNELS_ENABLED", False)
    _close(xp.sum(X, axis=0), _np(X).sum(0, dtype=np.float64))
    _close(A @ v, _np(A).astype(np.float64) @ _np(v))
    assert not replays


def test_matmul_replays_its_plan(fresh, monkeypatch):
    routed = _counting(monkeypatch, mv, "route_matmul")
    plans = _counting(monkeypatch, dispatch_axis.layout, "plan_launch")
    A, vp = _data((6, 300), 5), _data(300, 6)
    B = _data((300, 8), 8)
    cases = [
        ("A@x", A, vp),
        ("x@A", vp, B),
        ("x@x", vp, vp[::-1].copy()),
        ("A@B1", A, vp[:, None].copy()),
        ("a1@B", vp[None, :].copy(), B),
        ("batched", A.reshape(2, 3, 300), vp),
    ]
    for what, a, b in cases:
        xa, xb = _x(a.copy()), _x(b.copy())
        n_routed = len(routed)
        r = xa @ xb
        assert r.dtype == xp.float32
        _close(r, np.matmul(a.astype(np.float64), b))
        assert len(routed) == n_routed + 1, what
        n_plans = len(plans)
        # new data, the same layouts: a replay from the namespace
        a2, b2 = a * np.float32(-3) + np.float32(1), b * np.float32(0.5)
        xa[...], xb[...] = _x(a2), _x(b2)
        for _ in range(2):
            _close(xp.matmul(xa, xb), np.matmul(a2.astype(np.float64), b2))
        assert len(routed) == n_routed + 1 and len(plans) == n_plans, what


def test_matmul_replays_never_serve_another_layout(fresh, monkeypatch):
    plans = _counting(monkeypatch, dispatch_axis.layout, "plan_launch")
    A, v = _data((6, 300), 9), _data(300, 10)
    _close(_x(A) @ _x(v), A.astype(np.float64) @ v)
    shifted = np.concatenate([np.zeros(1, np.float32), A.ravel()])
    others = [
        ("transposed", _x(A.T.copy()).mT, _x(v), A, v),
        ("phase", xp.reshape(_x(shifted)[1:], (6, 300)), _x(v), A, v),
        ("x phase", _x(A), _x(np.concatenate([[0], v]).astype(np.float32))[1:], A, v),
        ("dtype", _x(A.astype(np.float64)), _x(v.astype(np.float64)), A, v),
        ("shape", _x(A[:5].copy()), _x(v), A[:5], v),
        ("other side", _x(v[:6].copy()), _x(A), v[:6], A),
    ]
    for what, xa, xb, a, b in others:
        n = len(plans)
        for _ in range(2):
            _close(xa @ xb, np.matmul(a.astype(np.float64), b.astype(np.float64)))
        assert len(plans) == n + 1, what
    # mixed dtypes: promoted (a copy) every time, the result in the promoted dtype
    for _ in range(2):
        r = _x(A) @ _x(v.astype(np.float64))
        assert r.dtype == xp.float64
        _close(r, A.astype(np.float64) @ v.astype(np.float64))


def test_errors_survive_warm_matmul_caches():
    A, v = _x(_data((4, 7), 11)), _x(_data(7, 12))
    for _ in range(2):
        A @ v, v @ A.mT, xp.vecdot(A, v), xp.tensordot(A, v, axes=1)
    with pytest.raises(ValueError):
        A @ _x(_data(6, 13))
    with pytest.raises(ValueError):
        A.mT @ v
    with pytest.raises(TypeError):
        (A > 0) @ (v > 0)
    with pytest.raises(IndexError):
        xp.vecdot(A, v, axis=2)
    with pytest.raises(ValueError):
        xp.vecdot(A, v, axis=0)
    with pytest.raises(ValueError):
        xp.tensordot(A, v, axes=2)
    with pytest.raises(ValueError):
        xp.tensordot(A, v, axes=-1)


def test_vecdot_and_tensordot_replay(fresh, monkeypatch):
    plans = _counting(monkeypatch, dispatch_axis.layout, "plan_launch")
    a, b = _data((5, 40), 14), _data(40, 15)
    xa, xb = _x(a.copy()), _x(b.copy())
    exp = a.astype(np.float64) @ b
    for _ in range(3):
        _close(xp.vecdot(xa, xb), exp)
        _close(xp.vecdot(xb, xa, axis=-1), exp)   # the larger operand second
        _close(xp.vecdot(xa, xb, axis=1), exp)
        _close(xp.tensordot(xa, xb, axes=1), exp)
        _close(xp.tensordot(xb, xa.mT, axes=1), exp)
        _close(xp.tensordot(xa, xb, axes=((1,), (0,))), exp)
    built = len(plans)
    # a replay on new data, and another axis of the same operands is another launch
    a2 = a * np.float32(2)
    xa[...] = _x(a2)
    _close(xp.vecdot(xa, xb), a2.astype(np.float64) @ b)
    _close(xp.tensordot(xb, xa.mT, axes=1), a2.astype(np.float64) @ b)
    assert len(plans) == built
    sq = _data((6, 6), 16)
    xs = _x(sq)
    for _ in range(2):
        _close(xp.vecdot(xs, xs, axis=0), (sq.astype(np.float64) ** 2).sum(0))
        _close(xp.vecdot(xs, xs, axis=1), (sq.astype(np.float64) ** 2).sum(1))


def test_split_launches_share_the_stream_scratch(fresh):
    """Plans with partials (several blocks per output) carve them from one scratch buffer
    per stream: interleaved, with tuple-valued partials (var), they stay right."""
    h1, h2, h3 = _data((200, 8), 17), _data((64, 40), 18), _data((300, 8), 19)
    v3 = _data(300, 20)
    X1, X2, X3, V3 = _x(h1), _x(h2), _x(h3), _x(v3)
    for _ in range(2):
        _close(xp.sum(X1, axis=0), h1.sum(0, dtype=np.float64))
        _close(xp.var(X1, axis=0), h1.astype(np.float64).var(0), rtol=1e-3)
        _close(V3 @ X3, v3.astype(np.float64) @ h3)
        _close(xp.max(X2, axis=0), h2.max(0))
        _close(xp.sum(X1, axis=0), h1.sum(0, dtype=np.float64))
    assert any(p["split"] > 1 for p in dispatch_axis.PLANS.values() if isinstance(p, dict))
