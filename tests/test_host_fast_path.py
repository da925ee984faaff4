"""The host fast path of full reductions and copies: a repeated call replays a cached launch
(``primitives.reductions.full_fast``, ``dispatch.reduce.plan``/``replay``, the namespace's record
of checked arguments).  A replay must give what the first call gives, on new data, for every
layout, and must never let through arguments the checked path rejects."""

import importlib
import threading

import numpy as np
import pytest

import forge_array as xp
from forge_array import primitives


def _x(a):
    """An Array on the default device (cpu in the simulator, the GPU with CuPy)."""
    return xp.asarray(a)


def _np(r):
    return np.asarray(r.to_device("cpu"))


NAMES = ["sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin"]


def _ref(name, a, keepdims):
    if name in ("argmax", "argmin") and not keepdims:
        return getattr(np, name)(a)
    if name == "prod":
        return np.prod(a.astype(np.float64), keepdims=keepdims)
    return getattr(np, name)(a, keepdims=keepdims)


# (layout, keepdims): a misaligned 1-D view (vector path with a peel), and a strided 2-D
# view with keepdims (strided path) -- each simulated launch costs a fraction of a second
CASES = [("misaligned", False), ("strided-2d", True)]


def _view(X, layout):
    return X[1:38] if layout == "misaligned" else xp.reshape(X[:80], (8, 10))[::2, 1:]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("layout,keepdims", CASES)
def test_replayed_full_reductions_match_numpy_on_new_data(name, layout, keepdims):
    rng = np.random.default_rng(1)
    host = rng.standard_normal(90).astype(np.float32)
    X = _x(host.copy())
    v = _view(X, layout)
    fn = getattr(xp, name)
    first = fn(v, keepdims=keepdims)
    # the same view with new values: the replay must read the data, not reuse a result
    new = host * np.float32(-2.0) + np.float32(1.0)
    X[...] = _x(new)
    again = fn(v, keepdims=keepdims)
    for r, h in ((first, host), (again, new)):
        exp = _ref(name, _view(h, layout) if layout == "misaligned" else h[:80].reshape(8, 10)[::2, 1:],
                   keepdims)
        assert r.shape == np.shape(exp) and r.dtype == first.dtype
        np.testing.assert_allclose(_np(r).astype(np.float64), np.asarray(exp, dtype=np.float64),
                                   rtol=2e-4, atol=1e-4, err_msg=f"{name} {layout}")


@pytest.mark.parametrize("name", ["sum", "max", "mean", "std", "any", "argmax"])
@pytest.mark.parametrize("layout", ["reversed", "reversed-misaligned", "transposed",
                                    "reversed-columns"])
def test_reversed_and_transposed_views_replay(name, layout, monkeypatch):
    """An order-free full reduction of a reversed or transposed view reads the view forwards
    from its lowest address: its launch replays (the general path is not taken again) on the
    input's address plus the layout's offset, with new values in the same memory."""
    launch = importlib.import_module("forge_array.dispatch.reduce")
    rng = np.random.default_rng(5)
    host = rng.standard_normal(70).astype(np.float32)
    def view(a):
        mod = xp if isinstance(a, xp.Array) else np
        m = mod.reshape(a[:60], (6, 10))
        return {"reversed": lambda: a[::-1], "reversed-misaligned": lambda: a[37:2:-1],
                "transposed": lambda: m.T, "reversed-columns": lambda: m[:, ::-1]}[layout]()

    X = _x(host.copy())
    fn = getattr(xp, name)
    first = fn(view(X))
    new = host * np.float32(-3.0) + np.float32(2.0)
    X[...] = _x(new)
    if name != "argmax":  # order-free: replayed from its cached launch
        def general(*args, **kwargs):
            raise AssertionError("the general path ran again")

        monkeypatch.setattr(launch, "full_reduce", general)
    again = fn(view(X))
    for r, h in ((first, host), (again, new)):
        exp = getattr(np, name)(view(h).astype(np.float64))
        np.testing.assert_allclose(_np(r).astype(np.float64), np.asarray(exp, np.float64),
                                   rtol=2e-5, atol=1e-5, err_msg=f"{name} {layout}")


