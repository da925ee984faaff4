"""Array object semantics: attributes, operators, indexing, conversions."""

import math
import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import forge_array as xp
from forge_array.runtime import SIMULATE

# Namespace semantics are checked against NumPy; the kernels have their own tests.
pytestmark = pytest.mark.usefixtures("numpy_routes")

CPU = "cpu"


def arr(v, **kw):
    kw.setdefault("device", CPU)
    return xp.asarray(v, **kw)


def test_cannot_construct_directly():
    with pytest.raises(TypeError, match="asarray"):
        xp.Array(np.zeros(3))


def test_attributes():
    x = xp.reshape(xp.arange(24, device=CPU), (2, 3, 4))
    assert x.shape == (2, 3, 4) and x.ndim == 3 and x.size == 24
    assert x.dtype == xp.int64 and x.device == xp.cpu
    assert x.mT.shape == (2, 4, 3)
    assert xp.ones((2, 3), device=CPU).T.shape == (3, 2)
    with pytest.raises(ValueError):
        x.T
    with pytest.raises(ValueError):
        arr([1, 2]).mT


def test_repr():
    assert repr(arr([1, 2])) == "Array([1, 2], dtype=int64, device=cpu)"


def test_array_namespace():
    x = arr(1.0)
    assert x.__array_namespace__() is xp
    assert x.__array_namespace__(api_version="2024.12") is xp
    with pytest.raises(ValueError):
        x.__array_namespace__(api_version="1999.01")


@settings(max_examples=25, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(max_dims=3, max_side=4),
                  elements=st.floats(-1e6, 1e6)),
       st.sampled_from(["add", "sub", "mul", "truediv"]))
def test_operators_match_numpy(a, op):
    x = xp.asarray(a)
    f = getattr(operator, op)
    np.testing.assert_allclose(np.asarray(f(x, 2.5)), f(a, 2.5))
    np.testing.assert_allclose(np.asarray(f(3.0, x)), f(3.0, a))
    np.testing.assert_allclose(np.asarray(f(x, x)), f(a, a))


def test_reflected_and_inplace():
    x = arr([1, 2, 3])
    assert np.asarray(10 - x).tolist() == [9, 8, 7]
    y = x
    y += 1
    assert y is x and np.asarray(x).tolist() == [2, 3, 4]
    x <<= 1
    assert np.asarray(x).tolist() == [4, 6, 8]
    f = arr([1.0, 2.0])
    f **= 2
    assert np.asarray(f).tolist() == [1.0, 4.0]
    with pytest.raises(TypeError):
        x += 1.5  # would need float: mixed kinds
    i8 = arr([1], dtype=xp.int8)
    with pytest.raises(TypeError):
        i8 += arr([1], dtype=xp.int16)  # would change the dtype
    with pytest.raises(ValueError):
        a = arr([1.0])
        a += arr([1.0, 2.0])  # would change the shape


def test_comparisons_and_bitwise():
    x = arr([1, 2, 3])
    assert np.asarray(x > 1).tolist() == [False, True, True]
    assert np.asarray(x == 2).dtype == np.bool_
    assert np.asarray(~arr([True, False])).tolist() == [False, True]
    assert np.asarray(x & 1).tolist() == [1, 0, 1]
    assert np.asarray(-x).tolist() == [-1, -2, -3]
    assert np.asarray(abs(arr([-1.5]))).tolist() == [1.5]
    assert (x == "a") is False  # unsupported operand: NotImplemented, then identity


def test_matmul_operator():
    a = xp.ones((2, 3), device=CPU)
    b = xp.ones((3, 4), device=CPU)
    assert (a @ b).shape == (2, 4)
    with pytest.raises(ValueError):
        a @ a


