"""Hypothesis strategies for testing array code on views, not just fresh arrays.

``from forge_array.testing import arrays, views, dtypes, shapes, axes``; see
``docs/testing.md`` and :mod:`forge_array.testing.strategies`.
"""

from .strategies import (
    DEFAULT_EDGES,
    DTYPE_KINDS,
    ViewLayout,
    arrays,
    axes,
    dtypes,
    elements_for,
    shapes,
    view_layouts,
    views,
)

__all__ = [
    "DEFAULT_EDGES",
    "DTYPE_KINDS",
    "ViewLayout",
    "arrays",
    "axes",
    "dtypes",
    "elements_for",
    "shapes",
    "view_layouts",
    "views",
]
