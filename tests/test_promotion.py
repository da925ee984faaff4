"""Type promotion per the standard (no value-based casting); mixed kinds raise under strict
promotion (tests/test_mixed_promotion.py covers them without it)."""

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
        with xp.set_strict(True):
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
def test_mixed_kinds_raise_under_strict_promotion(a, b):
    with xp.set_strict(True):
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


# every binary function of the standard that takes two arrays of different dtypes of one kind
_MIXED_OPS = {
    "numeric": ["add", "subtract", "multiply", "pow", "equal", "not_equal"],
    "real": ["floor_divide", "remainder", "maximum", "minimum", "less", "less_equal",
             "greater", "greater_equal"],
    "float": ["divide", "atan2", "copysign", "hypot", "logaddexp", "nextafter"],
    "int": ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
            "bitwise_right_shift"],
}


def _mixed_pairs():
    ints = [(a, b) for a, b in itertools.permutations(INTS + UINTS, 2)
            if not ({a, b} & {xp.uint64} and {a, b} & set(INTS))]
    floats = list(itertools.permutations(FLOATS, 2))
    cplx = [(a, b) for a, b in itertools.permutations(FLOATS + COMPLEX, 2)
            if {a, b} & set(COMPLEX)]
    for a, b in ints:
        for kind in ("numeric", "real", "int"):
            for op in _MIXED_OPS[kind]:
                yield op, a, b
    for a, b in floats:
        for kind in ("numeric", "real", "float"):
            for op in _MIXED_OPS[kind]:
                yield op, a, b
    for a, b in cplx:
        for op in _MIXED_OPS["numeric"]:
            yield op, a, b


def _values(dtype, rng):
    if dtype in FLOATS:
        special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.5, 3e38]
        return np.concatenate([special, rng.standard_normal(24) * 10]).astype(dtype)
    if dtype in COMPLEX:
        re = np.array([0.0, -0.0, np.inf, np.nan, 1.0, -2.5] + list(rng.standard_normal(26)))
        with np.errstate(invalid="ignore"):
            return (re + 1j * rng.permutation(re)).astype(dtype)
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -7), min(info.max, 7)
    return np.concatenate([np.array([info.min, info.max, 0, 1], dtype=dtype),
                           rng.integers(lo, hi + 1, 28).astype(dtype)])


@pytest.fixture(scope="module")
def backend_device():
    """The GPU where CuPy runs (the backend is CuPy there), else the CPU (NumPy)."""
    from forge_array import runtime

    return "cpu" if runtime.SIMULATE or runtime.cupy() is None else "cuda"


@pytest.mark.parametrize("op,a,b", list(_mixed_pairs()))
def test_mixed_dtypes_equal_the_converted_evaluation(backend_device, op, a, b):
    """Two arrays of different dtypes go to the backend as they are (its kernel converts as
    it reads): the result, bit for bit, is the one of both converted to the promoted dtype
    first."""
    rng = np.random.default_rng(hash((op, str(a), str(b))) % 2**32)
    x1 = xp.asarray(_values(a, rng), device=backend_device)
    x2 = xp.asarray(_values(b, rng), device=backend_device)
    if (op == "pow" or "shift" in op) and b in INTS + UINTS:   # no negative exponents, shifts
        x2 = xp.asarray(rng.integers(0, 4, 32).astype(b), device=backend_device)
    dt = xp.result_type(a, b)
    fn = getattr(xp, op)
    with np.errstate(all="ignore"):
        got = np.asarray(fn(x1, x2).to_device("cpu"))
        want = np.asarray(fn(xp.astype(x1, dt), xp.astype(x2, dt)).to_device("cpu"))
    assert got.dtype == want.dtype
    _assert_same_bits(got, want)


def _assert_same_bits(got, want):
    """Equal bit for bit (zeros' signs included), except which NaN a NaN is: which payload an
    operation on two NaNs propagates is left open by IEEE 754 and the standard (a GPU adding a
    float32 NaN to a float64 NaN in one kernel returns the other operand's payload)."""
    if got.dtype.kind == "c":
        _assert_same_bits(got.real, want.real)
        _assert_same_bits(got.imag, want.imag)
        return
    if got.dtype.kind == "f":
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan)
        got, want = got[~nan], want[~nan]
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("a,b", [(xp.float32, xp.float64), (xp.int8, xp.uint8),
                                 (xp.uint32, xp.int64), (xp.complex64, xp.float64)])
def test_where_of_mixed_dtypes_equals_the_converted_evaluation(backend_device, a, b):
    rng = np.random.default_rng(7)
    cond = xp.asarray(rng.random(32) < 0.5, device=backend_device)
    x1 = xp.asarray(_values(a, rng), device=backend_device)
    x2 = xp.asarray(_values(b, rng), device=backend_device)
    dt = xp.result_type(a, b)
    got = np.asarray(xp.where(cond, x1, x2).to_device("cpu"))
    want = np.asarray(xp.where(cond, xp.astype(x1, dt), xp.astype(x2, dt)).to_device("cpu"))
    assert got.dtype == want.dtype
    _assert_same_bits(got, want)


def test_which_mixed_pairs_go_unconverted():
    """Integers (exact) and one-step functions of real floats go to the backend as they are;
    several-step functions of floats and complex operands are converted first."""
    from forge_array._elementwise import _native_pair

    f32, f64, c64, c128 = (np.dtype(d) for d in ("float32", "float64", "complex64", "complex128"))
    i8, u8, i16 = np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16)
    assert _native_pair("subtract", f32, f64, f64) and _native_pair("less", f64, f32, f64)
    assert _native_pair("pow", i8, u8, i16) and _native_pair("remainder", u8, i8, i16)
    assert not _native_pair("atan2", f32, f64, f64) and not _native_pair("pow", f32, f64, f64)
    assert not _native_pair("multiply", c128, c64, c128) and not _native_pair("add", f64, c64, c128)


def test_a_backend_promotion_other_than_the_standard_converts_first(monkeypatch):
    """Should the backend's own promotion of two dtypes ever differ from the standard's, the
    operands are converted first (the pairs are checked, not assumed)."""
    from forge_array import _elementwise as ew

    monkeypatch.setitem(ew._NATIVE, ("multiply", np.dtype(np.int8), np.dtype(np.int16),
                                     np.dtype(np.int16)), False)
    x1 = xp.asarray(np.array([100, -100], dtype=np.int8), device="cpu")
    x2 = xp.asarray(np.array([100, 100], dtype=np.int16), device="cpu")
    r = x1 * x2
    assert r.dtype == xp.int16 and np.asarray(r).tolist() == [10000, -10000]