def test_python_scalar_conversions():
    assert bool(arr(True)) is True
    assert int(arr(7)) == 7
    assert float(arr(2.5)) == 2.5
    assert complex(arr(1 + 2j)) == 1 + 2j
    assert operator.index(arr(3, dtype=xp.int8)) == 3
    assert [10, 20, 30][arr(1)] == 20
    with pytest.raises(TypeError):
        operator.index(arr(3.0))
    with pytest.raises(TypeError):
        bool(arr([1, 2]))
    with pytest.raises(TypeError):
        float(arr(1j))
    with pytest.raises(OverflowError):
        int(arr(math.inf))


def test_getitem_basic():
    a = np.arange(24).reshape(2, 3, 4)
    x = xp.asarray(a)
    for key in [0, -1, (1, 2), (slice(None), 1), (Ellipsis, 0), (None, 0), (0, Ellipsis, None),
                (slice(None, None, -1),), (slice(1, None), slice(None, 2), 3), ()]:
        np.testing.assert_array_equal(np.asarray(x[key]), a[key])


def test_getitem_arrays_and_masks():
    a = np.arange(12).reshape(3, 4)
    x = xp.asarray(a)
    m = a > 4
    np.testing.assert_array_equal(np.asarray(x[xp.asarray(m)]), a[m])
    idx = np.array([2, 0])
    np.testing.assert_array_equal(np.asarray(x[xp.asarray(idx)]), a[idx])
    np.testing.assert_array_equal(np.asarray(x[xp.asarray(idx), 1]), a[idx, 1])
    np.testing.assert_array_equal(np.asarray(x[arr(True)]), a[True])


@pytest.mark.parametrize("key", [3, -4, (0, 4), (0, 0, 0)])
def test_getitem_out_of_bounds(key):
    x = xp.reshape(xp.arange(12, device=CPU), (3, 4))
    with pytest.raises(IndexError):
        x[key]


def test_getitem_bad_keys():
    x = xp.arange(5, device=CPU)
    with pytest.raises(IndexError):
        x[1.0]
    with pytest.raises(IndexError):
        x[..., ...]
    with pytest.raises(IndexError):
        x[arr([1.0])]
    with pytest.raises(IndexError):
        x[arr([5])]


def test_setitem():
    x = xp.zeros((2, 3), device=CPU)
    x[0, 1] = 5.0
    x[1] = arr([1.0, 2.0, 3.0])
    x[x > 2] = -1.0
    np.testing.assert_array_equal(np.asarray(x), [[0, -1, 0], [1, 2, -1]])
    x[:, 0] = 7  # int scalar into a float array
    assert float(x[1, 0]) == 7.0
    with xp.set_strict(True), pytest.raises(TypeError):
        x[0] = arr([1, 2, 3])  # int64 into float64: mixed kinds
    i = xp.zeros(2, dtype=xp.int8, device=CPU)
    with pytest.raises(TypeError):
        i[0] = 1.5
    with pytest.raises(OverflowError):
        i[0] = 1000
    i[0] = arr(3, dtype=xp.int8)
    assert int(i[0]) == 3


def test_signed_zero_kept():
    x = xp.full(3, -0.0, device=CPU)
    assert np.signbit(np.asarray(x)).all()
    y = xp.zeros(2, device=CPU)
    y[0] = -0.0
    assert np.signbit(np.asarray(y))[0]


def test_len_and_iter():
    x = arr([[1, 2], [3, 4]])
    assert len(x) == 2
    assert [r.shape for r in x] == [(2,), (2,)]
    with pytest.raises(TypeError):
        len(arr(1))


def test_dlpack_roundtrip_and_copy():
    a = np.arange(5.0)
    x = xp.asarray(a)
    assert x.__dlpack_device__() == (1, 0)
    y = np.from_dlpack(x)
    assert np.shares_memory(a, y)
    c = x.__dlpack__(copy=True)
    assert c is not None
    x.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False)
    with pytest.raises(BufferError):
        x.__dlpack__(dl_device=(2, 0))


def test_to_device_same():
    x = arr([1])
    assert x.to_device("cpu") is x
    assert x.to_device(xp.cpu) is x


