"""Simulator twins of :mod:`.cuda_float`: float32 arithmetic with the GPU's flush-to-zero
rule, on NumPy scalars.

>>> import numpy as np
>>> float(ftz_f32(np.float32(-1e-40)))
-0.0
>>> float(ftz_mul(np.float32(1e-20), np.float32(1e-20)))
0.0
"""

from __future__ import annotations

import numpy as np

_TINY = np.float32(np.finfo(np.float32).tiny)


def ftz_f32(v):
    """``v`` as float32, a subnormal read as a zero of its sign."""
    v = np.float32(v)
    return v * np.float32(0) if -_TINY < v < _TINY else v


def _make_binary(name, fn):
    def binary(a, b):
        with np.errstate(all="ignore"):
            return ftz_f32(fn(ftz_f32(a), ftz_f32(b)))

    binary.__name__ = binary.__qualname__ = name
    binary.__doc__ = f"float32 ``{name[4:]}`` with subnormal operands and result flushed."
    return binary


ftz_add = _make_binary("ftz_add", np.add)
ftz_sub = _make_binary("ftz_sub", np.subtract)
ftz_mul = _make_binary("ftz_mul", np.multiply)
ftz_div = _make_binary("ftz_div", np.divide)
