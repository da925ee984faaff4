"""The package's layers, checked: every module imports only modules of its own layer or of
the layers below it (docs/design.md, "Layers").

An import is an ``import`` statement anywhere in a module (at the top, inside a function,
under ``TYPE_CHECKING``) or a module named by a literal string where one is loaded at run
time (``lazy.module("forge_array....")``, ``importlib.import_module(...)``,
``__import__(...)``, a kernel factory named by its module, ``factories.factory(...)``), so the
imports deferred for start-up time count as the others do.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "forge_array"

#: the layers from the bottom up: (name, module prefixes below ``forge_array``); a module
#: belongs to the layer of its longest matching prefix ("" is the package's ``__init__``)
LAYERS = (
    ("base", ("runtime", "_constants", "_version", "_dtypes", "_devices", "_ownership")),
    ("intrinsics", ("intrinsics", "ops")),
    ("kernels", ("kernels",)),
    ("dispatch", ("dispatch",)),
    ("primitives", ("primitives",)),
    ("array", ("_interop", "_info", "_kernel_layer", "_routing", "_backend_indexing", "_cusolver_potrf", "_tall_qr",
               "_special_values", "_array")),
    ("fusion", ("fusion",)),
    ("namespace", ("_helpers", "_elementwise", "_statistical", "_data_type", "_sets", "_manipulation",
                   "_indexing", "_generic", "_generic_scan", "_generic_matvec", "_creation", "_sorting",
                   "_searching", "_utility", "_linear_algebra", "linalg", "fft")),
    ("sharding", ("sharding",)),
    ("package", ("",)),
    # programs and integrations: the command line, the build process's own main module (a
    # program of its own, started by runtime.build_process), the drop-ins, Dask, testing
    ("programs", ("__main__", "_warmup", "runtime.build_worker", "_dropin", "cupy", "dask", "_dask_reductions",
                  "_worker_plugin", "testing")),
)

_LOADERS = {"module", "import_module", "__import__", "factory"}


def _name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_name(p): p for p in PACKAGE.rglob("*.py")}


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of ``module`` (a dotted name in the package)."""
    rel = module[len("forge_array"):].lstrip(".")
    best, length = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            hit = rel == p if p == "" else (rel == p or rel.startswith(p + "."))
            if hit and len(p) > length:
                best, length = i, len(p)
    if best is None:
        raise AssertionError(f"{module} belongs to no layer: add it to tests/test_layers.py LAYERS")
    return best


def imports_of(module: str) -> set[str]:
    """The package's modules ``module`` imports (see the module docstring)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()

    def add(name):
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module:
            found.add(name)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:
                add(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base)
        elif isinstance(node, ast.Call) and node.args:
            fn = node.func
            called = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
            arg = node.args[0]
            if called in _LOADERS and isinstance(arg, ast.Constant) and isinstance(arg.value, str) \
                    and arg.value.startswith("forge_array"):
                add(arg.value)
    return {m for m in found if m.startswith("forge_array")}


def test_every_module_has_a_layer():
    for module in MODULES:
        layer_of(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_the_layers(module):
    mine = layer_of(module)
    up = sorted(f"{m} ({LAYERS[layer_of(m)][0]})" for m in imports_of(module) if layer_of(m) > mine)
    assert not up, f"{module} ({LAYERS[mine][0]}) imports a higher layer: {', '.join(up)}"


def test_the_check_sees_deferred_imports():
    """The check itself: an import inside a function and a module loaded by name count."""
    assert "forge_array.kernels.reduce" in imports_of("forge_array.dispatch.reduce")   # lazy.module
    assert "forge_array.primitives.reductions" in imports_of("forge_array._kernel_layer")
    assert layer_of("forge_array.runtime.build_worker") > layer_of("forge_array.kernels.reduce")
