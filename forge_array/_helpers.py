"""Argument checks shared by the namespace modules (axes, array arguments)."""

from __future__ import annotations

import builtins
import operator

from ._array import Array

try:
    from numpy.exceptions import AxisError
except ImportError:  # NumPy < 1.25
    from numpy import AxisError


def check_array(x, name: str, arg: str = "x") -> Array:
    """TypeError unless ``x`` is a forge_array Array."""
    if not isinstance(x, Array):
        raise TypeError(f"{name}() requires {arg} to be a forge_array array, got "
                        f"{type(x).__name__}; convert it with forge_array.asarray()")
    return x


def as_int(value, name: str, what: str) -> int:
    if isinstance(value, builtins.bool):
        raise TypeError(f"{name}(): {what} must be an integer, got a bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name}(): {what} must be an integer, got "
                        f"{type(value).__name__}") from None


def normalize_axis(axis, ndim: int, name: str) -> int:
    """One axis in ``[-ndim, ndim)`` -> a non-negative int (IndexError otherwise)."""
    a = as_int(axis, name, "axis")
    if not -ndim <= a < ndim:
        raise IndexError(f"{name}(): axis {a} is out of bounds for an array of "
                         f"dimension {ndim}")
    return a % ndim if ndim else a


def scan_axis(axis, ndim: int, name: str) -> int:
    """The axis of a cumulative function (``cumulative_sum``, ``cumulative_prod``) as a
    non-negative int: ``axis`` normalized, or 0 for ``None``, which only a 1-D array
    allows (ValueError otherwise); ``ndim`` >= 1.

    >>> scan_axis(None, 1, "cumulative_sum"), scan_axis(-1, 2, "cumulative_sum")
    (0, 1)
    """
    if axis is None:
        if ndim > 1:
            raise ValueError(f"{name}(): axis must be given for a {ndim}-D array")
        return 0
    return normalize_axis(axis, ndim, name)


def normalize_axes(axis, ndim: int, name: str) -> tuple:
    """``None``, an int or a sequence of ints -> a sorted tuple of distinct non-negative
    axes (IndexError when out of range, ValueError when repeated)."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        axes = [normalize_axis(a, ndim, name) for a in axis]
        if len(set(axes)) != len(axes):
            raise ValueError(f"{name}(): repeated axis in {tuple(axis)}")
        return tuple(sorted(axes))
    return (normalize_axis(axis, ndim, name),)


def normalize_shape(shape, name: str) -> tuple:
    """An int or a sequence of non-negative ints -> a tuple (ValueError when negative)."""
    if isinstance(shape, (tuple, list)):
        out = tuple(as_int(s, name, "shape entries") for s in shape)
    else:
        out = (as_int(shape, name, "shape"),)
    if builtins.any(s < 0 for s in out):
        raise ValueError(f"{name}(): negative dimensions are not allowed in shape {out}")
    return out


def named_axis_error(exc, name: str):
    """The AxisError (a ValueError and an IndexError) ``exc`` with the function's ``name``
    in front of its message: ``reduce: axis 9 is out of bounds for array of dimension 1``.

    ```python
    from numpy.exceptions import AxisError
    from forge_array._helpers import named_axis_error

    str(named_axis_error(AxisError(9, 1), "reduce"))
    # 'reduce: axis 9 is out of bounds for array of dimension 1'
    ```
    """
    msg = str(exc)
    if msg.startswith(f"{name}:"):
        return exc
    return AxisError(f"{name}: {msg}")
