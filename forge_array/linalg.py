"""The ``linalg`` extension of the standard (NumPy / CuPy linalg underneath).

>>> import forge_array as xp
>>> a = xp.asarray([[2.0, 0.0], [0.0, 4.0]], device="cpu")
>>> xp.linalg.det(a)
Array(8., dtype=float64, device=cpu)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import _cusolver_potrf as _potrf
from . import _devices as _dev
from . import _dtypes as _dt
from . import _tall_qr
from ._array import Array
from ._helpers import as_int, check_array, normalize_axes, normalize_axis
from ._linear_algebra import matmul, matrix_transpose, tensordot, vecdot

__all__ = [
    "cholesky", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv",
    "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer",
    "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
    "vector_norm",
]


class EighResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


class EigResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


class QRResult(NamedTuple):
    Q: Array
    R: Array


class SlogdetResult(NamedTuple):
    sign: Array
    logabsdet: Array


class SVDResult(NamedTuple):
    U: Array
    S: Array
    Vh: Array


def _la(x):
    return _dev.compat(x.device).linalg


def _check(name, x, kinds="floating-point", min_ndim=2, square=False):
    check_array(x, f"linalg.{name}")
    if x.dtype not in _dt.categories[kinds]:
        raise TypeError(f"linalg.{name}() requires a {kinds} array, got {x.dtype}")
    if x.ndim < min_ndim:
        raise ValueError(f"linalg.{name}() requires at least {min_ndim} dimensions, got "
                         f"shape {x.shape}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"linalg.{name}() requires square matrices, got shape {x.shape}")


def _w(a, x, dtype=None):
    if dtype is not None and a.dtype != dtype:
        a = a.astype(dtype)
    return Array._new(a, x.device)


def cholesky(x, /, *, upper=False):
    """Cholesky factor of symmetric/Hermitian positive-definite matrices.

    >>> import forge_array as xp
    >>> xp.linalg.cholesky(xp.asarray([[4.0]], device="cpu"))
    Array([[2.]], dtype=float64, device=cpu)
    """
    _check("cholesky", x, square=True)
    with _dev.on(x.device):
        if x.device.is_cuda and x.ndim == 2:
            r = _potrf.cholesky(x._array, upper)   # cuSOLVER's 64-bit API; None: not here
            if r is not None:
                return _w(r, x, x.dtype)
        return _w(_la(x).cholesky(x._array, upper=upper), x, x.dtype)


def cross(x1, x2, /, *, axis=-1):
    """Cross product of 3-element vectors along ``axis``.

    >>> import forge_array as xp
    >>> e = xp.eye(3, device="cpu")
    >>> xp.linalg.cross(e[0], e[1])
    Array([0., 0., 1.], dtype=float64, device=cpu)
    """
    _check("cross", x1, "numeric", 1)
    _check("cross", x2, "numeric", 1)
    dev = _dev.check_same_device(x1.device, x2.device)
    dt = _dt.promote(x1.dtype, x2.dtype)
    from ._manipulation import broadcast_shapes  # noqa: PLC0415

    shape = broadcast_shapes(x1.shape, x2.shape)
    ax = normalize_axis(axis, len(shape), "linalg.cross")
    neg = ax - len(shape)
    if -neg > x1.ndim or -neg > x2.ndim or x1.shape[neg] != 3 or x2.shape[neg] != 3:
        raise ValueError(f"linalg.cross(): axis {axis} must have size 3 in both x1 {x1.shape} "
                         f"and x2 {x2.shape}")
    m = _dev.backend(dev)
    with _dev.on(dev):
        res = m.cross(x1._array.astype(dt, copy=False), x2._array.astype(dt, copy=False),
                      axis=neg)
    return Array._new(res, dev)


def det(x, /):
    """Determinant of (a stack of) square matrices.

    >>> import forge_array as xp
    >>> xp.linalg.det(xp.eye(2, device="cpu"))
    Array(1., dtype=float64, device=cpu)
    """
    _check("det", x, square=True)
    with _dev.on(x.device):
        return _w(_la(x).det(x._array), x, x.dtype)


def diagonal(x, /, *, offset=0):
    """The ``offset`` diagonal of the last two axes.

    >>> import forge_array as xp
    >>> xp.linalg.diagonal(xp.eye(2, device="cpu"))
    Array([1., 1.], dtype=float64, device=cpu)
    """
    _check("diagonal", x, "any")
    offset = as_int(offset, "linalg.diagonal", "offset")
    with _dev.on(x.device):
        return _w(_dev.backend(x.device).diagonal(x._array, offset, -2, -1).copy(), x)


def eigh(x, /):
    """Eigenvalues (ascending) and eigenvectors of symmetric/Hermitian matrices.

    >>> import forge_array as xp
    >>> xp.linalg.eigh(xp.eye(2, device="cpu")).eigenvalues
    Array([1., 1.], dtype=float64, device=cpu)
    """
    _check("eigh", x, square=True)
    with _dev.on(x.device):
        w, v = _la(x).eigh(x._array)
    return EighResult(_w(w, x, _dt.real_of(x.dtype)), _w(v, x, x.dtype))


def eigvalsh(x, /):
    """Eigenvalues (ascending) of symmetric/Hermitian matrices.

    >>> import forge_array as xp
    >>> xp.linalg.eigvalsh(xp.eye(2, device="cpu"))
    Array([1., 1.], dtype=float64, device=cpu)
    """
    _check("eigvalsh", x, square=True)
    with _dev.on(x.device):
        return _w(_la(x).eigvalsh(x._array), x, _dt.real_of(x.dtype))


def _complex(dtype):
    return dtype if dtype in _dt.complex_floating_dtypes else _dt.complex_of(dtype)


def eig(x, /):
    """Eigenvalues and eigenvectors of general square matrices (complex results).

    >>> import forge_array as xp
    >>> xp.linalg.eig(xp.eye(2, device="cpu")).eigenvalues.dtype
    dtype('complex128')
    """
    _check("eig", x, square=True)
    with _dev.on(x.device):
        w, v = _dev.backend(x.device).linalg.eig(x._array)
    c = _complex(x.dtype)
    return EigResult(_w(w, x, c), _w(v, x, c))


def eigvals(x, /):
    """Eigenvalues of general square matrices (complex).

    >>> import forge_array as xp
    >>> xp.linalg.eigvals(xp.eye(2, device="cpu")).shape
    (2,)
    """
    _check("eigvals", x, square=True)
    with _dev.on(x.device):
        w = _dev.backend(x.device).linalg.eigvals(x._array)
    return _w(w, x, _complex(x.dtype))


def inv(x, /):
    """Inverse of (a stack of) square matrices.

    >>> import forge_array as xp
    >>> xp.linalg.inv(xp.asarray([[2.0]], device="cpu"))
    Array([[0.5]], dtype=float64, device=cpu)
    """
    _check("inv", x, square=True)
    with _dev.on(x.device):
        return _w(_la(x).inv(x._array), x, x.dtype)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):  # noqa: A002
    """Matrix norm over the last two axes ('fro', 'nuc', 1, 2, inf and negatives).

    >>> import forge_array as xp
    >>> float(xp.linalg.matrix_norm(xp.eye(2, device="cpu")))  # doctest: +ELLIPSIS
    1.414...
    """
    _check("matrix_norm", x)
    if ord not in ("fro", "nuc", 1, 2, -1, -2, float("inf"), float("-inf")):
        raise ValueError(f"linalg.matrix_norm(): unsupported ord {ord!r}")
    with _dev.on(x.device):
        res = _la(x).matrix_norm(x._array, keepdims=keepdims, ord=ord)
    return _w(res, x, _dt.real_of(x.dtype))


def matrix_power(x, n, /):
    """``x`` raised to the integer power ``n`` (negative n inverts).

    >>> import forge_array as xp
    >>> xp.linalg.matrix_power(xp.eye(2, device="cpu"), 3).shape
    (2, 2)
    """
    _check("matrix_power", x, "numeric", square=True)
    n = as_int(n, "linalg.matrix_power", "n")
    if n < 0 and x.dtype not in _dt.floating_dtypes:
        raise TypeError("linalg.matrix_power(): negative powers need a floating-point array")
    with _dev.on(x.device):
        return _w(_dev.backend(x.device).linalg.matrix_power(x._array, n), x, x.dtype)


def matrix_rank(x, /, *, rtol=None):
    """Numerical rank of (a stack of) matrices.

    >>> import forge_array as xp
    >>> int(xp.linalg.matrix_rank(xp.eye(3, device="cpu")))
    3
    """
    _check("matrix_rank", x)
    if isinstance(rtol, Array):
        rtol = rtol._array
    with _dev.on(x.device):
        res = _la(x).matrix_rank(x._array, rtol=rtol)
    return _w(_dev.backend(x.device).asarray(res), x, _dt.default_int)


def outer(x1, x2, /):
    """Outer product of two 1-D arrays.

    >>> import forge_array as xp
    >>> xp.linalg.outer(xp.ones(2, device="cpu"), xp.ones(3, device="cpu")).shape
    (2, 3)
    """
    _check("outer", x1, "numeric", 1)
    _check("outer", x2, "numeric", 1)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError("linalg.outer() requires 1-D arrays")
    dev = _dev.check_same_device(x1.device, x2.device)
    dt = _dt.promote(x1.dtype, x2.dtype)
    with _dev.on(dev):
        res = _dev.backend(dev).outer(x1._array.astype(dt, copy=False),
                                      x2._array.astype(dt, copy=False))
    return Array._new(res, dev)


def pinv(x, /, *, rtol=None):
    """Moore-Penrose pseudo-inverse.

    >>> import forge_array as xp
    >>> xp.linalg.pinv(xp.ones((2, 3), device="cpu")).shape
    (3, 2)
    """
    _check("pinv", x)
    if isinstance(rtol, Array):
        rtol = rtol._array
    with _dev.on(x.device):
        return _w(_la(x).pinv(x._array, rtol=rtol), x, x.dtype)


def qr(x, /, *, mode="reduced"):
    """QR factorisation (``mode`` 'reduced' or 'complete').

    On a GPU the reduced QR of a tall matrix (a million elements or more, at most 256
    columns, at least four times as many rows) is Cholesky QR done twice, checked: a matrix
    too ill conditioned for it takes cuSOLVER's Householder QR, as every other matrix does.
    ``R``'s diagonal is then positive.

    >>> import forge_array as xp
    >>> xp.linalg.qr(xp.eye(2, device="cpu")).R.shape
    (2, 2)
    """
    _check("qr", x)
    if mode not in ("reduced", "complete"):
        raise ValueError(f"linalg.qr(): mode must be 'reduced' or 'complete', got {mode!r}")
    with _dev.on(x.device):
        a = x._array
        f = None
        if mode == "reduced" and x.device.is_cuda and _tall_qr.applies(a.shape, a.dtype):
            f = _tall_qr.qr(_dev.backend(x.device), a)   # None: too ill conditioned for it
        q, r = f if f is not None else _la(x).qr(a, mode=mode)
    return QRResult(_w(q, x, x.dtype), _w(r, x, x.dtype))


def slogdet(x, /):
    """Sign and log of the absolute determinant.

    >>> import forge_array as xp
    >>> xp.linalg.slogdet(xp.eye(2, device="cpu")).sign
    Array(1., dtype=float64, device=cpu)
    """
    _check("slogdet", x, square=True)
    with _dev.on(x.device):
        s, ld = _la(x).slogdet(x._array)
    return SlogdetResult(_w(s, x, x.dtype), _w(ld, x, _dt.real_of(x.dtype)))


def solve(x1, x2, /):
    """Solve ``x1 @ x = x2`` (x2 a vector when 1-D).

    >>> import forge_array as xp
    >>> xp.linalg.solve(xp.eye(2, device="cpu"), xp.ones(2, device="cpu"))
    Array([1., 1.], dtype=float64, device=cpu)
    """
    _check("solve", x1, square=True)
    _check("solve", x2, min_ndim=1)
    dev = _dev.check_same_device(x1.device, x2.device)
    dt = _dt.promote(x1.dtype, x2.dtype)
    a, b = x1._array.astype(dt, copy=False), x2._array.astype(dt, copy=False)
    m = _dev.backend(dev)
    with _dev.on(dev):
        if b.ndim == 1:
            if b.shape[0] != a.shape[-1]:
                raise ValueError("linalg.solve(): incompatible shapes")
            if a.size == 0:
                return Array._new(m.zeros(a.shape[:-1], dtype=dt), dev)
            # broadcast views have zero strides, which CuPy's batched solve cannot take
            res = m.linalg.solve(a, b[..., None])[..., 0] if a.ndim == 2 else \
                m.linalg.solve(a, m.ascontiguousarray(m.broadcast_to(b, a.shape[:-1]))[..., None])[..., 0]
        else:
            if b.shape[-2] != a.shape[-1]:
                raise ValueError("linalg.solve(): incompatible shapes")
            from ._manipulation import broadcast_shapes  # noqa: PLC0415

            batch = broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
            shape = batch + tuple(b.shape[-2:])
            if math.prod(shape) == 0 or a.shape[-1] == 0:
                # nothing to solve (CuPy's batched solve divides by a zero stride here)
                return Array._new(m.zeros(shape, dtype=dt), dev)
            a = m.ascontiguousarray(m.broadcast_to(a, batch + tuple(a.shape[-2:])))
            b = m.ascontiguousarray(m.broadcast_to(b, shape))
            res = m.linalg.solve(a, b)
    return Array._new(res.astype(dt, copy=False), dev)


def svd(x, /, *, full_matrices=True):
    """Singular value decomposition ``x = U @ diag(S) @ Vh``.

    On a GPU, the reduced SVD of a tall matrix that :func:`qr` factors by Cholesky QR (or of
    the transpose of one) is the SVD of that factorisation's ``R``, ``U`` multiplied by
    ``Q``; otherwise tall and wide matrices (one side at least twice the other), square ones of
    1024 rows or more and stacks of small ones (both sides at most 32) go through
    cuSOLVER's Jacobi SVD (``gesvdj``, ``gesvdjBatched``), any matrix it does not converge
    on through CuPy's ``gesvd``; other matrices (a single one of fewer than 4096 elements
    among them), and the CPU, use CuPy's and NumPy's ``svd``.

    >>> import forge_array as xp
    >>> xp.linalg.svd(xp.eye(2, device="cpu")).S
    Array([1., 1.], dtype=float64, device=cpu)
    """
    _check("svd", x)
    with _dev.on(x.device):
        u, s, vh = _svd(x, full_matrices, True)
    return SVDResult(_w(u, x, x.dtype), _w(s, x, _dt.real_of(x.dtype)), _w(vh, x, x.dtype))


def svdvals(x, /):
    """Singular values, descending (on a GPU computed as :func:`svd` computes them).

    >>> import forge_array as xp
    >>> xp.linalg.svdvals(xp.eye(2, device="cpu"))
    Array([1., 1.], dtype=float64, device=cpu)
    """
    _check("svdvals", x)
    with _dev.on(x.device):
        return _w(_svd(x, False, False), x, _dt.real_of(x.dtype))


#: a single matrix of fewer elements goes to CuPy's ``gesvd``: the Jacobi path's host steps cost more
#: than they save (the (4, 128) float32 matrix of LinearDiscriminantAnalysis's second SVD on
#: an H200: 868 us through gesvdj against 554 through CuPy's gesvd, ``python -m
#: bench.suite_hostops``; ``python -m bench.suite_linalg --only svd`` has the case)
SVD_JACOBI_MIN_ELEMENTS = 4096
#: square-ish matrices (neither side twice the other) with this many rows and columns or more
#: go to the Jacobi SVD when the vectors are wanted (2048 x 2048 float32 on an H100: 228 ms
#: through gesvdj against 349 through gesvd, ``python -m bench.suite_linalg --only svd``);
#: their singular values alone stay on gesvd (184 against 201 ms for torch's gesvdj)
SVD_JACOBI_MIN_SQUARE = 1024


def _svd_driver(shape, cuda, compute_uv=True):
    """Which SVD computes matrices of ``shape``: ``"backend"`` (NumPy's or CuPy's svd),
    ``"empty"`` (no element: nothing to compute), ``"gesvdj"`` (cuSOLVER's Jacobi SVD,
    matrix by matrix: tall or wide matrices, large square ones when ``compute_uv``) or
    ``"gesvdj_batched"`` (its batched form: a stack of matrices of at most 32 rows and
    columns).  A small single matrix (:data:`SVD_JACOBI_MIN_ELEMENTS`) goes to the backend.

    >>> _svd_driver((200000, 128), cuda=True), _svd_driver((200000, 128), cuda=False)
    ('gesvdj', 'backend')
    >>> _svd_driver((2048, 2048), cuda=True), _svd_driver((2048, 2048), cuda=True, compute_uv=False)
    ('gesvdj', 'backend')
    >>> _svd_driver((4, 128), cuda=True), _svd_driver((100, 8, 8), cuda=True)
    ('backend', 'gesvdj_batched')
    """
    if not cuda:
        return "backend"
    if math.prod(shape) == 0:
        return "empty"
    m, n = shape[-2:]
    batch = math.prod(shape[:-2])
    if batch > 1 and max(m, n) <= 32:
        return "gesvdj_batched"
    if batch == 1 and m * n < SVD_JACOBI_MIN_ELEMENTS:
        return "backend"
    if max(m, n) >= 2 * min(m, n):
        return "gesvdj"
    if compute_uv and min(m, n) >= SVD_JACOBI_MIN_SQUARE:
        return "gesvdj"
    return "backend"


def _svd(x, full_matrices, compute_uv):
    """(U, S, Vh) of ``x`` as backend arrays (S alone when not ``compute_uv``)."""
    return _svd_of(x._array, x.device, full_matrices, compute_uv)


def _svd_of(a, device, full_matrices, compute_uv):
    """(U, S, Vh) of the backend array ``a`` on ``device``."""
    m, cuda = _dev.backend(device), device.is_cuda
    if cuda and (not full_matrices or not compute_uv) and a.ndim == 2 \
            and _tall_qr.applies(tuple(sorted(a.shape, reverse=True)), a.dtype):
        # a tall or wide matrix: the SVD of its Cholesky QR's R (None: too ill conditioned),
        # R's by the Jacobi solver (a 128 x 128 float32 matrix on an H200: 2.4 ms through
        # gesvdj against 7.9 through CuPy's gesvd; the "svd (128, 128) f32" case of
        # python -m bench.suite_linalg --only svd times both)
        solve = _gesvdj_solver()
        r = _tall_qr.svd(m, a, compute_uv,
                         (lambda r, uv: _jacobi_svd(m, r, False, uv, solve)) if solve is not None
                         else (lambda r, uv: _svd_of(r, device, False, uv)))
        if r is not None:
            return r
    driver = _svd_driver(tuple(a.shape), cuda, compute_uv)
    if driver == "gesvdj" or driver == "gesvdj_batched":
        solve = _gesvdj_solver()
        if solve is not None:
            return _jacobi_svd(m, a, full_matrices, compute_uv, solve,
                               batched=driver == "gesvdj_batched")
        driver = "backend"
    if driver == "empty":
        return _svd_empty(m, a, full_matrices, compute_uv)
    la = _dev.compat(device).linalg
    return la.svd(a, full_matrices=full_matrices) if compute_uv else la.svdvals(a)


def _svd_empty(m, a, full_matrices, compute_uv):
    """The SVD of matrices with no element (NumPy's shapes: identity factors when full).

    >>> import numpy as np
    >>> u, s, vh = _svd_empty(np, np.zeros((3, 0)), True, True)
    >>> u.shape, s.shape, vh.shape
    ((3, 3), (0,), (0, 0))
    """
    *batch, rows, cols = a.shape
    batch = tuple(batch)
    k = min(rows, cols)
    real = m.empty(0, dtype=a.dtype).real.dtype
    s = m.zeros(batch + (k,), dtype=real)
    if not compute_uv:
        return s
    ku, kv = (rows, cols) if full_matrices else (k, k)
    u = m.zeros(batch + (rows, ku), dtype=a.dtype)
    vh = m.zeros(batch + (kv, cols), dtype=a.dtype)
    if full_matrices:
        u[...] = m.eye(rows, dtype=a.dtype)
        vh[...] = m.eye(cols, dtype=a.dtype)
    return u, s, vh


def _ct(m, a):
    """Conjugate transpose of the last two axes (a view for real arrays)."""
    t = a.swapaxes(-1, -2)
    return m.conj(t) if a.dtype.kind == "c" else t


def _jacobi_svd(m, a, full_matrices, compute_uv, solve, batched=False):
    """SVD of ``a`` (..., rows, cols), no element missing, by a Jacobi solver.

    The solver works on tall matrices: a wide ``a`` is replaced by its conjugate transpose
    (``A^H = U' S V'^H`` gives ``A = V' S U'^H``). Each matrix is copied, column-major, into
    a buffer the solver overwrites; ``solve(xs, rows, cols, full, compute_uv, batched)``
    (``xs``: (B, cols, rows) C-ordered, so that ``xs[i]`` is matrix ``i`` column-major)
    returns ``(u, s, v, info)`` with ``u`` (B, rows, ku), ``v`` (B, cols, cols), ``s``
    (B, cols) and ``info`` the solver's status per matrix on the host: 0 when it
    converged. Matrices it did not converge on are computed again by ``m.linalg.svd``
    (CuPy's gesvd). ``m`` is the array module (CuPy; NumPy in tests, with an emulated
    solver).
    """
    *batch, rows, cols = a.shape
    batch = tuple(batch)
    nb = math.prod(batch)
    a3 = a.reshape((nb, rows, cols))
    wide = rows < cols
    if wide:
        rows, cols = cols, rows
    xs = m.empty((nb, cols, rows), dtype=a.dtype)   # xs[i] = matrix i column-major
    if wide:
        xs[...] = m.conj(a3) if a.dtype.kind == "c" else a3
    elif not _transpose_into(a3, xs):
        xs[...] = a3.swapaxes(-1, -2)
    full = full_matrices and compute_uv
    u, s, v, info = solve(xs, rows, cols, full, compute_uv, batched)
    if compute_uv:
        u = u[..., : rows if full else cols]
    for i in np.flatnonzero(np.asarray(info)).tolist():
        ai = _ct(m, a3[i]) if wide else a3[i]
        if compute_uv:
            ui, si, vhi = m.linalg.svd(ai, full_matrices=full)
            u[i] = ui
            v[i] = _ct(m, vhi)
            s[i] = si
        else:
            s[i] = m.linalg.svd(ai, compute_uv=False)
    s = s.reshape(batch + (cols,))
    if not compute_uv:
        return s
    if wide:      # A = V' S U'^H
        uu, vh = v, _ct(m, u)
    else:
        uu, vh = u, _ct(m, v)
    return (uu.reshape(batch + uu.shape[-2:]), s, vh.reshape(batch + vh.shape[-2:]))


#: a stack of matrices is transposed matrix by matrix through ``geam`` only when each has this
#: many elements; smaller ones in one element-wise copy (a launch per matrix costs more than
#: the strided reads it saves: a stack of 4096 16 x 16 float32 matrices 32 ms through 4096
#: ``geam`` calls against 2.6 ms for the whole SVD in CuPy on an H200,
#: ``python -m bench.suite_linalg --only svd``, case "svd stack 16x16 f32")
GEAM_STACK_MIN_ELEMENTS = 1 << 20


def _transpose_into(a3, xs) -> bool:
    """``xs[i] = a3[i].T`` for every matrix of the C-ordered CuPy stack ``a3`` through cuBLAS
    ``<t>geam`` (a tiled transpose at about the copy rate, where an element-wise copy of the
    transposed view reads across rows: 116 against 311 us for a (200000, 128) float32 matrix
    on an H100, a contiguous copy of the same bytes 80 us, CUDA-event medians); False where it
    does not apply (NumPy, other dtypes, matrices not C-contiguous, sides over cuBLAS's int32,
    a stack of matrices under :data:`GEAM_STACK_MIN_ELEMENTS` each)."""
    t = {"f": "s", "d": "d", "F": "c", "D": "z"}.get(a3.dtype.char)
    if t is None or isinstance(a3, np.ndarray) or xs.dtype != a3.dtype:
        return False
    nb, rows, cols = a3.shape
    isz = a3.dtype.itemsize
    if nb > 1 and rows * cols < GEAM_STACK_MIN_ELEMENTS:
        return False
    if (rows > 1 and a3.strides[1] != cols * isz) or (cols > 1 and a3.strides[2] != isz) \
            or max(rows, cols) >= 2**31 or not xs.flags.c_contiguous:
        return False
    try:
        from cupy.cuda import device as cdev  # noqa: PLC0415
        from cupy_backends.cuda.libs import cublas  # noqa: PLC0415
    except ImportError:
        return False
    geam = getattr(cublas, f"{t}geam", None)
    if geam is None:
        return False
    handle = cdev.get_cublas_handle()
    one, zero = np.ones((), dtype=a3.dtype), np.zeros((), dtype=a3.dtype)
    mode = cublas.getPointerMode(handle)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    try:
        for i in range(nb):
            src = a3.data.ptr + i * a3.strides[0]
            dst = xs.data.ptr + i * rows * cols * isz
            # column-major: the source is the (cols, rows) matrix A^T with leading dimension
            # cols, the destination (rows, cols) with leading dimension rows; beta = 0, so B
            # (the destination, in place as cuBLAS allows) is not read
            geam(handle, cublas.CUBLAS_OP_T, cublas.CUBLAS_OP_N, rows, cols, one.ctypes.data,
                 src, cols, zero.ctypes.data, dst, rows, dst, rows)
    finally:
        cublas.setPointerMode(handle, mode)
    return True


_GESVDJ: list = []


def _gesvdj_solver():
    """The cuSOLVER Jacobi solver for :func:`_jacobi_svd`, or None where CuPy lacks it
    (ROCm, or bindings without gesvdj)."""
    if not _GESVDJ:
        fn = None
        try:
            import cupy  # noqa: PLC0415
            from cupy_backends.cuda.libs import cusolver  # noqa: PLC0415

            if not cupy.cuda.runtime.is_hip and all(
                    hasattr(cusolver, f"{c}gesvdj{b}")
                    for c in "sdcz" for b in ("", "_bufferSize", "Batched",
                                              "Batched_bufferSize")):
                fn = _gesvdj_cusolver
        except Exception:  # noqa: BLE001  (no CuPy, or no usable cuSOLVER)
            fn = None
        _GESVDJ.append(fn)
    return _GESVDJ[0]


def _gesvdj_cusolver(xs, rows, cols, full, compute_uv, batched):
    """cuSOLVER ``<t>gesvdj`` on each matrix of ``xs`` (``gesvdjBatched`` on all at once
    when ``batched``: both sides at most 32), on the current stream; see
    :func:`_jacobi_svd`. One device-to-host copy (the status of each matrix)."""
    import cupy as cp  # noqa: PLC0415
    from cupy.cuda import device as cdev  # noqa: PLC0415
    from cupy_backends.cuda.libs import cusolver as cs  # noqa: PLC0415

    nb = xs.shape[0]
    t = {"f": "s", "d": "d", "F": "c", "D": "z"}[xs.dtype.char]
    real = cp.dtype(xs.dtype.char.lower())
    size = xs.dtype.itemsize
    handle = cdev.get_cusolver_handle()
    jobz = cs.CUSOLVER_EIG_MODE_VECTOR if compute_uv else cs.CUSOLVER_EIG_MODE_NOVECTOR
    s = cp.empty((nb, cols), dtype=real)
    info = cp.zeros(nb, dtype=cp.int32)
    params = cs.createGesvdjInfo()
    try:
        if batched:
            # gesvdjBatched gives the full U and V of every matrix, sorted descending
            cs.xgesvdjSetSortEig(params, 1)
            us = cp.empty((nb, rows, rows), dtype=xs.dtype)
            vs = cp.empty((nb, cols, cols), dtype=xs.dtype)
            args = (handle, jobz, rows, cols, xs.data.ptr, rows, s.data.ptr, us.data.ptr,
                    rows, vs.data.ptr, cols)
            lwork = getattr(cs, f"{t}gesvdjBatched_bufferSize")(*args, params, nb)
            work = cp.empty(max(lwork, 1), dtype=xs.dtype)
            getattr(cs, f"{t}gesvdjBatched")(*args, work.data.ptr, lwork, info.data.ptr,
                                             params, nb)
        else:
            econ = 0 if full else 1
            ku = rows if full else cols
            # without vectors the solver still takes U and V buffers: one, shared
            nu = nb if compute_uv else 1
            us = cp.empty((nu, ku, rows), dtype=xs.dtype)
            vs = cp.empty((nu, cols, cols), dtype=xs.dtype)
            lwork = getattr(cs, f"{t}gesvdj_bufferSize")(
                handle, jobz, econ, rows, cols, xs.data.ptr, rows, s.data.ptr, us.data.ptr,
                rows, vs.data.ptr, cols, params)
            work = cp.empty(max(lwork, 1), dtype=xs.dtype)
            solver = getattr(cs, f"{t}gesvdj")
            step_u = ku * rows * size if compute_uv else 0
            step_v = cols * cols * size if compute_uv else 0
            for i in range(nb):
                solver(handle, jobz, econ, rows, cols, xs.data.ptr + i * rows * cols * size,
                       rows, s.data.ptr + i * cols * real.itemsize, us.data.ptr + i * step_u,
                       rows, vs.data.ptr + i * step_v, cols, work.data.ptr, lwork,
                       info.data.ptr + i * 4, params)
    finally:
        cs.destroyGesvdjInfo(params)
    status = info.get()
    if (status < 0).any():
        raise RuntimeError(f"cuSOLVER gesvdj rejected argument {-int(status.min())}")
    # u[i] = U of matrix i column-major: the (ku, rows) C-ordered buffer, transposed
    return us.swapaxes(-1, -2), s, vs.swapaxes(-1, -2), status


def trace(x, /, *, offset=0, dtype=None):
    """Sum along the ``offset`` diagonal of the last two axes.

    >>> import forge_array as xp
    >>> xp.linalg.trace(xp.eye(3, device="cpu"))
    Array(3., dtype=float64, device=cpu)
    """
    _check("trace", x, "numeric")
    offset = as_int(offset, "linalg.trace", "offset")
    from ._statistical import accumulation_dtype  # noqa: PLC0415

    dt = accumulation_dtype(x.dtype, dtype, "linalg.trace")
    with _dev.on(x.device):
        res = _dev.backend(x.device).trace(x._array, offset=offset, axis1=-2, axis2=-1,
                                           dtype=dt)
    return _w(_dev.backend(x.device).asarray(res), x, dt)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002
    """Vector p-norm over ``axis`` (all axes by default).

    >>> import forge_array as xp
    >>> xp.linalg.vector_norm(xp.asarray([3.0, 4.0], device="cpu"))
    Array(5., dtype=float64, device=cpu)
    """
    _check("vector_norm", x, min_ndim=0)
    axes = normalize_axes(axis, x.ndim, "linalg.vector_norm")
    with _dev.on(x.device):
        res = _la(x).vector_norm(x._array, axis=axes if axis is not None else None,
                                 keepdims=keepdims, ord=ord)
    return _w(_dev.backend(x.device).asarray(res), x, _dt.real_of(x.dtype))
