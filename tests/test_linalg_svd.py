"""linalg.svd / svdvals: which driver runs, the Jacobi path's plumbing (with an emulated
solver on the CPU) and, on a GPU, cuSOLVER's gesvdj against NumPy."""

import numpy as np
import pytest

import forge_array as xp
from forge_array import linalg as la

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
SHAPES = [(40, 6), (6, 40), (3, 20, 5), (2, 3, 5, 17), (1, 9, 3), (7, 1), (1, 7)]


def _rand(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _tol(dtype, k=1):
    """Relative tolerance of a single- or double-precision SVD of matrices with ``k`` singular
    values: rounding grows with the side (two float32 SVDs of a (1024, 1024) Gaussian matrix,
    cuSOLVER's gesvd and gesvdj, differ by up to 2.5e-4 of the largest singular value)."""
    base = 2e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10
    return base * max(1.0, k / 256)


def _check_svd(a, u, s, vh, full_matrices):
    """S equals NumPy's; U, Vh have orthonormal columns / rows and rebuild ``a``."""
    a, u, s, vh = (np.asarray(v) for v in (a, u, s, vh))
    m, n = a.shape[-2:]
    k = min(m, n)
    tol = _tol(a.dtype, k)
    ref = np.linalg.svd(a, compute_uv=False)
    assert s.shape == ref.shape and s.dtype == ref.dtype
    np.testing.assert_allclose(s, ref, rtol=tol, atol=tol * max(1.0, float(ref.max(initial=0))))
    ku, kv = (m, n) if full_matrices else (k, k)
    assert u.shape == a.shape[:-2] + (m, ku) and vh.shape == a.shape[:-2] + (kv, n)
    assert u.dtype == a.dtype and vh.dtype == a.dtype
    rebuilt = (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :]
    np.testing.assert_allclose(rebuilt, a, atol=tol * 10 * max(1.0, float(ref.max(initial=0))))
    eye_u = np.conj(np.swapaxes(u, -1, -2)) @ u
    eye_v = vh @ np.conj(np.swapaxes(vh, -1, -2))
    np.testing.assert_allclose(eye_u, np.broadcast_to(np.eye(ku), eye_u.shape), atol=tol * 10)
    np.testing.assert_allclose(eye_v, np.broadcast_to(np.eye(kv), eye_v.shape), atol=tol * 10)


def test_driver_choice():
    d = la._svd_driver
    assert d((200000, 128), cuda=True) == "gesvdj"
    assert d((128, 200000), cuda=True) == "gesvdj"
    assert d((4, 1000, 100), cuda=True) == "gesvdj"
    assert d((2048, 2048), cuda=True) == "gesvdj"                       # square, vectors wanted
    assert d((2048, 2048), cuda=True, compute_uv=False) == "backend"     # values alone
    assert d((512, 512), cuda=True) == "backend"
    assert d((300, 200), cuda=True) == "backend"
    assert d((4, 128), cuda=True) == "backend"                          # small: CuPy's gesvd
    assert d((128, 4), cuda=True) == "backend"
    assert d((32, 128), cuda=True) == "gesvdj"
    assert d((50, 8, 8), cuda=True) == "gesvdj_batched"
    assert d((50, 32, 3), cuda=True) == "gesvdj_batched"
    assert d((1, 8, 8), cuda=True) == "backend"          # one matrix, square
    assert d((50, 33, 8), cuda=True) == "gesvdj"
    assert d((0, 5), cuda=True) == "empty"
    assert d((3, 0, 4, 4), cuda=True) == "empty"
    for shape in [(200000, 128), (0, 5), (50, 8, 8)]:
        assert d(shape, cuda=False) == "backend"


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0), (2, 0, 4), (0, 3, 2), (0, 2, 2)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_empty_matches_numpy(shape, full_matrices):
    a = np.zeros(shape)
    u, s, vh = la._svd_empty(np, a, full_matrices, True)
    ru, rs, rvh = np.linalg.svd(a, full_matrices=full_matrices)
    for got, ref in ((u, ru), (s, rs), (vh, rvh)):
        assert got.shape == ref.shape and got.dtype == ref.dtype
        np.testing.assert_array_equal(got, ref)
    assert la._svd_empty(np, a, full_matrices, False).shape == rs.shape


