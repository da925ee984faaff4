"""The special values where the backends' element-wise functions differ from the standard's:
fixes applied to a backend result, as ``fix(module, operands..., result, dtype)``.

``floor_divide`` and ``remainder`` with infinite or zero operands, and the complex
``expm1``, ``log`` / ``log1p``, ``acosh`` and ``tanh`` at infinities, NaNs and signed zeros
(CuPy's complex functions give NaN where the standard names a value).

>>> import numpy as np
>>> fix_remainder(np, np.array([-0.0]), np.array([3.0]), np.array([-0.0]), np.dtype("float64"))
array([0.])
"""

from __future__ import annotations

import numpy as np

from . import _dtypes as _dt

__all__ = ["fix_floor_divide", "fix_remainder", "complex_of", "fix_complex_unary", "expm1_special", "log_special",
           "acosh_special", "tanh_special"]


def fix_floor_divide(m, a, b, res, dt):
    """NumPy/CuPy give NaN (or -1) where one operand is infinite and the other finite;
    the standard wants the sign-correct infinity or zero, i.e. the true quotient."""
    if dt not in _dt.real_floating_dtypes:
        return res
    a, b = m.asarray(a), m.asarray(b)  # CuPy: scalar operands become 0-d device arrays
    one_inf = m.isinf(a) != m.isinf(b)
    mask = one_inf & ~m.isnan(a) & ~m.isnan(b)
    if res.ndim == 0 and not isinstance(res, m.ndarray):
        res = m.asarray(res)
    return m.where(mask, m.true_divide(a, b), res)


def fix_remainder(m, a, b, res, dt):
    """The sign of a zero result is the divisor's; a finite x1 with an infinite x2
    gives x1 (same signs) or x2 (opposite signs). CuPy misses both."""
    if dt not in _dt.real_floating_dtypes:
        return res
    a, b, res = m.asarray(a), m.asarray(b), m.asarray(res)
    res = m.where(res == 0, m.copysign(dt.type(0), b), res)
    fin_inf = m.isfinite(a) & m.isinf(b) & (a != 0)
    return m.where(fin_inf, m.where(m.signbit(a) == m.signbit(b), a, b), res)


def complex_of(m, re, im, dt):
    """Assemble a complex array from real and imaginary parts."""
    out = m.empty(re.shape, dtype=dt)
    out.real[...] = re
    out.imag[...] = im
    return out


def fix_complex_unary(special):
    """Wrap a complex special-case fix applied only to complex inputs."""
    def fix(m, x, res, dt):
        if dt not in _dt.complex_floating_dtypes:
            return res
        res = m.asarray(res)
        re, im = x.real, x.imag
        return special(m, re, im, res, dt)
    return fix


def expm1_special(m, re, im, res, dt):
    rdt = _dt.real_of(dt)
    inf, nan = rdt.type(np.inf), rdt.type(np.nan)
    out_re, out_im = res.real.copy(), res.imag.copy()
    zero = rdt.type(0)
    # +inf + 0j -> +inf + 0j
    c = (m.isinf(re) & (re > 0)) & (im == 0) & ~m.signbit(im)
    out_re = m.where(c, inf, out_re)
    out_im = m.where(c, zero, out_im)
    # -inf + (inf|nan)j -> -1 + 0j
    c = (m.isinf(re) & (re < 0)) & (m.isinf(im) | m.isnan(im))
    out_re = m.where(c, rdt.type(-1), out_re)
    out_im = m.where(c, zero, out_im)
    # +inf + (inf|nan)j -> inf + nan j
    c = (m.isinf(re) & (re > 0)) & (m.isinf(im) | m.isnan(im))
    out_re = m.where(c, inf, out_re)
    out_im = m.where(c, nan, out_im)
    # nan + 0j -> nan + 0j
    c = m.isnan(re) & (im == 0)
    out_re = m.where(c, nan, out_re)
    out_im = m.where(c, im, out_im)
    # (+-0) + 0j -> 0 + 0j (with the sign of the imaginary zero)
    c = (re == 0) & (im == 0)
    out_re = m.where(c, zero, out_re)
    out_im = m.where(c, im, out_im)
    return complex_of(m, out_re, out_im, dt)


def log_special(m, re, im, res, dt):
    """log / log1p: +-inf + NaN j and NaN + +-inf j give +inf + NaN j (CuPy: NaN + NaN j)."""
    rdt = _dt.real_of(dt)
    c = (m.isinf(re) & m.isnan(im)) | (m.isnan(re) & m.isinf(im))
    out_re = m.where(c, rdt.type(np.inf), res.real)
    out_im = m.where(c, rdt.type(np.nan), res.imag)
    return complex_of(m, out_re, out_im, dt)


def acosh_special(m, re, im, res, dt):
    """acosh(+-0 + NaN j) is NaN + pi/2 j (CuPy: NaN + NaN j)."""
    rdt = _dt.real_of(dt)
    c = (re == 0) & m.isnan(im)
    out_re = m.where(c, rdt.type(np.nan), res.real)
    out_im = m.where(c, rdt.type(np.pi / 2), res.imag)
    return complex_of(m, out_re, out_im, dt)


def tanh_special(m, re, im, res, dt):
    rdt = _dt.real_of(dt)
    # +inf + finite y j -> 1 + 0j (conjugate-symmetric: 1 - 0j for y < 0)
    c = (m.isinf(re) & (re > 0)) & m.isfinite(im)
    out_re = m.where(c, rdt.type(1), res.real)
    out_im = m.where(c, m.copysign(rdt.type(0), im), res.imag)
    # +0 + (inf|nan) j -> +0 + NaN j
    c = (re == 0) & ~m.signbit(re) & (m.isinf(im) | m.isnan(im))
    out_re = m.where(c, rdt.type(0), out_re)
    out_im = m.where(c, rdt.type(np.nan), out_im)
    return complex_of(m, out_re, out_im, dt)
