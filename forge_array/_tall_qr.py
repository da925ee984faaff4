"""QR and SVD of tall matrices by Cholesky QR, twice (CholeskyQR2).

cuSOLVER's Householder QR (``<t>geqrf``, which CuPy's and PyTorch's ``qr`` call) factors a
matrix of few columns one column at a time, each a pass over the matrix: a (200000, 26)
float32 matrix takes 4.2 ms on an H200, where reading it once takes 5 us. Cholesky QR works
from the Gram matrix instead: ``G = A^H A`` (one product over ``A``), its Cholesky factor
``R`` (``G = R^H R``, an n x n matrix), then ``Q = A R^-1`` (a second product). Done twice
(the second time on the first ``Q``), ``Q`` is orthonormal to working precision and ``A = Q
R`` with ``R = R2 R1`` (Yamamoto, Nakatsukasa, Yanagisawa, Fukaya 2015), as long as ``A`` is
not too ill conditioned (a condition number below about ``u^-1/2``: 4e3 in float32, 7e7 in
float64; the second Gram matrix is formed in double precision). That is checked, not
assumed: the first Gram matrix must have a Cholesky factor and the second must be within
:data:`ORTHOGONALITY_LIMIT` of the identity (then the first ``Q`` had a condition number
below sqrt(3) and the second pass brings it to working precision); otherwise :func:`qr`
returns None and the caller takes Householder QR. The n x n factors are computed in double
precision, on the matrix's device; R's diagonal is positive.

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

__all__ = ["applies", "qr", "svd", "MAX_COLUMNS", "MIN_ELEMENTS", "MIN_ASPECT", "ORTHOGONALITY_LIMIT"]

#: the most columns (of the tall side) factored this way (squarer and wider matrices are
#: factored better by Householder QR's blocked steps)
MAX_COLUMNS = 256
#: the fewest elements: a smaller matrix's Householder QR takes less than this route's dozen
#: steps and one wait (a (20000, 26) float32 matrix on an H200: 0.53 ms against 0.47 for
#: cuSOLVER's geqrf; (200000, 26): 0.60 against 4.50; ``python -m bench.suite_linalg --only qr``
#: times both sizes)
MIN_ELEMENTS = 1 << 20
#: the least ratio of rows to columns (:data:`MIN_ELEMENTS` with :data:`MAX_COLUMNS` asks for
#: more; this one keeps the square ``R`` of a factored matrix off the route)
MIN_ASPECT = 4
#: the largest ``||Q1^H Q1 - I||_F`` after the first pass for which the second gives an
#: orthonormal Q (``python -m bench.suite_linalg --only qr`` checks the result's orthogonality)
ORTHOGONALITY_LIMIT = 0.5

_DTYPES = frozenset("fdFD")


def applies(shape, dtype) -> bool:
    """Whether a matrix of ``shape`` and ``dtype`` is factored by Cholesky QR: one matrix
    (2-D), a floating dtype, at most :data:`MAX_COLUMNS` columns, at least
    :data:`MIN_ASPECT` times as many rows and at least :data:`MIN_ELEMENTS` elements.

    >>> applies((200000, 26), np.dtype("float32")), applies((4000, 400), np.dtype("float32"))
    (True, False)
    """
    if len(shape) != 2 or np.dtype(dtype).char not in _DTYPES:
        return False
    m, n = shape
    return 1 <= n <= MAX_COLUMNS and m >= MIN_ASPECT * n and m * n >= MIN_ELEMENTS


def _ct(a):
    return a.conj().T if a.dtype.kind == "c" else a.T


def _high(dt):
    """The double-precision dtype of the floating ``dt``."""
    return np.dtype({"f": "d", "F": "D"}.get(dt.char, dt.char))


def _cholesky_upper(m, g):
    """``R`` with ``g = R^H R`` (upper triangular) of module ``m``; NaNs where ``g`` is not
    numerically positive definite (CuPy's factor gives them, NumPy's raises)."""
    try:
        low = m.linalg.cholesky(g)
    except np.linalg.LinAlgError:
        return m.full(g.shape, np.nan, dtype=g.dtype)
    return _ct(low)


def _triangular_inverse(m, r):
    """``R^-1`` of the upper triangular ``r`` of module ``m`` (cuBLAS ``trsm`` on a GPU, through
    CuPy's ``cupyx.scipy.linalg``; None where that cannot be imported)."""
    eye = m.eye(r.shape[0], dtype=r.dtype)
    if m is np:
        try:
            return np.triu(np.linalg.solve(r, eye))
        except np.linalg.LinAlgError:
            return np.full(r.shape, np.nan, dtype=r.dtype)
    try:
        from cupyx.scipy.linalg import solve_triangular  # noqa: PLC0415
    except ImportError:
        return None
    return solve_triangular(r, eye, lower=False)


def _pass(m, a, g):
    """One Cholesky QR step: (Q, R) from ``a`` and its double-precision Gram matrix ``g``, or
    None where the triangular inverse is not at hand."""
    r = _cholesky_upper(m, g)
    rinv = _triangular_inverse(m, r)
    return None if rinv is None else (a @ rinv.astype(a.dtype), r)


def qr(m, a):
    """The reduced QR factorisation ``(Q, R)`` of the tall matrix ``a`` (an array of module
    ``m``, NumPy or CuPy, for which :func:`applies`), or None where Cholesky QR cannot give
    it (the caller takes Householder QR). Everything runs on ``a``'s device but for one
    check of the second Gram matrix on the host.

    >>> import numpy as np
    >>> qr(np, np.ones((8, 2))) is None   # rank 1: no Cholesky factor
    True
    """
    with np.errstate(all="ignore"):   # NumPy's warnings on a Gram matrix that overflows
        return _qr(m, a)


def _qr(m, a):
    hi = _high(a.dtype)
    first = _pass(m, a, (_ct(a) @ a).astype(hi))
    if first is None:
        return None
    q1, r1 = first
    # the second Gram matrix in double precision: Q's orthogonality rests on it (a (200000,
    # 26) float32 Q: 1.1e-7 from |Q^T Q - I| against 6.2e-7 with a single-precision Gram)
    w = q1.astype(hi)
    g2 = _ct(w) @ w
    host = g2.get() if hasattr(g2, "get") else g2
    n = host.shape[0]
    if not np.isfinite(host).all() or np.linalg.norm(host - np.eye(n)) > ORTHOGONALITY_LIMIT:
        return None     # the first pass failed (NaNs) or left Q too far from orthonormal
    q, r2 = _pass(m, q1, g2)
    return q, m.triu(r2 @ r1).astype(a.dtype)


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
