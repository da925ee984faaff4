"""Type promotion per the standard (no value-based casting, no mixed kinds)."""

import itertools

import numpy as np
import pytest

import forge_array as xp

# Namespace semantics are checked against NumPy; the kernels have their own tests.
pytestmark = pytest.mark.usefixtures("numpy_routes")

INTS = [xp.int8, xp.int16, xp.int32, xp.int64]
UINTS = [xp.uint8, xp.uint16, xp.uint32, xp.uint64]
FLOATS = [xp.float32, xp.float64]
COMPLEX = [xp.complex64, xp.complex128]


def z(dtype):
    return xp.zeros(1, dtype=dtype, device="cpu")


@pytest.mark.parametrize("a,b", list(itertools.product(INTS + UINTS, repeat=2)))
def test_integer_table_matches_numpy_where_defined(a, b):
    if {a, b} & {xp.uint64} and {a, b} & set(INTS):
        with pytest.raises(TypeError):
            xp.result_type(a, b)
        with pytest.raises(TypeError):
            z(a) + z(b)
        return
    expected = np.promote_types(a, b)
    assert xp.result_type(a, b) == expected
    assert (z(a) + z(b)).dtype == expected


@pytest.mark.parametrize("a,b", list(itertools.product(FLOATS + COMPLEX, repeat=2)))
def test_float_table(a, b):
    assert xp.result_type(a, b) == np.promote_types(a, b)
    assert (z(a) * z(b)).dtype == np.promote_types(a, b)


@pytest.mark.parametrize("a,b", [(xp.int32, xp.float32), (xp.bool, xp.int8),
                                 (xp.uint8, xp.float64), (xp.bool, xp.float32),
                                 (xp.int64, xp.complex128)])
def test_mixed_kinds_raise(a, b):
    with pytest.raises(TypeError, match="promot"):
        xp.result_type(a, b)
    with pytest.raises(TypeError):
        z(a) + z(b) if a != xp.bool else xp.equal(z(a), z(b))


def test_python_scalars_take_array_dtype():
    assert (z(xp.int8) + 1).dtype == xp.int8
    assert (z(xp.float32) + 1).dtype == xp.float32
    assert (z(xp.float32) * 2.5).dtype == xp.float32
    assert (z(xp.float32) + 1j).dtype == xp.complex64
    assert (z(xp.float64) + 1j).dtype == xp.complex128
    assert (z(xp.complex64) + 1.0).dtype == xp.complex64
    assert (z(xp.bool) & True).dtype == xp.bool
    assert (2 ** z(xp.uint8)).dtype == xp.uint8


@pytest.mark.parametrize("dtype,scalar", [(xp.int32, 1.5), (xp.int32, 1j), (xp.bool, 1),
                                          (xp.int8, True), (xp.float32, True),
                                          (xp.uint8, 0.0)])
def test_undefined_scalar_mixes_raise(dtype, scalar):
    with pytest.raises(TypeError):
        z(dtype) + scalar if dtype != xp.bool else xp.logical_and(z(dtype), scalar)


def test_int_scalar_out_of_bounds():
    with pytest.raises(OverflowError):
        z(xp.int8) + 300
    with pytest.raises(OverflowError):
        z(xp.uint8) - (-1)


def test_result_type_with_scalars():
    assert xp.result_type(xp.int16, 1) == xp.int16
    assert xp.result_type(xp.float32, 1.0, 2) == xp.float32
    assert xp.result_type(xp.float32, 1j) == xp.complex64
    assert xp.result_type(z(xp.uint8), xp.int8) == xp.int16
    with pytest.raises(ValueError):
        xp.result_type(1, 2.0)


def test_can_cast_and_isdtype():
    assert xp.can_cast(xp.int8, xp.int64)
    assert not xp.can_cast(xp.int64, xp.int8)
    assert not xp.can_cast(xp.int64, xp.float64)
    assert xp.can_cast(z(xp.float32), xp.complex64)
    assert xp.isdtype(xp.uint8, "unsigned integer")
    assert xp.isdtype(xp.complex64, ("real floating", "complex floating"))
    assert not xp.isdtype(xp.bool, "numeric")
    with pytest.raises(ValueError):
        xp.isdtype(xp.int8, "nope")


def test_reduction_accumulation_dtypes():
    assert xp.sum(z(xp.int32)).dtype == xp.int64
    assert xp.sum(z(xp.uint8)).dtype == xp.uint64
    assert xp.sum(z(xp.bool)).dtype == xp.int64
    assert xp.sum(z(xp.float32)).dtype == xp.float32
    assert xp.prod(z(xp.int8), dtype=xp.int16).dtype == xp.int16
    assert xp.cumulative_sum(z(xp.uint16)).dtype == xp.uint64
    assert xp.cumulative_prod(z(xp.complex64)).dtype == xp.complex64
    assert xp.max(z(xp.int8)).dtype == xp.int8
    assert xp.argmax(z(xp.float32)).dtype == xp.int64


def test_finfo_iinfo_python_types():
    fi = xp.finfo(xp.float32)
    assert isinstance(fi.eps, float) and fi.bits == 32 and fi.dtype == xp.float32
    assert xp.finfo(xp.complex64).dtype == xp.float32
    ii = xp.iinfo(z(xp.uint16))
    assert ii.max == 65535 and isinstance(ii.max, int)
    with pytest.raises(TypeError):
        xp.finfo(xp.int8)
    with pytest.raises(TypeError):
        xp.iinfo(xp.float32)
