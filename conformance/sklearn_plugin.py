"""pytest plugin pointing scikit-learn's array API tests at forge_array.

Loaded with ``-p sklearn_plugin`` (``conformance/`` on ``PYTHONPATH``) by
``conformance/sklearn_run.py``. scikit-learn parametrizes its array API tests with
``sklearn.utils._array_api.yield_namespace_device_dtype_combinations`` (and
``yield_namespaces``, ``yield_mixed_namespace_input_permutations``), which its test
modules import by name when pytest collects them. This plugin is imported before that
and replaces the three generators in the modules that hold them, so that every such
test runs on ``forge_array`` on the device ``FORGE_ARRAY_SKLEARN_DEVICE`` names
(``cpu`` by default, or ``cuda:N``), in float64 and float32; the mixed-namespace tests
convert NumPy to forge_array and back.

Example (what ``sklearn_run.py`` runs)::

    SCIPY_ARRAY_API=1 FORGE_ARRAY_SKLEARN_DEVICE=cpu PYTHONPATH=conformance \\
        pytest -p sklearn_plugin --pyargs sklearn -k array_api
"""

from __future__ import annotations

import os

DEVICE = os.environ.get("FORGE_ARRAY_SKLEARN_DEVICE", "cpu")


def yield_namespaces(include_numpy_namespaces=True):
    """The namespaces the tests run on: forge_array alone.

    >>> list(yield_namespaces())
    ['forge_array']
    """
    yield "forge_array"


def yield_namespace_device_dtype_combinations(include_numpy_namespaces=True):
    """(namespace, device, dtype) triples: forge_array on ``DEVICE``, float64 and float32.

    >>> [t[2] for t in yield_namespace_device_dtype_combinations()]
    ['float64', 'float32']
    """
    for dtype in ("float64", "float32"):
        yield "forge_array", DEVICE, dtype


def yield_mixed_namespace_input_permutations():
    """(from, to, id) pairs of namespaces for the conversion tests: NumPy and forge_array.

    >>> [t[2] for t in yield_mixed_namespace_input_permutations()]
    ['forge_array to numpy', 'numpy to forge_array']
    """
    from sklearn.utils._array_api import NamespaceAndDevice  # noqa: PLC0415

    yield (NamespaceAndDevice("forge_array", DEVICE), NamespaceAndDevice("numpy", None),
           "forge_array to numpy")
    yield (NamespaceAndDevice("numpy", None), NamespaceAndDevice("forge_array", DEVICE),
           "numpy to forge_array")


def _patch():
    import importlib  # noqa: PLC0415

    names = {"yield_namespaces": yield_namespaces,
             "yield_namespace_device_dtype_combinations":
                 yield_namespace_device_dtype_combinations,
             "yield_mixed_namespace_input_permutations":
                 yield_mixed_namespace_input_permutations}
    for mod in ("sklearn.utils._array_api", "sklearn.utils._testing",
                "sklearn.utils.estimator_checks"):
        m = importlib.import_module(mod)
        for name, fn in names.items():
            if hasattr(m, name):
                setattr(m, name, fn)


def pytest_configure(config):
    """Patch scikit-learn's generators before any test module is collected."""
    os.environ.setdefault("SCIPY_ARRAY_API", "1")
    _patch()
