"""Errors: wrong dtypes, shapes and axes raise TypeError / ValueError / IndexError
naming the problem."""

import numpy as np
import pytest

import forge_array as xp
from forge_array.runtime import SIMULATE

# Namespace semantics are checked against NumPy; the kernels have their own tests.
pytestmark = pytest.mark.usefixtures("numpy_routes")


def a(v, **kw):
    return xp.asarray(v, device="cpu", **kw)


def test_namespace_has_everything():
    import array_api_compat  # noqa: F401

    names = ["abs", "acos", "add", "all", "any", "arange", "argmax", "argsort", "asarray",
             "astype", "broadcast_shapes", "can_cast", "clip", "concat", "count_nonzero",
             "cumulative_prod", "cumulative_sum", "diff", "expand_dims", "from_dlpack",
             "isin", "matmul", "max", "mean", "meshgrid", "moveaxis", "nextafter", "nonzero",
             "repeat", "searchsorted", "sort", "std", "sum", "take", "take_along_axis",
             "tensordot", "tile", "unique_all", "unstack", "var", "vecdot", "where",
             "__array_namespace_info__", "e", "inf", "nan", "pi", "newaxis"]
    for n in names:
        assert hasattr(xp, n), n
    assert xp.__array_api_version__ == "2025.12"
    for n in ["cholesky", "eig", "eigvals", "svd", "vector_norm", "matrix_norm", "solve"]:
        assert hasattr(xp.linalg, n), n
    for n in ["fft", "fftn", "irfftn", "fftfreq", "fftshift"]:
        assert hasattr(xp.fft, n), n


@pytest.mark.parametrize("fn", [xp.sum, xp.prod, xp.max, xp.min, xp.any, xp.all])
def test_reduction_axes(fn):
    x = xp.ones((2, 3), dtype=xp.float32, device="cpu")
    assert fn(x, axis=(-1, 0)).shape == ()
    assert fn(x, axis=1, keepdims=True).shape == (2, 1)
    with pytest.raises(IndexError, match="axis 2"):
        fn(x, axis=2)
    with pytest.raises(IndexError):
        fn(x, axis=(-3,))
    with pytest.raises(ValueError, match="repeated"):
        fn(x, axis=(1, -1))
    with pytest.raises(TypeError):
        fn(x, axis=1.0)
    with pytest.raises(TypeError):
        fn(np.ones(3))


def test_empty_reductions():
    e = xp.zeros((0, 3), device="cpu")
    with pytest.raises(ValueError, match="empty"):
        xp.max(e)
    with pytest.raises(ValueError):
        xp.min(e, axis=0)
    assert xp.max(e, axis=1).shape == (0,)
    with pytest.raises(ValueError):
        xp.argmax(e)
    with pytest.raises(ValueError):
        xp.argmin(e, axis=0)
    assert float(xp.sum(e)) == 0.0 and float(xp.prod(e)) == 1.0
    assert np.isnan(float(xp.mean(e)))


def test_statistical_dtypes():
    with pytest.raises(TypeError, match="floating"):
        xp.mean(a([1, 2]))
    with pytest.raises(TypeError):
        xp.var(a([1, 2]))
    with pytest.raises(TypeError):
        xp.max(a([1j]))
    with pytest.raises(ValueError):
        xp.var(a([1.0, 2.0]), correction=-1)
    assert float(xp.var(a([1.0, 3.0]), correction=1)) == 2.0
    with pytest.raises(ValueError, match="axis"):
        xp.cumulative_sum(xp.ones((2, 2), device="cpu"))
    assert xp.cumulative_sum(a([1, 2]), include_initial=True).shape == (3,)


def test_elementwise_dtype_errors():
    with pytest.raises(TypeError, match="floating"):
        xp.sin(a([1, 2]))
    with pytest.raises(TypeError, match="integer"):
        xp.bitwise_and(a([1.0]), a([1.0]))
    with pytest.raises(TypeError, match="boolean"):
        xp.logical_and(a([1]), a([1]))
    with pytest.raises(TypeError):
        xp.add(1, 2)
    with pytest.raises(TypeError):
        xp.add(a([1.0]), "x")
    with pytest.raises(ValueError):
        xp.add(a([1.0, 2.0]), a([1.0, 2.0, 3.0]))


