"""forge_array.dask.reductions: several reductions of one dask.array in one graph, one
task per chunk; against NumPy on the whole array (float64 references for floats, exact for
integers), uneven and empty chunks, every axis choice, keepdims, the errors."""

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
fdask = pytest.importorskip("forge_array.dask")
from forge_array import _dask_reductions as R  # noqa: E402

FLOATS = ["sum", "prod", "max", "min", "any", "all", "mean", "var", "std"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), (1, 2), (0, 1, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_against_numpy(dtype, axis, keepdims):
    a = (np.random.default_rng(1).random((7, 5, 3)) * 0.5 + 0.75).astype(dtype)
    a[2, 1, 0] = 0.0
    x = da.from_array(a, chunks=((3, 0, 4), (2, 3), (1, 2)))   # uneven, an empty chunk
    outs = fdask.reductions(x, FLOATS, axis=axis, keepdims=keepdims, correction=1)
    got = dask.compute(*outs, scheduler="threads")
    for name, r in zip(FLOATS, got):
        kw = {"axis": axis, "keepdims": keepdims}
        if name in ("var", "std"):
            kw["ddof"] = 1
        exact = getattr(np, name)(a, **kw)
        ref = getattr(np, name)(a.astype(np.float64), **kw)
        assert r.shape == exact.shape and r.dtype == exact.dtype, name
        np.testing.assert_allclose(r, ref, rtol=3e-6 if dtype == np.float32 else 1e-12, err_msg=name)


def test_integers_exact():
    a = np.arange(-30, 30, dtype=np.int32).reshape(6, 10)
    x = da.from_array(a, chunks=(4, 3))
    names = ["sum", "prod", "max", "min", "any", "all"]
    for axis in (None, 0, 1):
        for name, r in zip(names, dask.compute(*fdask.reductions(x, names, axis=axis))):
            ref = getattr(np, name)(a, axis=axis)
            assert r.dtype == ref.dtype and np.array_equal(r, ref), (name, axis)


def test_one_task_per_chunk(monkeypatch):
    calls = []
    orig = R._chunk_partials

    def counting(*args):
        calls.append(1)
        return orig(*args)

    monkeypatch.setattr(R, "_chunk_partials", counting)
    x = da.from_array(np.arange(40.0).reshape(8, 5), chunks=(2, 5))   # 4 chunks
    s, hi, sd = fdask.reductions(x, ["sum", "max", "std"], axis=0)
    dask.compute(s, hi, sd, scheduler="sync")
    assert len(calls) == 4


def test_single_name_and_spread_of_nan():
    a = np.array([[1.0, np.nan], [3.0, 4.0], [5.0, 6.0]])
    x = da.from_array(a, chunks=(1, 2))
    (m,) = fdask.reductions(x, "mean", axis=0)
    np.testing.assert_array_equal(m.compute(), np.mean(a, axis=0))
    (v,) = fdask.reductions(x, ["var"], axis=0, correction=3)    # n - correction == 0
    assert np.isnan(v.compute()).all()


def test_errors():
    x = da.from_array(np.ones((4, 3)), chunks=2)
    with pytest.raises(ValueError, match="unknown reduction 'median'"):
        fdask.reductions(x, ["sum", "median"])
    with pytest.raises(ValueError, match="at least one"):
        fdask.reductions(x, [])
    with pytest.raises(TypeError, match="dask.array"):
        fdask.reductions(np.ones(3), ["sum"])
    with pytest.raises(ValueError, match="out of bounds"):
        fdask.reductions(x, ["sum"], axis=2)
    with pytest.raises(TypeError, match="axis must be"):
        fdask.reductions(x, ["sum"], axis="0")
    with pytest.raises(TypeError, match="mean requires a floating-point dtype"):
        fdask.reductions(da.from_array(np.ones(4, dtype=np.int64), chunks=2), ["mean"])
    with pytest.raises(ValueError, match="no elements"):
        fdask.reductions(da.from_array(np.ones((0, 3)), chunks=2), ["sum"], axis=0)
