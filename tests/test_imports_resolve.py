"""Every import statement of the package names a module and a name that exist, including the
imports inside functions: many run only on a GPU (the simulator never reaches them), so a
path one dot off after a move would otherwise first fail on a user's GPU."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pathlib

import pytest

import forge_array

ROOT = pathlib.Path(forge_array.__file__).parent

#: optional dependencies some modules import where they are used
OPTIONAL = ("cupy", "cupyx", "cupy_backends", "fastrlock", "torch", "jax", "dask", "distributed",
            "dask_cuda", "cuda", "sklearn", "scipy", "pynvml", "nvidia", "hypothesis", "cuda_cccl")


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(source: str, mod: str, is_package: bool = False):
    """(line, module, names) of every import in the ``source`` of module ``mod``: absolute
    module names, the imported names (None for ``import x``)."""
    package = mod if is_package else mod.rpartition(".")[0]
    for node in ast.walk(ast.parse(source, mod)):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name, None
        elif isinstance(node, ast.ImportFrom):
            name = "." * node.level + (node.module or "")
            absolute = importlib.util.resolve_name(name, package) if node.level else name
            yield node.lineno, absolute, [a.name for a in node.names]


def _optional(name: str) -> bool:
    return name.split(".")[0] in OPTIONAL


FILES = sorted(ROOT.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_import_resolves(path):
    problems = []
    for line, module, names in _imports(path.read_text(), _module_name(path), path.name == "__init__.py"):
        if _optional(module):
            continue
        if module.startswith("forge_array"):
            spec = importlib.util.find_spec(module)
            if spec is None:
                problems.append(f"line {line}: no module {module}")
                continue
            if not names or names == ["*"]:
                continue
            m = importlib.import_module(module)
            for n in names:
                sub = f"{module}.{n}"
                if not hasattr(m, n) and importlib.util.find_spec(sub) is None:
                    problems.append(f"line {line}: {module} has no {n}")
        elif importlib.util.find_spec(module.split(".")[0]) is None:
            problems.append(f"line {line}: no module {module}")
    assert not problems, f"{path.relative_to(ROOT)}: " + "; ".join(problems)


def test_a_path_one_dot_off_is_found():
    """The check itself: a relative import one level too shallow names a module that does
    not exist."""
    source = "def f():\n    from ..runtime import launch\n"
    [(line, module, names)] = _imports(source, "forge_array.primitives.reductions.launch")
    assert (line, module, names) == (2, "forge_array.primitives.runtime", ["launch"])
    assert importlib.util.find_spec(module) is None
