"""forge_array.dask without a GPU: the ImportError naming what to install, the worker
plugin's registration on a distributed cluster (its workers keep plain CuPy here and say
why), the threaded-scheduler helper, and the plugin travelling by value. The chunk work on
our kernels is tested on the GPU (tests/test_dask_gpu.py)."""

import importlib
import os
import subprocess
import sys

import pytest


def _hidden(module, body):
    code = (f"import sys; sys.modules[{module!r}] = None\n" + body)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "FORGE_ARRAY_SIMULATE": "1"})
    return out.stdout + out.stderr


def test_import_error_names_what_to_install():
    out = _hidden("dask", "try:\n    import forge_array.dask\n"
                          "except ImportError as e:\n    print('MSG', e)\n")
    assert "MSG forge_array.dask needs dask" in out, out
    assert 'pip install "forge-array[dask]"' in out


def test_threaded_helper_needs_dask_alone():
    pytest.importorskip("dask")
    out = _hidden("distributed", (
        "import forge_array.dask as fdask\n"
        "with fdask.patched() as st:\n    print('STATE', sorted(st))\n"
        "try:\n    fdask.register(object())\n"
        "except ImportError as e:\n    print('MSG', e)\n"))
    assert "STATE" in out and "'patched'" in out, out
    assert "MSG forge_array.dask.register needs distributed" in out, out


distributed = pytest.importorskip("distributed")
pytest.importorskip("dask.array")


def test_plugin_travels_by_value():
    import cloudpickle

    fdask = importlib.import_module("forge_array.dask")
    assert "forge_array._worker_plugin" in cloudpickle.list_registry_pickle_by_value()
    from distributed.protocol.pickle import dumps, loads

    blob = dumps(fdask.ForgeArrayPlugin(methods=False))
    assert b"forge_array._worker_plugin" not in blob or b"ForgeArrayPlugin" in blob
    plugin = loads(blob)
    assert plugin.methods is False and plugin.name == "forge-array"


def test_register_type_error():
    fdask = importlib.import_module("forge_array.dask")
    with pytest.raises(TypeError, match="distributed.Client"):
        fdask.register(object())
    with pytest.raises(TypeError, match="distributed.Client"):
        fdask.unregister(object())


_CLUSTER_SCRIPT = r"""
import sys
import dask.array as da
import distributed
import numpy as np
import forge_array.dask as fdask


def hide_forge_array():
    for name in [m for m in sys.modules if m == "forge_array" or m.startswith("forge_array.")]:
        del sys.modules[name]
    sys.modules["forge_array"] = None


if __name__ == "__main__":
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        workers = sorted(client.scheduler_info()["workers"])
        # one worker cannot import forge_array at all: the plugin still arrives (by value)
        client.run(hide_forge_array, workers=[workers[0]])
        st = fdask.register(client)
        assert sorted(st) == workers, st
        for s in st.values():
            assert s["patched"] is False and s["reason"].startswith("plain CuPy"), s
        assert "No module named" in st[workers[0]]["reason"], st
        x = da.arange(1000, chunks=100, dtype="float64")
        assert float(x.sum().compute()) == float(np.arange(1000).sum())
        per_worker = fdask.stats(client, reset=True)
        assert set(per_worker) == set(st)
        assert all(w["kernel"] == {} for w in per_worker.values())
        back = fdask.unregister(client)
        assert sorted(back) == workers and not any(s["patched"] for s in back.values()), back
        assert float(x.sum().compute()) == float(np.arange(1000).sum())
    print("CLUSTER-OK")
"""


def test_register_on_a_cluster_without_gpu(sim, tmp_path):
    """Two worker processes with no GPU: the plugin runs in each, keeps plain CuPy, logs and
    reports why (one of them cannot import forge_array at all); a Dask computation gives the
    same result. In a process of its own, so the cluster's processes never touch the test
    runner's."""
    if not sim:
        pytest.skip("the workers find a GPU here (tests/test_dask_gpu.py covers that)")
    script = tmp_path / "cluster_check.py"
    script.write_text(_CLUSTER_SCRIPT)
    env = {**os.environ, "FORGE_ARRAY_SIMULATE": "1"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=240, env=env)
    assert "CLUSTER-OK" in out.stdout, out.stdout[-3000:] + out.stderr[-3000:]


def test_threaded_helper_without_gpu(sim):
    if not sim:
        pytest.skip("this process finds a GPU")
    fdask = importlib.import_module("forge_array.dask")
    with fdask.patched() as state:
        assert state["patched"] is False and "plain CuPy" in state["reason"]
    assert fdask.stats()["patched"] is False


def test_one_chunk_per_worker():
    import dask.array as da

    fdask = importlib.import_module("forge_array.dask")
    with distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        x = fdask.one_chunk_per_worker(da.arange(10, chunks=4), client)
        assert x.chunks == ((4, 3, 3),) and int(x.sum().compute()) == 45
        info = client.scheduler_info()["workers"]
        order = sorted(info, key=lambda w: str(info[w].get("name", w)))
        held = client.who_has(x)
        assert [held[k] for k in sorted(held, key=lambda k: k[1])] == [[w] for w in order]
        with pytest.raises(TypeError, match="distributed.Client"):
            fdask.one_chunk_per_worker(x, object())
