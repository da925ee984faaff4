"""Cholesky QR of tall matrices (``forge_array._tall_qr``) against NumPy: the factors, the
conditions it declines (ill conditioned, rank deficient, not finite), the SVD built on it and,
on a GPU, ``linalg.qr`` / ``linalg.svd`` taking it."""

import types

import numpy as np
import pytest

import forge_array as xp
from forge_array import _devices
from forge_array import _tall_qr as tq
from forge_array import linalg as la

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def _rand(shape, dtype, seed=0, cond=None):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    if cond is not None:   # singular values spread from 1 to 1/cond
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        a = (u * np.geomspace(1.0, 1.0 / cond, min(shape))) @ vh
    return a.astype(dtype)


def _eps(dtype):
    return float(np.finfo(np.dtype(dtype)).eps)


def _check_qr(a, q, r):
    m, n = a.shape
    assert q.shape == (m, n) and r.shape == (n, n)
    assert q.dtype == a.dtype and r.dtype == a.dtype
    hi = np.complex128 if a.dtype.kind == "c" else np.float64
    q64, r64, a64 = (v.astype(hi) for v in (q, r, a))
    eps = _eps(a.dtype)
    np.testing.assert_array_equal(np.tril(r, -1), 0)
    d = np.diagonal(r)
    assert np.all(d.real > 0) and np.all(np.abs(d.imag) == 0)
    np.testing.assert_allclose(q64.conj().T @ q64, np.eye(n), atol=50 * eps)
    scale = np.abs(a64).max()
    np.testing.assert_allclose(q64 @ r64, a64, atol=50 * eps * scale)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 1), (31, 7), (32, 8), (33, 8),
                                   (1000, 26), (4096, 64)])
def test_qr_matches_the_definition(dtype, shape):
    a = _rand(shape, dtype, seed=shape[0])
    q, r = tq.qr(np, a)
    _check_qr(a, q, r)
    # R is the Householder R up to the signs of its rows
    ref = np.linalg.qr(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64))[1]
    np.testing.assert_allclose(np.abs(r), np.abs(ref), atol=100 * _eps(dtype) * np.abs(ref).max())


def test_qr_of_a_strided_view():
    base = _rand((600, 40), np.float64, seed=3)
    a = base[::3, ::2]
    q, r = tq.qr(np, a)
    _check_qr(np.ascontiguousarray(a), q, r)


@pytest.mark.parametrize("dtype,cond,ok", [(np.float64, 1e6, True), (np.float32, 1e2, True),
                                           (np.float32, 1e6, False), (np.float64, 1e12, False)])
def test_qr_declines_what_it_cannot_factor(dtype, cond, ok):
    a = _rand((2000, 12), dtype, seed=7, cond=cond)
    f = tq.qr(np, a)
    assert (f is not None) == ok
    if ok:
        _check_qr(a, *f)


@pytest.mark.parametrize("make", [
    lambda a: a * 0,                                                # zero matrix
    lambda a: np.concatenate([a[:, :3], a[:, :1]], axis=1),        # repeated column
    lambda a: np.where(np.arange(a.shape[0])[:, None] == 5, np.nan, a),
    lambda a: np.where(np.arange(a.shape[0])[:, None] == 5, np.inf, a),
    lambda a: a * np.float32(3e30),                                 # Gram matrix overflows
])
def test_qr_declines_singular_and_special_values(make):
    a = make(_rand((400, 6), np.float32, seed=2)).astype(np.float32)
    assert tq.qr(np, a) is None


def test_qr_declines_without_a_triangular_inverse(monkeypatch):
    """Where CuPy's triangular solve cannot be imported the route gives way to Householder."""
    monkeypatch.setattr(tq, "_triangular_inverse", lambda m, r: None)
    assert tq.qr(np, _rand((100, 4), np.float64)) is None


def test_applies(monkeypatch):
    f32 = np.dtype(np.float32)
    assert tq.applies((200000, 26), f32) and tq.applies((26, 200000)[::-1], f32)
    assert tq.applies((2**20, 1), f32) and not tq.applies((2**20 - 1, 1), f32)   # MIN_ELEMENTS
    assert tq.applies((2**12, tq.MAX_COLUMNS), f32)
    monkeypatch.setattr(tq, "MIN_ELEMENTS", 0)
    assert tq.applies((4, 1), f32) and not tq.applies((3, 1), f32)      # MIN_ASPECT
    assert not tq.applies((12, 12), f32)
    assert not tq.applies((10**6, tq.MAX_COLUMNS + 1), f32)
    assert not tq.applies((10**7, 0), f32) and not tq.applies((0, 0), f32)
    assert not tq.applies((3, 400000, 20), f32)
    assert not tq.applies((400000, 20), np.dtype(np.int64))
    assert not tq.applies((400000, 20), np.dtype(np.float16))
    assert tq.applies((400000, 20), np.dtype(np.complex64))


def _small_svd(r, uv):
    return np.linalg.svd(r, full_matrices=False) if uv else np.linalg.svd(r, compute_uv=False)