@pytest.mark.parametrize("name", ["any", "all"])
def test_replayed_logical_reductions(name):
    fn = getattr(xp, name)
    for a, keepdims in ((np.array([False] * 17 + [True]), False), (np.ones(40, np.float32), True)):
        x = _x(a)
        r1, r2 = fn(x, keepdims=keepdims), fn(x, keepdims=keepdims)
        exp = getattr(np, name)(a, keepdims=keepdims)
        assert r1.dtype == xp.bool and r2.dtype == xp.bool
        assert r2.shape == np.shape(exp)
        assert _np(r2).tolist() == np.asarray(exp).tolist() == _np(r1).tolist()


def test_bool_argmax_replays(bk):
    pr = importlib.import_module("forge_array.primitives.reductions")
    a = bk.asarray(np.array([False, False, True, True]))
    assert [int(pr.argmax(a)) for _ in range(3)] == [2, 2, 2]
    assert [int(pr.argmin(a)) for _ in range(3)] == [0, 0, 0]


def test_sum_dtypes_are_kept_apart():
    x = _x(np.arange(1, 11, dtype=np.int32))
    for _ in range(2):
        assert xp.sum(x).dtype == xp.int64
        r = xp.sum(x, dtype=xp.float32)
        assert r.dtype == xp.float32 and float(r) == 55.0
        assert xp.prod(x, dtype=xp.float64).dtype == xp.float64


def test_var_corrections_are_kept_apart():
    a = np.arange(10, dtype=np.float64)
    x = _x(a)
    for _ in range(2):
        assert float(xp.var(x)) == pytest.approx(np.var(a))
        assert float(xp.std(x, correction=2.5)) == pytest.approx(np.std(a, ddof=2.5))


def test_errors_survive_warm_caches():
    x = _x(np.arange(5, dtype=np.float32))
    xp.sum(x), xp.sum(x, keepdims=True), xp.var(x, correction=1), xp.sum(x, dtype=xp.float32)
    xp.max(x), xp.argmax(x), xp.any(x)
    with pytest.raises(TypeError):
        xp.sum(x, keepdims=1)
    with pytest.raises(TypeError):
        xp.max(x, keepdims=0)
    with pytest.raises(TypeError):
        xp.argmax(x, keepdims=1)
    with pytest.raises(TypeError):
        xp.var(x, correction=True)
    with pytest.raises(TypeError):
        xp.var(x, correction=np.True_)
    with pytest.raises(TypeError):
        xp.sum(x, dtype="float32")
    with pytest.raises(TypeError):
        xp.sum(np.arange(5.0))
    with pytest.raises(ValueError):
        xp.max(_x(np.zeros(0, np.float32)))
    with pytest.raises(ValueError):
        xp.argmax(_x(np.zeros(0, np.float32)))
    c = _x(np.ones(4, np.complex64))
    with pytest.raises(TypeError):
        xp.sum(c, dtype=xp.float32)
    with pytest.raises(TypeError):
        xp.max(c)


def test_degenerate_variance_keeps_nan_and_silence():
    import warnings

    x = _x(np.array([3.0], np.float32))
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert np.isnan(float(xp.var(x, correction=1)))
            assert np.isnan(float(xp.std(x, correction=2)))


def test_threads_replay_independently(sim):
    if sim:
        pytest.skip("numba's simulator runs kernels of one host thread at a time")
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(500).astype(np.float32) for _ in range(4)]
    xs = [_x(a) for a in arrays]
    errors = []

    def work(k):
        try:
            for _ in range(3):
                r = float(xp.sum(xs[k]))
                assert r == pytest.approx(float(arrays[k].sum(dtype=np.float64)), rel=1e-4, abs=1e-3)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


