"""Where forge_array meets NumPy, CuPy and numba: NumPy/CuPy index arrays, NumPy arrays
and scalars in operators and NumPy functions, device strings, numba's compile errors and
axis errors of the generic operations."""

import operator

import numpy as np
import pytest

import forge_array as xp
from forge_array._devices import Device

pytestmark = pytest.mark.usefixtures("numpy_routes")


def a(v, **kw):
    return xp.asarray(v, device="cpu", **kw)


# --------------------------------------------------------------------------- index arrays
@pytest.mark.parametrize("key", [np.array([2, 0, 2]), np.array([-1, 1], dtype=np.int8),
                                 np.array([True, False, True, False]),
                                 np.array(3, dtype=np.uint16),
                                 (np.array([1, 0]), slice(None, 2)),
                                 (Ellipsis, np.array([True, False, True])),
                                 (np.array([[0], [1]]), np.array([0, 2]))],
                         ids=["int", "int8-negative", "mask", "0-d", "with-slice", "mask-last",
                              "broadcast"])
def test_numpy_index_arrays_index_cpu_arrays_as_numpy_does(key):
    h = np.arange(12.0).reshape(4, 3) if not (isinstance(key, np.ndarray) and key.ndim == 1
                                               and key.dtype == bool) else np.arange(4.0)
    if isinstance(key, tuple) and key[0] is Ellipsis:
        h = np.arange(12.0).reshape(4, 3)
    x = a(h)
    got = x[key]
    want = h[key]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), want)
    # and as forge_array arrays
    fa = tuple(a(k) if isinstance(k, np.ndarray) else k for k in key) if isinstance(key, tuple) \
        else a(key)
    np.testing.assert_array_equal(np.asarray(x[fa]), want)


def test_numpy_index_arrays_set_items():
    h = np.zeros(6)
    x = a(h.copy())
    x[np.array([1, 3])] = 5.0
    x[np.arange(6) > 4] = a(7.0)
    h[[1, 3]] = 5.0
    h[5] = 7.0
    np.testing.assert_array_equal(np.asarray(x), h)


def test_numpy_index_arrays_are_checked():
    x = a(np.arange(5))
    with pytest.raises(IndexError, match="integer or boolean"):
        x[np.array([0.5])]
    with pytest.raises(IndexError):
        x[np.array([7])]


def test_an_index_array_of_another_device_names_both():
    from forge_array._array import _check_index_device

    with pytest.raises(ValueError, match=r"numpy\.ndarray index lives on cpu.*cuda:0"):
        _check_index_device(np.array([0]), Device("cuda", 0))
    _check_index_device(np.array([0]), xp.cpu)


def test_cupy_index_arrays():
    cp = pytest.importorskip("cupy")
    if xp.__array_namespace_info__().devices()[0] == xp.cpu:
        pytest.skip("no GPU")
    g = xp.asarray([10, 20, 30], device="cuda:0")
    assert np.asarray(g[cp.asarray([2, 0])].to_device("cpu")).tolist() == [30, 10]
    with pytest.raises(ValueError, match="cpu"):
        g[np.array([0])]
    with pytest.raises(ValueError, match="cuda:0"):
        a([1, 2])[cp.asarray([0])]


# --------------------------------------------------------------------------- NumPy operands
_OPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
        operator.mod, operator.pow, operator.lt, operator.le, operator.gt, operator.ge,
        operator.eq, operator.ne, operator.matmul]


@pytest.mark.parametrize("op", _OPS, ids=lambda f: f.__name__)
def test_numpy_arrays_in_operators_raise_naming_asarray(op):
    x = a([1.0, 2.0, 3.0])
    n = np.ones(3)
    for left, right in ((x, n), (n, x)):
        with pytest.raises(TypeError, match=r"numpy\.ndarray.*xp\.asarray\(\.\.\.\)"):
            op(left, right)


@pytest.mark.parametrize("op", [operator.iadd, operator.imul, operator.itruediv,
                                operator.imatmul], ids=lambda f: f.__name__)
