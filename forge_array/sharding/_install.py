"""The sharded functions registered (one module per family) and installed into the namespace's
dispatch at import of :mod:`forge_array.sharding`."""

from . import _creation, _elementwise, _linalg, _reductions, _scans  # noqa: F401  (they register)
from ._dispatch import REGISTRY, install


def sharded_functions() -> list:
    """Names of the namespace functions that take sharded arrays.

    >>> "sum" in sharded_functions()
    True
    """
    return sorted(REGISTRY)


install()