@pytest.mark.parametrize("n,step,off", [(0, 1, 0), (37, 1, 1), (20, -3, 2), (33, 2, 0)])
def test_copy_replays_match(bk, n, step, off):
    base = bk.arange(off + abs(step) * n + 1, dtype=np.float32)
    x = base[off:][::step][:n]
    for _ in range(2):
        y = primitives.copy(x)
        assert y.flags.c_contiguous
        assert bool((y == x).all())
    out = bk.empty_like(x)
    assert primitives.copy(x, out) is out
    assert bool((out == x).all())


def test_copy_errors_and_fallbacks_after_warm_up(bk):
    x = bk.arange(6.0)
    primitives.copy(x)
    with pytest.raises(ValueError):
        primitives.copy(x, bk.empty(5))
    s = np.array(["a", "bc"])  # no raw type of that size: NumPy copies
    for _ in range(2):
        assert primitives.copy(s).tolist() == ["a", "bc"]
    e = bk.zeros((0, 3))
    for _ in range(2):
        assert primitives.copy(e).shape == (0, 3)


def _square(v):
    return v * v


def _pair(v):
    return (v, v)


def test_replayed_generic_reductions(bk, monkeypatch):
    """``reduce`` / ``mapreduce`` of one array over all axes replay the launch of an earlier
    call with the same function and operator objects on the same layout, on new data; another
    function, operator, keepdims, dtype or layout is planned on its own, and a replay never
    runs the checked path again."""
    from forge_array import ops
    pr = importlib.import_module("forge_array.primitives.reductions")
    generic = importlib.import_module("forge_array.primitives.reductions.generic")
    rng = np.random.default_rng(5)
    host = rng.standard_normal(90).astype(np.float32)
    X = xp.asarray(bk.asarray(host.copy()))   # where our kernels run (CuPy on a GPU)
    v = X[1:38]
    h = host[1:38].astype(np.float64)
    first = [xp.mapreduce(_square, ops.add, v), xp.reduce(ops.maximum, v),
             xp.mapreduce(_pair, ops.minmax, v), xp.mapreduce(_square, ops.add, v, keepdims=True)]
    calls = []
    orig = pr.mapreduce
    counted = lambda *a, **k: calls.append(1) or orig(*a, **k)  # noqa: E731
    monkeypatch.setattr(pr, "mapreduce", counted)          # the namespace's mapreduce
    monkeypatch.setattr(generic, "mapreduce", counted)     # reduce's
    new = host * np.float32(-3.0) + np.float32(0.5)
    X[...] = xp.asarray(bk.asarray(new))
    hn = new[1:38].astype(np.float64)
    again = [xp.mapreduce(_square, ops.add, v), xp.reduce(ops.maximum, v),
             xp.mapreduce(_pair, ops.minmax, v), xp.mapreduce(_square, ops.add, v, keepdims=True)]
    assert not calls  # every second call was a replay
    for (sq, mx, (lo, hi), sqk), a in ((first, h), (again, hn)):
        assert sq.shape == () and sqk.shape == (1,) and sq.dtype == xp.float32
        np.testing.assert_allclose(float(sq), np.sum(a * a), rtol=1e-5)
        np.testing.assert_allclose(float(sqk[0]), np.sum(a * a), rtol=1e-5)
        assert float(mx) == np.max(a) and float(hi) == np.max(a) and float(lo) == np.min(a)
    # another operator, another layout, another dtype: planned, and right
    assert float(xp.reduce(ops.minimum, v)) == np.min(hn)
    assert float(xp.mapreduce(_square, ops.add, X[2:39])) == pytest.approx(np.sum(new[2:39].astype(np.float64) ** 2),
                                                                          rel=1e-5)
    i = _x(np.arange(10, dtype=np.int32))
    assert int(xp.mapreduce(_square, ops.add, i)) == 285
    assert len(calls) == 3
    with pytest.raises(TypeError):
        xp.mapreduce(_square, ops.add, host)   # not an Array: still the checked path's error
