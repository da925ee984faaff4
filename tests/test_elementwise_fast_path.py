"""The host fast path of small eager element-wise calls: a call whose operand types passed
every check before goes straight to the backend's function (``x + y``, ``x > 0.5``,
``exp(x)``, ``where(c, x, 0.0)``).  The repeated call must give what the first one gives,
never let through what the checked path rejects, and follow the strict switch."""

import numpy as np
import pytest

import forge_array as xp
from forge_array.runtime import SIMULATE

DTYPES = ["float32", "float64", "int32", "int64", "uint8", "bool"]


def _np(r):
    return np.asarray(r.to_device("cpu"))


def _arr(dtype, shape=(7,), seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 5, size=shape).astype(dtype) if dtype != "bool" else rng.random(shape) > 0.5
    return a


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (1,), (33,), (4, 5)])
def test_repeated_binary_calls_equal_the_first(dtype, shape):
    a, b = _arr(dtype, shape, 1), _arr(dtype, shape, 2)
    x, y = xp.asarray(a), xp.asarray(b)
    names = ["equal", "not_equal", "logical_and"] if dtype == "bool" else ["add", "multiply", "maximum", "greater"]
    for name in names:
        f = getattr(xp, name)
        first = f(x, y)
        for _ in range(2):
            again = f(x, y)
            assert again.dtype == first.dtype and again.shape == first.shape == np.broadcast_shapes(shape, shape)
            assert type(again._array) is type(first._array)
            np.testing.assert_array_equal(_np(again), _np(first))
        np.testing.assert_array_equal(_np(first), getattr(np, name)(a, b))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_repeated_scalar_calls_equal_the_first(dtype):
    a = _arr(dtype, (9,)) - 2
    x = xp.asarray(a)
    for _ in range(3):
        np.testing.assert_array_equal(_np(x * 2.0), a * np.asarray(2.0, dtype=dtype))
        np.testing.assert_array_equal(_np(x > 0.5), a > 0.5)
        np.testing.assert_array_equal(_np(x + 3), a + np.asarray(3, dtype=dtype))
        r = xp.where(x > 0.5, x, 0.0)
        assert r.dtype == x.dtype
        np.testing.assert_array_equal(_np(r), np.where(a > 0.5, a, 0.0).astype(dtype))
        e = xp.exp(x)
        assert e.dtype == x.dtype
        np.testing.assert_allclose(_np(e), np.exp(a), rtol=1e-6)
    z = xp.asarray(np.asarray(1.5, dtype=dtype))          # 0-d: NumPy gives scalars, we give arrays
    for _ in range(2):
        for r in (z + z, z * 2.0, xp.exp(z), xp.where(z > 1, z, 0.0)):
            assert r.shape == () and isinstance(r, xp.Array)


def test_checks_still_refuse_after_a_cached_call():
    f = xp.asarray(np.array([1.5, 2.5]))
    i = xp.asarray(np.array([1, 2], dtype=np.int8))
    for _ in range(2):
        with pytest.raises(TypeError):
            xp.bitwise_and(f, f)
        with pytest.raises(TypeError):
            xp.exp(xp.asarray(np.array([True])))
        assert (i + 1).dtype == xp.int8
        with pytest.raises(OverflowError):
            i + 1000                                   # integer scalars are checked every time
        with pytest.raises(TypeError):
            i + 0.5                                    # a float scalar beside integers
        assert (f + i).dtype == xp.float64             # mixed dtypes take the checked path


def test_strict_switch_applies_to_cached_calls():
    i = xp.asarray(np.array([4, 6]))
    for _ in range(2):
        assert (i / i).dtype == xp.float64
        assert (i / 2).dtype == xp.float64
    with xp.flags(strict=True):
        for _ in range(2):
            with pytest.raises(TypeError):
                i / i
            with pytest.raises(TypeError):
                i / 2
    np.testing.assert_array_equal(_np(i / i), [1.0, 1.0])


def test_different_devices_are_refused():
    a = xp.asarray(np.arange(3.0), device="cpu")
    for _ in range(2):
        assert _np(a + a).tolist() == [0.0, 2.0, 4.0]
    if xp.cpu != xp.asarray(np.arange(1.0)).device:
        g = xp.asarray(np.arange(3.0))
        with pytest.raises(ValueError, match="different devices"):
            a + g


def test_gpu_sign_keeps_nans_without_a_boolean_mask():
    """``sign`` of GPU arrays (NaNs kept, ``sign(0j) == 0``) selects with ``where``; run here
    with NumPy as the module, as the same code runs CuPy's functions on a GPU."""
    from forge_array import _elementwise

    sign = _elementwise._sign_without_sync(np)
    x = np.array([np.nan, -0.0, 0.0, 2.5, -3.0, np.inf, -np.inf], dtype=np.float32)
    got = sign(x)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.array([np.nan, 0, 0, 1, -1, 1, -1], dtype=np.float32))
    z = np.array([0j, 3 + 4j, -2j, complex(np.nan, 0)], dtype=np.complex128)
    with np.errstate(invalid="ignore"):   # NumPy warns of 0 / 0 where CuPy does not
        got = sign(z)
    np.testing.assert_allclose(got[:3], [0, 0.6 + 0.8j, -1j])
    assert np.isnan(got[3])
    k = np.array([-5, 0, 7], dtype=np.int16)
    assert sign(k).dtype == np.int16 and sign(k).tolist() == [-1, 0, 1]
    if not SIMULATE:
        g = xp.sign(xp.asarray(x, device="cuda:0"))
        np.testing.assert_array_equal(np.asarray(g.to_device("cpu")), sign(x))