@pytest.mark.skipif(SIMULATE, reason="CuPy arrays: the GPU run")
def test_masked_fill_of_gpu_arrays():
    """``x[mask] = value`` on a GPU: a single value goes through ``copyto(where=mask)``
    (full masks and masks of the leading dimensions), anything else through CuPy."""
    a = np.arange(12.0).reshape(3, 4)
    for mask, value in ((a > 5, 1.5), (a[:, 0] > 3, -2.0), (a > 100, 9.0)):
        x = xp.asarray(a, device="cuda:0")
        want = a.copy()
        want[mask] = value
        x[xp.asarray(mask, device="cuda:0")] = value
        np.testing.assert_array_equal(np.asarray(x.to_device("cpu")), want)
        x = xp.asarray(a, device="cuda:0")
        x[xp.asarray(mask, device="cuda:0")] = xp.asarray(value, device="cuda:0")   # a 0-d array
        np.testing.assert_array_equal(np.asarray(x.to_device("cpu")), want)
    x = xp.asarray(a, device="cuda:0")
    m = a > 8
    x[xp.asarray(m, device="cuda:0")] = xp.asarray([-1.0, -2.0, -3.0], device="cuda:0")   # one per element
    want = a.copy()
    want[m] = [-1.0, -2.0, -3.0]
    np.testing.assert_array_equal(np.asarray(x.to_device("cpu")), want)
    with pytest.raises(IndexError):
        x[xp.asarray(np.ones(5, dtype=bool), device="cuda:0")] = 1.0


@pytest.mark.skipif(SIMULATE, reason="CuPy arrays: the GPU run")
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint64", "bool", "complex64"])
def test_scalar_writes_of_gpu_arrays_keep_their_bits(dtype):
    """A Python scalar written through a mask (a kernel parameter) or any other key (a 0-d
    array) lands with its exact bits: -0.0 keeps its sign, integers their value."""
    a = np.zeros(6, dtype=dtype)
    value = {"bool": True, "int8": -7, "uint64": 2**64 - 1}.get(dtype, -0.0)
    mask = np.array([True, False, True, False, False, True])
    for key, host_key in ((xp.asarray(mask, device="cuda:0"), mask), (slice(1, 3), slice(1, 3)), (4, 4)):
        x = xp.asarray(a, device="cuda:0")
        x[key] = value
        want = a.copy()
        want[host_key] = value
        got = np.asarray(x.to_device("cpu"))
        np.testing.assert_array_equal(got, want)
        if dtype.startswith("float"):
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


#: GPU arrays of one 2-D host array's values in several layouts (name -> maker)
_GPU_LAYOUTS = {
    "C": lambda h: xp.asarray(h, device="cuda:0"),
    "F": lambda h: xp.asarray(np.asfortranarray(h), device="cuda:0"),
    "transposed": lambda h: xp.permute_dims(xp.asarray(np.ascontiguousarray(h.T), device="cuda:0"), (1, 0)),
    "every other row": lambda h: xp.asarray(np.repeat(h, 2, axis=0), device="cuda:0")[::2],
}


def _host_values(dtype, shape, seed=3):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype.startswith(("int", "uint")):
        return rng.integers(1, 50, shape).astype(dtype)
    h = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        h = h + 1j * rng.standard_normal(shape)
    h = h.astype(dtype)
    h[0, 0] = -0.0
    return h


