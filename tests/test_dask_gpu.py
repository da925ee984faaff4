"""dask.array of CuPy chunks with forge_array's kernels under it (GPU only): the threaded
scheduler with :func:`forge_array.dask.patched` and a distributed cluster with the worker
plugin, against plain CuPy chunks; results equal (allclose, argmax exact) and the chunk
calls counted on our kernels."""

import importlib

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cp(sim):
    if sim:
        pytest.skip("needs a GPU")
    return pytest.importorskip("cupy")


def _arrays(cp, shape=(20000, 37), chunks=(3001, 37)):
    rs = da.random.RandomState(seed=5, RandomState=cp.random.RandomState)
    x = rs.random_sample(shape, chunks=chunks).astype("float32")
    v = rs.random_sample((shape[1],), chunks=(shape[1],)).astype("float32")
    return x, v


OPS = {
    "sum": lambda x, v: x.sum(),
    "sum0": lambda x, v: x.sum(axis=0),
    "mean0": lambda x, v: x.mean(axis=0),
    "std0": lambda x, v: x.std(axis=0),
    "var1": lambda x, v: x.var(axis=1),
    "max": lambda x, v: x.max(axis=0),
    "min": lambda x, v: x.min(),
    "prod": lambda x, v: (x[:50] + 0.5).prod(axis=0),
    "argmax": lambda x, v: x.argmax(),
    "argmin0": lambda x, v: x.argmin(axis=0),
    "any": lambda x, v: (x > 0.999).any(axis=0),
    "all": lambda x, v: (x > 0.001).all(),
    "nansum": lambda x, v: da.nansum(x, axis=0),
    "nanmax": lambda x, v: da.nanmax(x, axis=1),
    "nanmin": lambda x, v: da.nanmin(x),
    "cumsum0": lambda x, v: x.cumsum(axis=0)[-3:],
    "cumprod1": lambda x, v: (x[:100] * 0.5 + 0.75).cumprod(axis=1),
    "matvec": lambda x, v: x @ v,
    "dot": lambda x, v: da.dot(x, v),
}


def _check(name, got, ref):
    got, ref = np.asarray(got.get() if hasattr(got, "get") else got), np.asarray(
        ref.get() if hasattr(ref, "get") else ref)
    assert got.shape == ref.shape and got.dtype == ref.dtype, (name, got.shape, ref.shape)
    if name.startswith("arg") or got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, ref, err_msg=name)
    else:
        np.testing.assert_allclose(got, ref, rtol=2e-4, atol=1e-3, err_msg=name)


def test_threaded_scheduler(cp):
    fdask = importlib.import_module("forge_array.dask")
    fcp = importlib.import_module("forge_array.cupy")
    x, v = _arrays(cp)
    ref = {n: f(x, v).compute(scheduler="threads") for n, f in OPS.items()}
    fcp.reset_stats()
    with fdask.patched() as state:
        assert state["patched"], state
        for n, f in OPS.items():
            _check(n, f(x, v).compute(scheduler="threads"), ref[n])
        kernel = fdask.stats()["kernel"]
    assert not fcp.is_patched()
    for name in ("sum", "max", "argmax", "cumsum", "matmul"):
        assert kernel.get(name, 0) > 0, (name, kernel)


def test_distributed_cluster(cp):
    fdask = importlib.import_module("forge_array.dask")
    x, v = _arrays(cp)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        ref = {n: f(x, v).compute() for n, f in OPS.items()}
        st = fdask.register(client)
        assert all(s["patched"] for s in st.values()), st
        fdask.stats(client, reset=True)
        for n, f in OPS.items():
            _check(n, f(x, v).compute(), ref[n])
        per = fdask.stats(client)
        kernel = next(iter(per.values()))["kernel"]
        assert kernel.get("sum", 0) > 0 and kernel.get("cumsum", 0) > 0, per
        # unregistering restores CuPy in every worker, and registering again patches it
        for _ in range(2):
            assert not any(s["patched"] for s in fdask.unregister(client).values())
            fdask.stats(client, reset=True)
            _check("sum", OPS["sum"](x, v).compute(), ref["sum"])
            assert all(w["kernel"] == {} for w in fdask.stats(client).values())
            assert all(s["patched"] for s in fdask.register(client).values())


def test_meta_and_empty_chunks(cp):
    fdask = importlib.import_module("forge_array.dask")
    x = da.from_array(cp.zeros((0, 5), dtype=cp.float32), chunks=(1, 5))
    with fdask.patched():
        assert x.mean(axis=0).compute(scheduler="sync").shape == (5,)
        assert x.sum(axis=1).compute(scheduler="sync").shape == (0,)
        assert x.cumsum(axis=0).compute(scheduler="sync").shape == (0, 5)


def test_kernels_from_fresh_threads(cp):
    """A thread whose first CUDA call is one of our launches (Dask's worker threads)."""
    import threading

    fcp = importlib.import_module("forge_array.cupy")
    arrs = [cp.random.random((3001 * (i + 1), 37), dtype=cp.float32) for i in range(6)]
    refs = [float(cp.asnumpy(a).astype(np.float64).sum()) for a in arrs]
    cp.cuda.Device().synchronize()
    errors = []

    def work(i):
        try:
            for _ in range(20):
                r = float(fcp.sum(arrs[i], axis=(0, 1), keepdims=True).ravel()[0])
                assert abs(r - refs[i]) <= 1e-4 * abs(refs[i]), (i, r, refs[i])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


def test_several_reductions_in_one_graph_on_cupy_chunks(cp):
    """forge_array.dask.reductions on CuPy chunks: CuPy results (chunks' backend), equal to
    dask's own reductions of the same chunks."""
    import forge_array.dask as fdask

    x, _ = _arrays(cp)
    names = ["sum", "max", "min", "mean", "std", "any", "all"]
    for axis in (None, 0, 1):
        got = da.compute(*fdask.reductions(x, names, axis=axis), scheduler="threads")
        for name, r in zip(names, got):
            assert isinstance(r, cp.ndarray), name
            ref = getattr(x, name)(axis=axis).compute(scheduler="threads")
            np.testing.assert_allclose(cp.asnumpy(r), cp.asnumpy(ref), rtol=1e-4, err_msg=name)
