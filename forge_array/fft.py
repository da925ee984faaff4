"""The ``fft`` extension of the standard (NumPy / CuPy FFTs underneath).

Transforms keep the precision of the input (complex64 in, complex64 out).

>>> import forge_array as xp
>>> xp.fft.fft(xp.ones(4, dtype=xp.complex64, device="cpu")).dtype
dtype('complex64')
"""

from __future__ import annotations

import builtins

from . import _devices as _dev
from . import _dtypes as _dt
from ._array import Array
from ._helpers import as_int, check_array, normalize_axis

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
           "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = ("backward", "ortho", "forward")


def _prep(name, x, kinds, norm):
    check_array(x, f"fft.{name}")
    if x.dtype not in _dt.categories[kinds]:
        raise TypeError(f"fft.{name}() requires a {kinds} array, got {x.dtype}")
    if norm not in _NORMS:
        raise ValueError(f"fft.{name}(): norm must be one of {_NORMS}, got {norm!r}")
    if x.ndim == 0:
        raise ValueError(f"fft.{name}() requires at least one dimension")


def _out_dtype(name, dtype):
    real_out = name in ("irfft", "irfftn", "hfft")
    if real_out:
        return _dt.real_of(dtype)
    if dtype in _dt.real_floating_dtypes:
        return _dt.complex_of(dtype)
    return dtype


def _one(name, kinds):
    def f(x, /, *, n=None, axis=-1, norm="backward"):
        _prep(name, x, kinds, norm)
        ax = normalize_axis(axis, x.ndim, f"fft.{name}")
        if n is not None:
            n = as_int(n, f"fft.{name}", "n")
            if n < 1:
                raise ValueError(f"fft.{name}(): n must be positive, got {n}")
        m = _dev.backend(x.device)
        with _dev.on(x.device):
            res = getattr(m.fft, name)(x._array, n=n, axis=ax, norm=norm)
            res = res.astype(_out_dtype(name, x.dtype), copy=False)
        return Array._new(res, x.device)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"One-dimensional ``{name}`` along ``axis`` (length ``n``).\n\n"
                 f"    >>> import forge_array as xp\n"
                 f"    >>> xp.fft.{name}(xp.ones(4, dtype=xp.complex128 if '{name}' != 'rfft'"
                 f" and '{name}' != 'ihfft' else xp.float64, device='cpu')).ndim\n    1\n")
    return f


def _many(name, kinds):
    def f(x, /, *, s=None, axes=None, norm="backward"):
        _prep(name, x, kinds, norm)
        if axes is None:
            axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
        axes = tuple(normalize_axis(a, x.ndim, f"fft.{name}") for a in axes)
        if len(set(axes)) != len(axes):
            raise ValueError(f"fft.{name}(): repeated axes")
        if s is None:
            s = (-1,) * len(axes)
        s = tuple(as_int(v, f"fft.{name}", "s") for v in s)
        if len(s) != len(axes):
            raise ValueError(f"fft.{name}(): s and axes must have the same length")
        # -1 means "the input size along that axis" (for irfftn's last axis
        # 2 * (m - 1)); CuPy gets wrong shapes without an explicit s, so always pass one
        last = len(s) - 1
        s = tuple((2 * (x.shape[a] - 1) if name == "irfftn" and i == last else x.shape[a])
                  if v == -1 else v for i, (v, a) in enumerate(zip(s, axes)))
        if builtins.any(v < 1 for v in s):
            raise ValueError(f"fft.{name}(): s entries must be positive, got {s}")
        # axes in increasing order, s with them: CuPy's fftn shapes the output wrongly for
        # unsorted axes (fftn of a (1, 2) array with s=(1, 2), axes=(1, 0) came out (1, 2),
        # not (2, 1)). The transforms along different axes commute; the real axis of
        # rfftn / irfftn (the last one given) stays last.
        keep = 1 if name in ("rfftn", "irfftn") else 0
        head = sorted(zip(axes[:len(axes) - keep], s[:len(s) - keep]))
        axes = tuple(a for a, _ in head) + axes[len(axes) - keep:]
        s = tuple(v for _, v in head) + s[len(s) - keep:]
        m = _dev.backend(x.device)
        with _dev.on(x.device):
            if keep and len(axes) > 1 and axes[-1] < axes[-2]:
                # the real axis before another one: CuPy's rfftn / irfftn still shape it
                # wrongly (rfftn of a (2, 1) array with s=(2, 1), axes=(1, 0): (2, 1), not
                # (1, 2)), so compose the definition: the real transform along the last axis
                # given and the complex one along the others (norms compose per axis)
                hs, ha = s[:-1], axes[:-1]
                if name == "rfftn":
                    res = m.fft.rfft(x._array, n=s[-1], axis=axes[-1], norm=norm)
                    res = m.fft.fftn(res, s=hs, axes=ha, norm=norm)
                else:
                    res = m.fft.ifftn(x._array, s=hs, axes=ha, norm=norm)
                    res = m.fft.irfft(res, n=s[-1], axis=axes[-1], norm=norm)
            else:
                res = getattr(m.fft, name)(x._array, s=s, axes=axes, norm=norm)
            res = res.astype(_out_dtype(name, x.dtype), copy=False)
        return Array._new(res, x.device)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"N-dimensional ``{name}`` over ``axes`` with output sizes ``s``.\n\n"
                 f"    >>> import forge_array as xp\n"
                 f"    >>> xp.fft.{name}(xp.ones((2, 4), dtype=xp.complex128 if "
                 f"'{name}' != 'rfftn' else xp.float64, device='cpu')).ndim\n    2\n")
    return f