def test_numpy_arrays_in_in_place_operators_raise(op):
    x = a([1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="xp.asarray"):
        op(x, np.ones(3))


def test_numpy_arrays_in_namespace_functions_raise_naming_asarray():
    x = a([1.0, 2.0])
    for args in ((x, np.ones(2)), (np.ones(2), x), (np.ones(2), np.ones(2))):
        with pytest.raises(TypeError, match=r"numpy\.ndarray.*xp\.asarray"):
            xp.add(*args)


@pytest.mark.parametrize("fn", [np.exp, np.add, np.sqrt], ids=lambda f: f.__name__)
def test_numpy_ufuncs_raise_on_forge_arrays(fn):
    x = a([1.0, 2.0])
    with pytest.raises(TypeError, match="forge_array arrays") as info:
        fn(x, x) if fn is np.add else fn(x)
    assert f"xp.{fn.__name__}(...)" in str(info.value)


_FUNCTIONS = {
    "sum": lambda m, x: m.sum(x), "mean": lambda m, x: m.mean(x), "max": lambda m, x: m.max(x),
    "std": lambda m, x: m.std(x), "concatenate": lambda m, x: m.concatenate([x, x]),
    "allclose": lambda m, x: m.allclose(x, x), "where": lambda m, x: m.where(x > 1.5, x, 0.0),
    "unique": lambda m, x: m.unique(x), "average": lambda m, x: m.average(x, weights=x),
    "may_share_memory": lambda m, x: m.may_share_memory(x, x),
}


@pytest.mark.parametrize("name", sorted(_FUNCTIONS))
def test_numpy_functions_take_cpu_arrays_as_numpy_arrays(name):
    """As NumPy's functions take any object NumPy can view: the same results as on the NumPy
    array of the same memory (scikit-learn's utilities rely on it for CPU arrays)."""
    h = np.array([1.0, 2.0, 2.0])
    got = _FUNCTIONS[name](np, a(h))
    want = _FUNCTIONS[name](np, h)
    assert not isinstance(got, xp.Array)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", sorted(_FUNCTIONS))
def test_numpy_functions_refuse_gpu_arrays(name, sim):
    if sim:
        pytest.skip("needs a GPU array")
    x = xp.asarray([1.0, 2.0, 2.0], device="cuda:0")
    with pytest.raises(TypeError, match="GPU arrays"):
        _FUNCTIONS[name](np, x)


def test_explicit_conversion_to_numpy_still_works():
    x = a([1.0, 2.0])
    assert np.asarray(x).tolist() == [1.0, 2.0]
    assert np.from_dlpack(x).tolist() == [1.0, 2.0]
    np.testing.assert_allclose(np.asarray(x), [1.0, 2.0])


@pytest.mark.parametrize("scalar", [np.float64(2.0), np.float32(2.0), np.int64(3),
                                    np.int8(-1), np.bool_(True)], ids=lambda s: type(s).__name__)
@pytest.mark.parametrize("op", [operator.add, operator.mul, operator.sub, operator.lt,
                                operator.eq, operator.pow, operator.truediv],
                         ids=lambda f: f.__name__)
def test_numpy_scalars_count_as_python_scalars(op, scalar):
    """A NumPy scalar on either side takes the array's dtype by value, as the Python scalar
    of its value does."""
    x = a([1.0, 2.0, 4.0], dtype=xp.float32)
    py = scalar.item()
    if isinstance(py, bool):
        with pytest.raises(TypeError, match="numpy.bool"):
            op(x, scalar)
        return
    for got, want in ((op(x, scalar), op(x, py)), (op(scalar, x), op(py, x))):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_a_numpy_scalar_the_array_cannot_take_is_named():
    with pytest.raises(TypeError, match=r"numpy\.float64 x2 2\.0 cannot be combined .*int64"):
        a([1, 2]) * np.float64(2.0)
    with pytest.raises(TypeError, match=r"Python float x2 2\.5"):
        a([1, 2]) * 2.5


# --------------------------------------------------------------------------- devices
@pytest.mark.parametrize("spec", ["gpu", "gpu:0", "cuda:x", "tpu", ""])
def test_unknown_device_strings_list_the_valid_ones(spec):
    with pytest.raises(ValueError, match=r"unknown device .*'cpu', 'cuda' and 'cuda:N'.*"
                                         r"devices here are .*'cpu'"):
        xp.ones(3, device=spec)


def test_an_unavailable_gpu_is_named():
    n = len(xp.__array_namespace_info__().devices()) - 1
    with pytest.raises(ValueError, match=rf"cuda:{n} is not available.*devices here"):
        xp.ones(3, device=f"cuda:{n}")


# --------------------------------------------------------------------------- numba, axes
def test_compile_errors_have_no_colour_codes(monkeypatch):
    from forge_array.runtime import config
    from forge_array.runtime.compiler import compile_error

    err = compile_error(ValueError("\x1b[1m\x1b[31mNo implementation\x1b[0m of add"), "op")
    assert str(err) == "cannot compile op with numba: No implementation of add"
    monkeypatch.setattr(config, "KERNELS_ENABLED", True)
    for call in (lambda: xp.reduce(lambda p, q: p + "s", a([1.0, 2.0])),
                 lambda: xp.accumulate(lambda p, q: p + "s", a([1.0, 2.0])),
                 lambda: xp.reduce(lambda p, q: p + "s", a(np.ones((2, 2))), axis=0)):
        with pytest.raises(TypeError, match="cannot compile") as info:
            call()
        assert "\x1b" not in str(info.value)


@pytest.mark.parametrize("call,name", [
    (lambda x: xp.reduce(xp.ops.add, x, axis=9), "reduce"),
    (lambda x: xp.reduce(lambda p, q: p + q, x, axis=(0, 9)), "reduce"),
    (lambda x: xp.mapreduce(abs, xp.ops.add, x, axis=9), "mapreduce"),
    (lambda x: xp.accumulate(xp.ops.add, x, axis=9), "accumulate"),
    (lambda x: xp.accumulate(lambda p, q: p * q, x, axis=-2), "accumulate"),
])
def test_generic_operations_name_themselves_in_axis_errors(call, name):
    x = a([1.0, 2.0, 3.0])
    with pytest.raises(np.exceptions.AxisError) as info:
        call(x)
    assert isinstance(info.value, ValueError) and isinstance(info.value, IndexError)
    assert str(info.value).startswith(f"{name}: axis ")
    assert "out of bounds for array of dimension 1" in str(info.value)