@pytest.mark.skipif(SIMULATE, reason="CuPy arrays: the GPU run")
@pytest.mark.parametrize("op", ["add", "sub", "mul", "truediv", "and", "or", "xor"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8", "bool", "complex64"])
def test_in_place_operators_on_gpu_arrays_write_into_their_memory(op, dtype):
    """``x <op>= y`` on a GPU array writes the values of ``x <op> y`` into ``x``'s own memory
    (a view of it sees them; it raises where the CPU device's does) for C- and F-ordered
    arrays, transposed and strided views, and operands that are scalars, same-shape or
    broadcast arrays, ``x`` itself or a row of it."""
    host = _host_values(dtype, (33, 5))
    other_host = _host_values(dtype, (33, 5), seed=4)
    dunder = f"__i{op}__"
    scalar = {"bool": True, "float32": 2.5, "float64": -0.0, "complex64": 1j}.get(dtype, 3)
    operands = {   # name -> the operand of array x (on x's device)
        "scalar": lambda x: scalar,
        "same shape": lambda x: xp.asarray(other_host, device=x.device),
        "row": lambda x: xp.asarray(other_host[1:2], device=x.device),
        "column": lambda x: xp.asarray(other_host[:, 2:3], device=x.device),
        "x itself": lambda x: x,
        "a row of x": lambda x: x[0],
    }
    for layout, make in _GPU_LAYOUTS.items():
        for name, operand in operands.items():
            x = make(host)
            ref = xp.asarray(host, device="cpu", copy=True)   # the general way, on NumPy
            try:
                getattr(ref, dunder)(operand(ref))
            except TypeError:
                with pytest.raises(TypeError):
                    getattr(x, dunder)(operand(x))
                continue
            g = make(host)   # the values: x <op> y out of place, on the same GPU
            want = np.asarray(getattr(operator, f"__{op}__")(g, operand(g)).to_device("cpu"))
            view = x[1:]
            assert getattr(x, dunder)(operand(x)) is x
            got = np.asarray(x.to_device("cpu"))
            np.testing.assert_array_equal(got, want, err_msg=f"{layout} {dunder} {name}")
            if dtype.startswith("float"):
                np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=f"{layout} {name}")
            np.testing.assert_array_equal(np.asarray(view.to_device("cpu")), want[1:])


@pytest.mark.skipif(SIMULATE, reason="CuPy arrays: the GPU run")
def test_in_place_operators_on_gpu_arrays_refuse_what_changes_the_array():
    x = xp.ones((3, 4), dtype=xp.int32, device="cuda:0")
    with pytest.raises(TypeError, match="dtype"):
        x += 1.5
    with pytest.raises(TypeError):
        x /= 2
    with pytest.raises(ValueError, match="shape"):
        x += xp.ones((2, 3, 4), dtype=xp.int32, device="cuda:0")
    y = xp.ones((3, 1), device="cuda:0")
    with pytest.raises(ValueError, match="shape"):
        y *= xp.ones((3, 4), device="cuda:0")
    np.testing.assert_array_equal(np.asarray(x.to_device("cpu")), np.ones((3, 4), dtype=np.int32))


@pytest.mark.skipif(SIMULATE, reason="CuPy arrays: the GPU run")
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint64", "bool", "complex64", "complex128"])
def test_gpu_fills_keep_their_bits(dtype):
    """``ones``, ``full``, ``asarray`` of a Python scalar and ``full_like`` on a GPU hold the
    exact value (a fill kernel's parameter, or for -0.0 the copied bytes)."""
    values = {"bool": [True, False], "int8": [-7, 0, 127], "uint64": [2**64 - 1, 0, 1],
              "complex64": [complex(-0.0, 1.0), complex(1.0, -0.0), -0.0j, 2.5 + 0j],
              "complex128": [complex(-0.0, -0.0), complex(3.0, -0.0)]}.get(
                  dtype, [-0.0, 0.0, 1.5, float("nan"), -float("inf")])
    dt = getattr(xp, dtype)
    for v in values:
        want = np.full((3, 2), v, dtype=dtype)
        for got in (xp.full((3, 2), v, dtype=dt, device="cuda:0"),
                    xp.full_like(xp.empty((3, 2), dtype=dt, device="cuda:0"), v),
                    xp.broadcast_to(xp.asarray(v, dtype=dt, device="cuda:0"), (3, 2))):
            g = np.asarray(got.to_device("cpu"))
            assert g.dtype == want.dtype
            np.testing.assert_array_equal(g.view(np.uint8), want.view(np.uint8), err_msg=f"{v!r}")
    np.testing.assert_array_equal(np.asarray(xp.ones(5, dtype=dt, device="cuda:0").to_device("cpu")),
                                  np.ones(5, dtype=dtype))
