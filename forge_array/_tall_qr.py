"""QR and SVD of tall matrices by Cholesky QR, twice (CholeskyQR2).

cuSOLVER's Householder QR (``<t>geqrf``, which CuPy's and PyTorch's ``qr`` call) factors a
matrix of few columns one column at a time, each a pass over the matrix: a (200000, 26)
float32 matrix takes 4.2 ms on an H200, where reading it once takes 5 us. Cholesky QR works
from the Gram matrix instead: ``G = A^H A`` (one product over ``A``), its Cholesky factor
``R`` (``G = R^H R``, an n x n matrix), then ``Q = A R^-1`` (a second product). Done twice
(the second time on the first ``Q``), ``Q`` is orthonormal to working precision and ``A = Q
R`` with ``R = R2 R1`` (Yamamoto, Nakatsukasa, Yanagisawa, Fukaya 2015), as long as ``A`` is
not too ill conditioned (a condition number below about ``u^-1/2``: 4e3 in float32, 7e7 in
float64); the second Gram matrix is formed in double precision. Whether it was is checked,
not assumed: the first Gram matrix must have a Cholesky factor and the second must be within
:data:`ORTHOGONALITY_LIMIT` of the identity (then the first ``Q`` had a condition number
below sqrt(3) and the second pass brings it to working precision); otherwise :func:`qr`
returns None and the caller takes Householder QR. The n x n factors are computed on the host
in double precision (two device-to-host copies of n x n, hence :data:`MAX_COLUMNS`); R's
diagonal is positive.

An SVD of a tall matrix is the SVD of its ``R`` (``R = U_r S V^H``, ``U = Q U_r``), as
LAPACK computes the SVD of a matrix with many more rows than columns; a wide matrix is
the conjugate transpose of a tall one.

>>> import numpy as np
>>> a = np.random.default_rng(0).standard_normal((400, 5))
>>> q, r = qr(np, a)
>>> bool(np.allclose(q @ r, a)), bool(np.allclose(q.T @ q, np.eye(5)))
(True, True)
"""

from __future__ import annotations

import numpy as np

__all__ = ["applies", "qr", "svd", "MAX_COLUMNS", "MIN_ASPECT", "ORTHOGONALITY_LIMIT"]

#: the most columns (of the tall side) factored this way: the n x n Cholesky factor and its
#: inverse are computed on the host
MAX_COLUMNS = 256
#: the least ratio of rows to columns: squarer matrices take Householder QR
MIN_ASPECT = 4
#: the largest ``||Q1^H Q1 - I||_F`` after the first pass for which the second gives an
#: orthonormal Q (``python -m bench.suite_linalg --only qr`` checks the result's orthogonality)
ORTHOGONALITY_LIMIT = 0.5

_DTYPES = frozenset("fdFD")


def applies(shape, dtype) -> bool:
    """Whether a matrix of ``shape`` and ``dtype`` is factored by Cholesky QR: one matrix
    (2-D), a floating dtype, at least :data:`MIN_ASPECT` times as many rows as columns and
    at most :data:`MAX_COLUMNS` columns.

    >>> applies((200000, 26), np.dtype("float32")), applies((100, 50), np.dtype("float32"))
    (True, False)
    """
    if len(shape) != 2 or np.dtype(dtype).char not in _DTYPES:
        return False
    m, n = shape
    return 1 <= n <= MAX_COLUMNS and m >= MIN_ASPECT * n


def _host(x):
    get = getattr(x, "get", None)
    return get() if get is not None else np.array(x)


def _ct(a):
    return a.conj().T if a.dtype.kind == "c" else a.T


def _factor(g):
    """(R, R^-1) of the host Gram matrix ``g`` in double precision (``g = R^H R``, R upper
    triangular), or None when ``g`` is not numerically positive definite."""
    g = g.astype(np.complex128 if g.dtype.kind == "c" else np.float64)
    if not np.isfinite(g).all():
        return None
    try:
        low = np.linalg.cholesky(g)
    except np.linalg.LinAlgError:
        return None
    r = low.conj().T
    d = np.abs(np.diagonal(r))
    if not (d > 0).all() or d.min() < d.max() * np.finfo(np.float64).eps * r.shape[0]:
        return None
    rinv = np.triu(np.linalg.inv(r))
    if not np.isfinite(rinv).all():
        return None
    return r, rinv


def qr(m, a):
    """The reduced QR factorisation ``(Q, R)`` of the tall matrix ``a`` (an array of module
    ``m``, NumPy or CuPy, for which :func:`applies`), or None where Cholesky QR cannot give
    it (the caller takes Householder QR).

    >>> import numpy as np
    >>> qr(np, np.ones((8, 2))) is None   # rank 1: no Cholesky factor
    True
    """
    with np.errstate(all="ignore"):   # NumPy's warnings on a Gram matrix that overflows
        return _qr(m, a)


def _qr(m, a):
    dt = a.dtype
    f1 = _factor(_host(_ct(a) @ a))
    if f1 is None:
        return None
    r1, rinv1 = f1
    q1 = a @ m.asarray(rinv1.astype(dt))
    # the second Gram matrix in double precision: Q's orthogonality rests on it (a (200000,
    # 26) float32 Q: 1.1e-7 from |Q^T Q - I| against 6.2e-7 with a single-precision Gram)
    w = q1 if dt.char in "dD" else q1.astype({"f": "d", "F": "D"}[dt.char])
    g2 = _host(_ct(w) @ w)
    n = g2.shape[0]
    if not np.isfinite(g2).all() or np.linalg.norm(g2 - np.eye(n)) > ORTHOGONALITY_LIMIT:
        return None
    f2 = _factor(g2)
    if f2 is None:
        return None
    r2, rinv2 = f2
    q = q1 @ m.asarray(rinv2.astype(dt))
    r = m.asarray(np.triu(r2 @ r1).astype(dt))
    return q, r


def svd(m, a, compute_uv, small_svd):
    """``(U, S, Vh)`` (reduced; ``S`` alone unless ``compute_uv``) of the matrix ``a`` of
    module ``m`` whose taller side :func:`applies` (``a`` or its conjugate transpose): the
    SVD ``small_svd(r, compute_uv)`` of its Cholesky QR's ``R``, ``U`` multiplied by ``Q``.
    None where :func:`qr` is.

    >>> import numpy as np
    >>> a = np.random.default_rng(1).standard_normal((3, 40))
    >>> s = svd(np, a, False, lambda r, uv: np.linalg.svd(r, compute_uv=uv))
    >>> bool(np.allclose(s, np.linalg.svd(a, compute_uv=False)))
    True
    """
    wide = a.shape[0] < a.shape[1]
    f = qr(m, _ct(a) if wide else a)
    if f is None:
        return None
    q, r = f
    if not compute_uv:
        return small_svd(r, False)
    ur, s, vh = small_svd(r, True)
    u = q @ ur
    if wide:   # a^H = Q R = (Q U_r) S V^H, so a = V S (Q U_r)^H
        return _ct(vh), s, _ct(u)
    return u, s, vh