def test_matmul_family_errors():
    m = xp.ones((2, 3), device="cpu")
    with pytest.raises(ValueError, match="contracted"):
        xp.matmul(m, m)
    with pytest.raises(ValueError):
        xp.matmul(a(1.0), m)
    with xp.set_strict(True), pytest.raises(TypeError):   # mixed kinds
        xp.matmul(m, xp.ones((3, 2), dtype=xp.int64, device="cpu"))
    with pytest.raises(ValueError):
        xp.vecdot(m, xp.ones(2, device="cpu"))
    with pytest.raises(IndexError):
        xp.vecdot(m, m, axis=2)
    with pytest.raises(ValueError):
        xp.tensordot(m, m, axes=1)
    assert xp.tensordot(m, m, axes=([1], [1])).shape == (2, 2)
    assert xp.vecdot(m, xp.ones(3, device="cpu")).shape == (2,)


def test_manipulation_errors():
    x = xp.ones((2, 3), device="cpu")
    with pytest.raises(ValueError):
        xp.reshape(x, (4, 2))
    with pytest.raises(ValueError):
        xp.reshape(x.T, (6,), copy=False)
    assert xp.reshape(x, (6,), copy=False).shape == (6,)
    with pytest.raises(ValueError):
        xp.squeeze(x, axis=0)
    with pytest.raises(IndexError):
        xp.expand_dims(x, axis=4)
    assert xp.expand_dims(x, axis=(0, 3)).shape == (1, 2, 3, 1)
    with pytest.raises(ValueError):
        xp.concat([x, xp.ones((3, 2), device="cpu")])
    with xp.set_strict(True), pytest.raises(TypeError):   # mixed kinds
        xp.concat([x, xp.ones((2, 3), dtype=xp.int64, device="cpu")])
    with pytest.raises(ValueError):
        xp.broadcast_to(x, (3, 3))
    assert xp.broadcast_shapes((2, 1), (1, 3)) == (2, 3)
    with pytest.raises(ValueError):
        xp.broadcast_shapes((2,), (3,))
    with pytest.raises(ValueError):
        xp.permute_dims(x, (0, 0))


def test_creation_errors():
    with pytest.raises(TypeError):
        xp.zeros(2, dtype="float32")
    with pytest.raises(TypeError):
        xp.zeros(2, dtype=np.float16)
    with pytest.raises(ValueError):
        xp.zeros(-1)
    with pytest.raises(TypeError):
        xp.full(2, 1.5, dtype=xp.int32)
    with pytest.raises(OverflowError):
        xp.full(2, 300, dtype=xp.int8)
    with pytest.raises(TypeError):
        xp.astype(a([1j]), xp.float64)
    assert xp.astype(a([1.5]), xp.float32).dtype == xp.float32


def test_indexing_functions():
    x = a([10, 20, 30])
    assert np.asarray(xp.take(x, a([2, -1]))).tolist() == [30, 30]
    with pytest.raises(IndexError):
        xp.take(x, a([3]))
    with pytest.raises(TypeError):
        xp.take(x, a([1.0]))


def test_special_cases_fixed():
    inf = float("inf")
    r = xp.floor_divide(a([inf, -inf, 1.0, -1.0]), a([2.0, 2.0, -inf, inf]))
    got = np.asarray(r)
    assert got[0] == inf and got[1] == -inf
    assert got[2] == 0 and np.signbit(got[2]) and got[3] == 0 and np.signbit(got[3])


def test_searching_and_sets():
    x = a([3.0, 1.0, 2.0, 1.0])
    assert int(xp.argmin(x)) == 1
    assert xp.unique_values(x).shape == (3,)
    assert xp.unique_inverse(xp.reshape(x, (2, 2))).inverse_indices.shape == (2, 2)
    assert np.asarray(xp.searchsorted(a([1.0, 2.0, 3.0]), 2.5)).tolist() == 2
    assert np.asarray(xp.where(x > 1.5, x, 0.0)).tolist() == [3.0, 0.0, 2.0, 0.0]
    with pytest.raises(TypeError):
        xp.where(x, x, x)
    assert np.asarray(xp.sort(x, descending=True)).tolist() == [3.0, 2.0, 1.0, 1.0]
    assert np.asarray(xp.argsort(x, descending=True)).tolist() == [0, 2, 1, 3]


