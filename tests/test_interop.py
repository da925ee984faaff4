"""Zero-copy interop with NumPy, DLPack consumers and (when present) PyTorch/CuPy."""

import numpy as np
import pytest

import forge_array as xp

# Namespace semantics are checked against NumPy; the kernels have their own tests.
pytestmark = pytest.mark.usefixtures("numpy_routes")


def test_asarray_numpy_shares_memory():
    a = np.arange(6.0).reshape(2, 3)
    x = xp.asarray(a)
    assert x.device == xp.cpu
    a[0, 0] = 42.0
    assert float(x[0, 0]) == 42.0
    assert xp.asarray(a, copy=False)._array is a
    c = xp.asarray(a, copy=True)
    a[0, 0] = 0.0
    assert float(c[0, 0]) == 42.0


def test_asarray_copy_false_errors():
    with pytest.raises(ValueError):
        xp.asarray([1, 2], copy=False)
    with pytest.raises(ValueError):
        xp.asarray(np.arange(3), dtype=xp.float32, copy=False)


def test_numpy_views_of_our_arrays():
    x = xp.arange(4, device="cpu")
    a = np.asarray(x)
    assert np.shares_memory(a, x._array)
    b = np.from_dlpack(x)
    assert np.shares_memory(b, x._array)


def test_from_dlpack_numpy_shares_memory():
    a = np.arange(3.0)
    x = xp.from_dlpack(a)
    a[1] = 9.0
    assert float(x[1]) == 9.0
    assert xp.from_dlpack(a, copy=True)._array is not a
    y = xp.from_dlpack(x)
    assert y.device == xp.cpu


def test_asarray_nested_and_buffers():
    x = xp.asarray([xp.asarray(1.0, device="cpu"), 2.0], device="cpu")
    assert x.dtype == xp.float64
    assert xp.asarray(memoryview(np.arange(3, dtype=np.int32))).dtype == xp.int32
    assert xp.asarray([[True, False]]).dtype == xp.bool
    assert xp.asarray([1, 2]).dtype == xp.int64
    assert xp.asarray(1j).dtype == xp.complex128
    with pytest.raises(OverflowError):
        xp.asarray(2**70)


def test_numpy_operands_are_not_mixed():
    x = xp.asarray([1.0])
    with pytest.raises(TypeError):
        x + np.ones(1)
    with pytest.raises(TypeError):
        np.ones(1) + x


def test_torch_interop():
    torch = pytest.importorskip("torch")
    t = torch.arange(4, dtype=torch.float32)
    x = xp.from_dlpack(t)
    t[0] = 5.0
    assert float(x[0]) == 5.0
    back = torch.from_dlpack(x)
    assert back.data_ptr() == t.data_ptr()


def test_cupy_interop():
    cp = pytest.importorskip("cupy")
    from forge_array import _devices

    if _devices.cuda_device_count() == 0:
        pytest.skip("no GPU")
    g = cp.arange(4.0)
    x = xp.asarray(g)
    assert x._array is g or x._array.data.ptr == g.data.ptr
    assert cp.asarray(x).data.ptr == g.data.ptr
    assert x.__cuda_array_interface__["data"][0] == g.data.ptr


def test_no_cuda_array_interface_on_cpu():
    assert not hasattr(xp.asarray([1.0], device="cpu"), "__cuda_array_interface__")