def _emulated_solver(fail=()):
    """A NumPy stand-in for cuSOLVER's gesvdj with :func:`_jacobi_svd`'s conventions: reads
    each matrix column-major from ``xs``, overwrites ``xs`` (as the solver does) and reports
    the matrices in ``fail`` as not converged (with garbage in their results)."""

    def solve(xs, rows, cols, full, compute_uv, batched):
        nb = xs.shape[0]
        ku = rows if (full or batched) else cols
        us = np.zeros((nb, ku, rows), dtype=xs.dtype)
        vs = np.zeros((nb, cols, cols), dtype=xs.dtype)
        s = np.zeros((nb, cols), dtype=np.empty(0, xs.dtype).real.dtype)
        info = np.zeros(nb, dtype=np.int32)
        for i in range(nb):
            a = xs[i].T                         # column-major (rows, cols)
            assert a.shape == (rows, cols) and rows >= cols
            u, si, vh = np.linalg.svd(a, full_matrices=full or batched)
            us[i] = u.T
            vs[i] = np.conj(vh)                  # V = vh^H, column-major: vs[i] = V.T
            s[i] = si
            if i in fail:
                info[i] = cols + 1
                us[i] = 7.0
                vs[i] = 7.0
                s[i] = -1.0
        xs[...] = np.nan
        return us.swapaxes(-1, -2), s, vs.swapaxes(-1, -2), info

    return solve


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("full_matrices", [True, False])
@pytest.mark.parametrize("batched", [False, True])
def test_jacobi_plumbing_emulated(dtype, shape, full_matrices, batched):
    a = _rand(shape, dtype)
    keep = a.copy()
    nb = int(np.prod(shape[:-2]))
    fail = {0, nb - 1} if nb > 2 else {0}
    u, s, vh = la._jacobi_svd(np, a, full_matrices, True, _emulated_solver(fail), batched)
    np.testing.assert_array_equal(a, keep)       # the input is never overwritten
    _check_svd(a, u, s, vh, full_matrices)
    s_only = la._jacobi_svd(np, a, full_matrices, False, _emulated_solver(fail), batched)
    np.testing.assert_allclose(s_only, s, rtol=_tol(dtype))


def test_jacobi_strided_input_emulated():
    base = _rand((3, 30, 16), np.float64)
    a = base[:, ::2, 1::3]                       # non-contiguous view of (3, 15, 5)
    u, s, vh = la._jacobi_svd(np, a, False, True, _emulated_solver(), False)
    _check_svd(a, u, s, vh, False)


# ---------------------------------------------------------------- GPU (CuPy, cuSOLVER)

def _has_gpu():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


gpu = pytest.mark.skipif(not _has_gpu(), reason="needs CuPy and a GPU")

GPU_SHAPES = [(2000, 16), (16, 2000), (300, 128), (128, 300), (5, 400, 20), (64, 8, 8),
              (10, 32, 5), (10, 5, 32), (1, 1), (9, 1), (1, 9), (2, 3, 4, 4), (50, 50),
              (4, 128), (1024, 1024)]   # a small single matrix (gesvd), a large square one (gesvdj)


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", GPU_SHAPES)
@pytest.mark.parametrize("full_matrices", [True, False])
def test_gpu_svd_matches_numpy(dtype, shape, full_matrices):
    a = _rand(shape, dtype, seed=1)
    x = xp.asarray(a, device="cuda:0")
    u, s, vh = xp.linalg.svd(x, full_matrices=full_matrices)
    assert u.device == x.device
    host = [np.asarray(xp.asarray(v, device="cpu")) for v in (u, s, vh)]
    _check_svd(a, *host, full_matrices)
    sv = np.asarray(xp.asarray(xp.linalg.svdvals(x), device="cpu"))
    tol = _tol(dtype, min(shape[-2:]))
    np.testing.assert_allclose(sv, host[1], rtol=tol, atol=tol * max(1.0, float(host[1].max(initial=0))))
    np.testing.assert_array_equal(np.asarray(xp.asarray(x, device="cpu")), a)   # untouched


