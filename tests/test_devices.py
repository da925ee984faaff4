"""Devices: cpu always; CUDA paths run only when CuPy finds a GPU."""

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import forge_array as xp
from forge_array import _devices

# Namespace semantics are checked against NumPy; the kernels have their own tests.
pytestmark = pytest.mark.usefixtures("numpy_routes")

HAS_CUDA = _devices.cuda_device_count() > 0
cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs CuPy and a GPU")


def test_device_objects():
    assert repr(xp.cpu) == "cpu"
    d = xp.Device("cuda", 1)
    assert repr(d) == "cuda:1" and str(d) == "cuda:1"
    assert d == xp.Device("cuda", 1) and d != xp.cpu
    assert len({xp.cpu, xp.Device("cpu"), d}) == 2
    assert pickle.loads(pickle.dumps(d)) == d
    with pytest.raises(ValueError):
        xp.Device("tpu")


def test_info_devices():
    info = xp.__array_namespace_info__()
    devs = info.devices()
    assert isinstance(devs, tuple) and xp.cpu in devs
    assert info.default_device() in devs
    assert set(info.dtypes(kind="integral")) == {"int8", "int16", "int32", "int64", "uint8",
                                                   "uint16", "uint32", "uint64"}
    assert info.default_dtypes()["indexing"] == xp.int64
    assert info.capabilities()["boolean indexing"] is True


@pytest.mark.parametrize("fn,args", [
    (xp.zeros, ((2,),)), (xp.ones, ((2,),)), (xp.empty, ((2,),)), (xp.full, ((2,), 1.0)),
    (xp.arange, (3,)), (xp.eye, (2,)), (xp.linspace, (0, 1, 5)), (xp.asarray, ([1, 2],)),
])
def test_creation_device_kwarg(fn, args):
    x = fn(*args, device="cpu")
    assert x.device == xp.cpu
    assert fn(*args, device=xp.cpu).device == xp.cpu


def test_like_functions_follow_input_device():
    x = xp.ones(3, device="cpu")
    for f in (xp.zeros_like, xp.ones_like, xp.empty_like):
        assert f(x).device == xp.cpu
    assert xp.full_like(x, 2.0).device == xp.cpu


def test_bad_device_strings():
    with pytest.raises(ValueError, match="device"):
        xp.zeros(2, device="tpu:0")
    if not HAS_CUDA:
        with pytest.raises(ValueError, match="cuda:0"):
            xp.zeros(2, device="cuda:0")


def test_env_override_and_import_without_cupy():
    code = ("import forge_array as xp; print(xp.__array_namespace_info__().default_device(),"
            " xp.asarray([1]).device)")
    env = dict(os.environ, FORGE_ARRAY_DEVICE="cpu")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["cpu", "cpu"]
    # cupy made unimportable: import still works and uses the CPU
    code2 = ("import sys; sys.modules['cupy'] = None; import forge_array as xp; "
             "print(xp.asarray([1.0]).device)")
    env.pop("FORGE_ARRAY_DEVICE")
    out = subprocess.run([sys.executable, "-c", code2], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "cpu"


@cuda
def test_cuda_roundtrip_and_mixed_devices():
    import cupy as cp

    g = xp.asarray([1.0, 2.0], device="cuda:0")
    assert g.device == xp.Device("cuda", 0)
    assert isinstance(g._array, cp.ndarray)
    c = g.to_device("cpu")
    assert c.device == xp.cpu and np.asarray(c).tolist() == [1.0, 2.0]
    assert c.to_device("cuda:0").device == g.device
    with pytest.raises(ValueError, match="cpu.*cuda:0|cuda:0.*cpu"):
        g + c
    assert float(xp.sum(g)) == 3.0


@cuda
def test_cuda_signed_zero_and_bounds():
    g = xp.full(4, -0.0, device="cuda:0")
    assert np.signbit(np.asarray(g.to_device("cpu"))).all()
    assert np.signbit(np.asarray(xp.asarray(-0.0, device="cuda:0").to_device("cpu")))
    h = xp.zeros(3, device="cuda:0")
    h[1] = -0.0
    h[2:] = xp.asarray(-0.0, device="cuda:0")
    assert np.signbit(np.asarray(h.to_device("cpu"))).tolist() == [False, True, True]
    assert float(xp.add(xp.asarray(-0.0, device="cuda:0"), -0.0)) == 0.0
    assert np.signbit(float(xp.add(xp.asarray(-0.0, device="cuda:0"), -0.0)))
    with pytest.raises(IndexError):
        g[xp.asarray([4], device="cuda:0")]


def test_mixed_device_error_names_both(monkeypatch):
    # simulate an array living on another device without a GPU
    a = xp.asarray([1.0], device="cpu")
    b = xp.asarray([1.0], device="cpu")
    object.__setattr__(b, "_device", xp.Device("cuda", 3))
    with pytest.raises(ValueError) as e:
        xp.add(a, b)
    assert "cpu" in str(e.value) and "cuda:3" in str(e.value)


def test_the_first_gpu_named_calls_the_hooks_once(monkeypatch):
    from forge_array import _devices

    calls = []
    monkeypatch.setattr(_devices, "_GPU_SEEN", [False])
    monkeypatch.setattr(_devices, "ON_FIRST_GPU", [lambda: calls.append(1)])
    monkeypatch.setattr(_devices, "cuda_device_count", lambda: 1)
    assert _devices.as_device("cpu") is _devices.cpu and calls == []
    assert _devices.as_device("cuda:0") is _devices.Device("cuda", 0) and calls == [1]
    _devices.as_device("cuda:0")
    assert calls == [1]


def test_the_routing_seam_loads_the_planning_modules_at_the_first_gpu(monkeypatch):
    from forge_array import _devices, _routing
    from forge_array.runtime import background, config

    assert _routing._prefetch_layer in _devices.ON_FIRST_GPU
    loaded, asked = [], []
    monkeypatch.setattr(_routing, "layer_ready", lambda: asked.append(1) or False)
    monkeypatch.setattr(_routing, "_load_planning", lambda: loaded.append(1))
    monkeypatch.setattr(_routing, "_LAYER", [False])
    monkeypatch.setattr(_routing, "_PLANNING", [False])
    monkeypatch.setattr(config, "KERNELS_ENABLED", True)
    old = background.set_mode("sync")
    try:
        _routing._prefetch_layer()
        assert loaded == []                 # sync mode loads the layer at the first call
        background.set_mode("background")
        _routing._prefetch_layer()
        # the numba-free part only, in this thread: numba loads where a call needs it
        assert loaded == [1] and asked == []
        monkeypatch.setattr(config, "KERNELS_ENABLED", False)
        _routing._prefetch_layer()
        assert loaded == [1]                # our kernels off: nothing to load
    finally:
        background.set_mode(old)
