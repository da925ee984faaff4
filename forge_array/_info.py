"""Inspection API: ``__array_namespace_info__()``.

>>> import forge_array as xp
>>> info = xp.__array_namespace_info__()
>>> info.default_dtypes(device="cpu")["indexing"]
dtype('int64')
"""

from __future__ import annotations

from . import _devices as _dev
from . import _dtypes as _dt
from .runtime.caches import Cache

__all__ = ["__array_namespace_info__"]

#: kind -> {name: dtype} of ``Info.dtypes`` (scikit-learn asks for it at every step)
_DTYPES_OF_KIND = Cache("_info.DTYPES_OF_KIND", 64)


class Info:
    """Capabilities, devices and dtypes of forge_array."""

    __module__ = "forge_array"

    def capabilities(self):
        """Capabilities of the namespace.

        >>> import forge_array as xp
        >>> xp.__array_namespace_info__().capabilities()["boolean indexing"]
        True
        """
        return {"boolean indexing": True, "data-dependent shapes": True,
                "max dimensions": 64}

    def default_device(self):
        """The default device (``cuda:0`` with a GPU, else ``cpu``; see FORGE_ARRAY_DEVICE).

        >>> import forge_array as xp
        >>> xp.__array_namespace_info__().default_device() in xp.__array_namespace_info__().devices()
        True
        """  # noqa: E501
        return _dev.default_device()

    def default_dtypes(self, *, device=None):
        """Default dtypes (same on every device).

        >>> import forge_array as xp
        >>> xp.__array_namespace_info__().default_dtypes()["real floating"]
        dtype('float64')
        """
        if device is not None:
            _dev.as_device(device)
        return {"real floating": _dt.default_float, "complex floating": _dt.default_complex,
                "integral": _dt.default_int, "indexing": _dt.default_index}

    def dtypes(self, *, device=None, kind=None):
        """Supported dtypes by name, optionally of a kind (see ``isdtype``).

        >>> import forge_array as xp
        >>> sorted(xp.__array_namespace_info__().dtypes(kind="bool"))
        ['bool']
        """
        if device is not None:
            _dev.as_device(device)
        key = kind if kind is None or isinstance(kind, (str, tuple)) else _dt.to_dtype(kind, "kind")
        try:
            hit = _DTYPES_OF_KIND.get(key)
        except TypeError:  # an unhashable kind: isdtype's error
            hit = None
        if hit is None:
            hit = {d.name: d for d in _dt.all_dtypes if kind is None or _dt.isdtype(d, kind)}
            _DTYPES_OF_KIND[key] = hit
        return dict(hit)

    def devices(self):
        """All available devices: the GPUs, then ``cpu``.

        >>> import forge_array as xp
        >>> xp.__array_namespace_info__().devices()[-1]
        cpu
        """
        return _dev.devices()


def __array_namespace_info__():
    """The namespace inspection object of the standard.

    >>> import forge_array as xp
    >>> xp.__array_namespace_info__().capabilities()["max dimensions"]
    64
    """
    return Info()