@gpu
@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 4), (0, 3, 2)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_gpu_svd_empty(shape, full_matrices):
    x = xp.zeros(shape, dtype=xp.float32, device="cuda:0")
    u, s, vh = xp.linalg.svd(x, full_matrices=full_matrices)
    ru, rs, rvh = np.linalg.svd(np.zeros(shape, np.float32), full_matrices=full_matrices)
    for got, ref in ((u, ru), (s, rs), (vh, rvh)):
        got = np.asarray(xp.asarray(got, device="cpu"))
        assert got.shape == ref.shape
        np.testing.assert_array_equal(got, ref)


@gpu
def test_gpu_tall_float32_rank_deficient():
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((20000, 4)) @ rng.standard_normal((4, 64))).astype(np.float32)
    x = xp.asarray(a, device="cuda:0")
    u, s, vh = xp.linalg.svd(x, full_matrices=False)
    s = np.asarray(xp.asarray(s, device="cpu"))
    ref = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    np.testing.assert_allclose(s[:4], ref[:4], rtol=1e-4)
    assert np.all(s[4:] < 1e-3 * s[0])
    u = np.asarray(xp.asarray(u, device="cpu"))[:, :4]
    vh = np.asarray(xp.asarray(vh, device="cpu"))[:4]
    np.testing.assert_allclose((u * s[:4]) @ vh, a, atol=1e-3 * s[0])


@gpu
def test_gpu_jacobi_fallback_uses_gesvd(monkeypatch):
    """Matrices the Jacobi solver reports as not converged are computed by CuPy's gesvd."""
    real = la._gesvdj_solver()
    assert real is not None

    def flaky(xs, rows, cols, full, compute_uv, batched):
        u, s, v, info = real(xs, rows, cols, full, compute_uv, batched)
        info = info.copy()
        info[0] = cols + 1
        s[0] = -1.0
        return u, s, v, info

    monkeypatch.setattr(la, "_GESVDJ", [flaky])
    a = _rand((3, 200, 20), np.float32, seed=5)
    u, s, vh = xp.linalg.svd(xp.asarray(a, device="cuda:0"), full_matrices=False)
    _check_svd(a, *(np.asarray(xp.asarray(v, device="cpu")) for v in (u, s, vh)), False)


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 300, 7), (3, 40, 33), (2, 1, 5), (2, 5, 1)])
def test_gpu_transpose_into_is_the_column_major_copy(monkeypatch, dtype, shape):
    """The Jacobi path's input buffer through cuBLAS geam: every matrix column-major, as the
    element-wise copy of the transposed view makes it; a view that is not C-ordered per
    matrix, and a stack of small matrices, are left to that copy."""
    import cupy as cp

    a3 = cp.asarray(_rand(shape, dtype, seed=4))
    xs = cp.empty((shape[0], shape[2], shape[1]), dtype=a3.dtype)
    assert la._transpose_into(a3, xs) == (shape[0] == 1)
    monkeypatch.setattr(la, "GEAM_STACK_MIN_ELEMENTS", 0)
    assert la._transpose_into(a3, xs)
    np.testing.assert_array_equal(cp.asnumpy(xs), np.swapaxes(cp.asnumpy(a3), -1, -2))
    wide = cp.asarray(_rand((shape[0], shape[1], 2 * shape[2]), dtype, seed=5))[:, :, ::2]
    assert not la._transpose_into(wide, xs)
    assert not la._transpose_into(cp.asnumpy(a3), cp.asnumpy(xs))