fft = _one("fft", "floating-point")
ifft = _one("ifft", "floating-point")
rfft = _one("rfft", "real floating-point")
irfft = _one("irfft", "floating-point")
hfft = _one("hfft", "floating-point")
ihfft = _one("ihfft", "real floating-point")
fftn = _many("fftn", "floating-point")
ifftn = _many("ifftn", "floating-point")
rfftn = _many("rfftn", "real floating-point")
irfftn = _many("irfftn", "floating-point")


def _freq(name, n, d, dtype, device):
    n = as_int(n, f"fft.{name}", "n")
    if n < 1:
        raise ValueError(f"fft.{name}(): n must be positive")
    dtype = _dt.default_float if dtype is None else _dt.to_dtype(dtype)
    if dtype not in _dt.real_floating_dtypes:
        raise TypeError(f"fft.{name}(): dtype must be a real floating-point dtype")
    dev = _dev.as_device(device)
    m = _dev.backend(dev)
    with _dev.on(dev):
        return Array._new(getattr(m.fft, name)(n, d=d).astype(dtype, copy=False), dev)


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """Sample frequencies of an ``n``-point FFT with spacing ``d``.

    >>> import forge_array as xp
    >>> xp.fft.fftfreq(4, device="cpu")
    Array([ 0.  ,  0.25, -0.5 , -0.25], dtype=float64, device=cpu)
    """
    return _freq("fftfreq", n, d, dtype, device)


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """Non-negative sample frequencies of an ``n``-point rfft.

    >>> import forge_array as xp
    >>> xp.fft.rfftfreq(4, device="cpu")
    Array([0.  , 0.25, 0.5 ], dtype=float64, device=cpu)
    """
    return _freq("rfftfreq", n, d, dtype, device)


def _shift(name):
    def f(x, /, *, axes=None):
        check_array(x, f"fft.{name}")
        if axes is not None:
            ax = axes if isinstance(axes, (tuple, list)) else (axes,)
            axes = tuple(normalize_axis(a, x.ndim, f"fft.{name}") for a in ax)
        m = _dev.backend(x.device)
        with _dev.on(x.device):
            return Array._new(getattr(m.fft, name)(x._array, axes=axes), x.device)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"``{name}``: move the zero-frequency term {'to the centre' if name[0] == 'f' else 'back to the start'}.\n\n"  # noqa: E501
                 f"    >>> import forge_array as xp\n"
                 f"    >>> xp.fft.{name}(xp.arange(4, device='cpu')).shape\n    (4,)\n")
    return f


fftshift = _shift("fftshift")
ifftshift = _shift("ifftshift")