def _check_svd(a, s_alone, u, s, vh, rel, orth):
    """The reduced SVD (u, s, vh) and the values ``s_alone`` of ``a`` against NumPy's in
    double precision: values within ``rel`` of the largest, U and Vh orthonormal within
    ``orth``, their product ``a``."""
    hi = np.complex128 if a.dtype.kind == "c" else np.float64
    ref = np.linalg.svd(a.astype(hi), compute_uv=False)
    k = min(a.shape)
    assert u.shape == (a.shape[0], k) and vh.shape == (k, a.shape[1]) and s.shape == (k,)
    assert u.dtype == a.dtype and vh.dtype == a.dtype
    np.testing.assert_allclose(s_alone, ref, atol=rel * ref[0])
    np.testing.assert_allclose(s, ref, atol=rel * ref[0])
    np.testing.assert_allclose((u.astype(hi) * s) @ vh.astype(hi), a, atol=10 * rel * ref[0])
    np.testing.assert_allclose(u.conj().T.astype(hi) @ u, np.eye(k), atol=orth)
    np.testing.assert_allclose(vh.astype(hi) @ vh.conj().T, np.eye(k), atol=orth)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(500, 20), (20, 500), (33, 8), (8, 33)])
def test_svd_through_qr(dtype, shape):
    a = _rand(shape, dtype, seed=11)
    _check_svd(a, tq.svd(np, a, False, _small_svd), *tq.svd(np, a, True, _small_svd),
               rel=50 * _eps(dtype), orth=100 * _eps(dtype))


def test_svd_through_qr_declines_rank_deficient():
    a = _rand((300, 4), np.float64, seed=1) @ _rand((4, 20), np.float64, seed=2)
    assert tq.svd(np, a, True, _small_svd) is None


def test_linalg_svd_routes_tall_matrices_through_qr(monkeypatch):
    """On a GPU device a tall or wide matrix's reduced SVD (and its singular values) take the
    QR route, a rank-deficient one the solvers after it; full matrices never do (NumPy
    stands in for CuPy)."""
    import array_api_compat.numpy as compat_np

    gpu = types.SimpleNamespace(is_cuda=True)
    monkeypatch.setattr(tq, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(la._dev, "backend", lambda d: np)
    monkeypatch.setattr(la._dev, "compat", lambda d: compat_np)
    monkeypatch.setattr(la, "_GESVDJ", [None])
    calls = _counting(monkeypatch, "svd")
    a = _rand((400, 12), np.float64, seed=4)
    ref = np.linalg.svd(a, compute_uv=False)
    u, s, vh = la._svd_of(a, gpu, False, True)
    np.testing.assert_allclose(s, ref, rtol=1e-12)
    np.testing.assert_allclose((u * s) @ vh, a, atol=1e-12)
    np.testing.assert_allclose(la._svd_of(a.T, gpu, True, False), ref, rtol=1e-12)
    assert calls == [True, True]
    u, s, vh = la._svd_of(a, gpu, True, True)          # full U: the solvers
    assert u.shape == (400, 400) and calls == [True, True]
    low = a[:, :3] @ _rand((3, 12), np.float64, seed=5)
    s = la._svd_of(low, gpu, False, False)
    np.testing.assert_allclose(s, np.linalg.svd(low, compute_uv=False), atol=1e-10)
    assert calls == [True, True, False]


gpu = pytest.mark.skipif(_devices.cuda_device_count() == 0, reason="needs CuPy and a GPU")


def _counting(monkeypatch, name):
    calls = []
    real = getattr(tq, name)

    def counting(*args):
        r = real(*args)
        calls.append(r is not None)
        return r

    monkeypatch.setattr(tq, name, counting)
    return calls


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(60000, 26), (8192, 128), (33, 8)])
def test_gpu_qr_takes_cholesky_qr(monkeypatch, dtype, shape):
    calls = _counting(monkeypatch, "qr")
    a = _rand(shape, dtype, seed=9)
    q, r = xp.linalg.qr(xp.asarray(a, device="cuda:0"))
    q, r = (np.asarray(xp.asarray(v, device="cpu")) for v in (q, r))
    assert calls == ([True] if tq.applies(shape, a.dtype) else [])
    if calls:
        _check_qr(a, q, r)
    else:   # Householder: R's diagonal of either sign
        np.testing.assert_allclose(q @ r, a, atol=1e-4 * np.abs(a).max())


@gpu
def test_gpu_qr_falls_back_to_householder(monkeypatch):
    calls = _counting(monkeypatch, "qr")
    a = _rand((200000, 8), np.float32, seed=1)
    a[:, 3] = a[:, 2]
    q, r = xp.linalg.qr(xp.asarray(a, device="cuda:0"))
    assert calls == [False]
    q, r = (np.asarray(xp.asarray(v, device="cpu")).astype(np.float64) for v in (q, r))
    np.testing.assert_allclose(q @ r, a, atol=1e-4 * np.abs(a).max())
    np.testing.assert_allclose(q.T @ q, np.eye(8), atol=1e-4)
    assert abs(r[3, 3]) < 1e-3 * abs(r[0, 0])


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(70000, 16), (16, 70000), (8192, 128)])
def test_gpu_svd_takes_cholesky_qr(monkeypatch, dtype, shape):
    calls = _counting(monkeypatch, "svd")
    a = _rand(shape, dtype, seed=12)
    x = xp.asarray(a, device="cuda:0")
    u, s, vh = (np.asarray(xp.asarray(v, device="cpu")) for v in xp.linalg.svd(x, full_matrices=False))
    sv = np.asarray(xp.asarray(xp.linalg.svdvals(x), device="cpu"))
    assert calls == [True, True]
    rel = 2e-4 if _eps(dtype) > 1e-10 else 1e-10   # as tests/test_linalg_svd.py's Jacobi SVDs
    _check_svd(a, sv, u, s, vh, rel=rel, orth=10 * rel)
