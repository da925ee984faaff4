"""linalg.cholesky: one GPU matrix through cuSOLVER's 64-bit API (``_cusolver_potrf``), stacks
and the CPU through the backend's function; every factor against NumPy's (float64
reference), lower and upper, views, the empty matrix."""

import numpy as np
import pytest

import forge_array as xp
from forge_array import _cusolver_potrf
from forge_array.runtime import config

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
DEV = "cpu" if config.SIMULATE else "cuda:0"


def _spd(shape, dtype, seed=0):
    """Hermitian positive-definite matrices of ``shape`` (..., n, n), well conditioned."""
    rng = np.random.default_rng(seed)
    n = shape[-1]
    m = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        m = m + 1j * rng.standard_normal(shape)
    a = m @ np.conj(np.swapaxes(m, -1, -2)) / n + np.eye(n)
    return a.astype(dtype)


def _tol(dtype):
    return 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-11


def _host(r):
    return np.asarray(xp.asarray(r, device="cpu"))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 31, 32, 33, 300])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_against_numpy(dtype, n, upper):
    a = _spd((n, n), dtype)
    got = _host(xp.linalg.cholesky(xp.asarray(a, device=DEV), upper=upper))
    want = np.linalg.cholesky(a.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64))
    if upper:
        want = np.conj(want.T)
    assert got.dtype == dtype and got.shape == (n, n)
    np.testing.assert_allclose(got, want, rtol=_tol(dtype), atol=_tol(dtype) * np.abs(want).max())
    tri = np.triu(got, 1) if not upper else np.tril(got, -1)
    assert not tri.any()                      # the other triangle is zero


@pytest.mark.parametrize("view", ["transposed", "strided"])
def test_cholesky_of_views_and_stacks(view):
    a = _spd((40, 40), np.float64, seed=1)
    big = np.zeros((80, 80))
    big[::2, ::2] = a
    x = xp.asarray(a, device=DEV)
    src = xp.matrix_transpose(x) if view == "transposed" else xp.asarray(big, device=DEV)[::2, ::2]
    np.testing.assert_allclose(_host(xp.linalg.cholesky(src)), np.linalg.cholesky(a), rtol=1e-11, atol=1e-12)
    s = _spd((3, 16, 16), np.float32, seed=2)
    np.testing.assert_allclose(_host(xp.linalg.cholesky(xp.asarray(s, device=DEV))), np.linalg.cholesky(s),
                               rtol=1e-4, atol=1e-5)


def test_cholesky_of_an_empty_matrix_and_bad_input():
    r = xp.linalg.cholesky(xp.zeros((0, 0), device=DEV))
    assert r.shape == (0, 0)
    with pytest.raises(ValueError):
        xp.linalg.cholesky(xp.zeros((3, 4), device=DEV))
    with pytest.raises(TypeError):
        xp.linalg.cholesky(xp.zeros((3, 3), dtype=xp.int64, device=DEV))


@pytest.mark.skipif(config.SIMULATE, reason="cuSOLVER: the GPU run")
def test_one_gpu_matrix_takes_the_64_bit_api():
    assert _cusolver_potrf.cholesky_available()
    import cupy as cp

    a = cp.asarray(_spd((64, 64), np.float32))
    got = _cusolver_potrf.cholesky(a)
    assert got is not None
    np.testing.assert_allclose(cp.asnumpy(got), np.linalg.cholesky(cp.asnumpy(a).astype(np.float64)),
                               rtol=1e-4, atol=1e-5)
    assert _cusolver_potrf.cholesky(cp.zeros((2, 3, 3), np.float32)) is None   # stacks: CuPy's batched call