@pytest.mark.parametrize("device", ["cpu", None], ids=["cpu", "default"])
def test_solve_empty_operands(device):
    """linalg.solve with nothing to solve (zero right-hand sides, 0x0 systems) returns the
    empty result of the broadcast shape (CuPy's batched solve divides by a zero stride)."""
    a = xp.ones((1, 1, 1), device=device)
    assert xp.linalg.solve(a, xp.ones((1, 1, 0), device=device)).shape == (1, 1, 0)
    assert xp.linalg.solve(xp.ones((3, 0, 0), device=device), xp.ones((0, 2), device=device)).shape == (3, 0, 2)
    assert xp.linalg.solve(xp.ones((0, 0), device=device), xp.ones(0, device=device)).shape == (0,)
    r = xp.linalg.solve(a, xp.full((2, 1, 3), 2.0, device=device))
    assert r.shape == (2, 1, 3) and float(xp.max(r)) == 2.0


@pytest.mark.parametrize("device", xp.__array_namespace_info__().devices(), ids=str)
@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn"])
def test_fftn_unsorted_axes(device, name):
    """``s`` follows ``axes`` in the order given, on every device (CuPy's own fftn shaped
    the output wrongly for axes (1, 0)); values as NumPy's."""
    rng = np.random.default_rng(5)
    h = rng.standard_normal((3, 4, 5))
    if name in ("fftn", "ifftn", "irfftn"):
        h = h + 1j * rng.standard_normal((3, 4, 5))
    x = xp.asarray(h, device=device)
    for s, axes in [((2, 6), (2, 0)), ((1, 2), (1, 0)), ((4, 3, 2), (2, 1, 0)), ((3, 5), (0, 2))]:
        got = getattr(xp.fft, name)(x, s=s, axes=axes)
        want = getattr(np.fft, name)(h, s=s, axes=axes)
        assert got.shape == want.shape, (s, axes)
        np.testing.assert_allclose(np.asarray(xp.asarray(got, device="cpu")), want, rtol=1e-10, atol=1e-10)
    # the real axis of rfftn / irfftn before another (conformance: rfftn of a (2, 1) array
    # with s=(2, 1), axes=[1, 0] came out (2, 1) on CuPy), every norm
    h2 = rng.standard_normal((2, 3)) + (1j * rng.standard_normal((2, 3)) if name in ("fftn", "ifftn", "irfftn") else 0)
    x2 = xp.asarray(h2, device=device)
    for s, axes in [((2, 1), (1, 0)), ((4, 2), (1, 0)), ((3, 3), (1, 0))]:
        for norm in ("backward", "ortho", "forward"):
            got = getattr(xp.fft, name)(x2, s=s, axes=axes, norm=norm)
            want = getattr(np.fft, name)(h2, s=s, axes=axes, norm=norm)
            assert got.shape == want.shape, (s, axes, norm)
            np.testing.assert_allclose(np.asarray(xp.asarray(got, device="cpu")), want, rtol=1e-10,
                                       atol=1e-10)


@pytest.mark.parametrize("check", ["host", "reductions"])
@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8"])
def test_take_checks_both_bounds(dtype, check, monkeypatch):
    # small index arrays are copied and checked on the host, larger ones by two reductions
    from forge_array import _backend_indexing

    if check == "reductions":
        monkeypatch.setattr(_backend_indexing, "HOST_CHECK_MAX", 0)
    dev = "cpu" if SIMULATE else "cuda:0"
    x = xp.asarray(np.arange(12.0).reshape(3, 4), device=dev)
    ok = [3, 0] if dtype == "uint8" else [3, -4, 0]
    got = xp.take(x, xp.asarray(np.array(ok, dtype=dtype), device=dev), axis=1)
    np.testing.assert_array_equal(np.asarray(got.to_device("cpu")), np.take(np.arange(12.0).reshape(3, 4), ok, axis=1))
    for bad in ([4], [0, 200]) if dtype == "uint8" else ([4], [-5], [0, 7, 1]):
        with pytest.raises(IndexError, match=r"take\(\): index out of bounds for an axis of size 4"):
            xp.take(x, xp.asarray(np.array(bad, dtype=dtype), device=dev), axis=1)
    with pytest.raises(IndexError, match=r"take_along_axis\(\): index out of bounds for an axis of size 3"):
        xp.take_along_axis(x, xp.asarray(np.array([[3, 0, 1, 2]], dtype=dtype), device=dev), axis=0)
    assert xp.take(x, xp.asarray(np.zeros(0, dtype=dtype), device=dev), axis=0).shape == (0, 4)
