"""The kernel sources: the files whose code becomes kernel code or shapes it, and the hashes a
kernel's cache key takes of them.

A kernel's key (:func:`.compiler._key`) digests :func:`factory_hash` of its factory: the
sources every kernel reads (:data:`SHARED_SOURCES`: the CUDA intrinsics, the runtime modules
kernel code reads, the kernels package's ``__init__``) and the factory's own module with the
kernel modules it imports, followed through their imports (any import statement of the
module, those inside functions included).  Editing one kernel family (a scan kernel, say)
leaves the cached and shipped kernels of the other families valid; editing an intrinsic or
the compiler voids them all.  The simulator's intrinsics (:data:`SIMULATOR_SOURCES`) never
become GPU code and count nowhere.  :func:`source_hash` hashes every kernel source at once:
the shipped archive's manifest records it.

>>> factory_hash(factory_hash) != source_hash()
True
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import sys

from .flags import FLAGS

__all__ = ["SHARED_SOURCES", "KERNEL_SOURCES", "SIMULATOR_SOURCES", "source_hash", "shared_hash", "factory_hash",
           "module_hash", "module_hashes", "module_file", "module_files", "forget"]

#: the sources every kernel reads: the intrinsics (with their subfolders), and of the runtime
#: the compiler (compile options, PTX post-processing) and what kernel modules read from it
#: (argument types, alignment, the simulator switch, the linking of stand-in operators, the
#: sizes of vector accesses and status words)
SHARED_SOURCES = ("intrinsics/**/*.py", "runtime/compiler.py", "runtime/linking.py", "runtime/memory.py",
                  "runtime/config.py", "runtime/kernel_types.py", "runtime/packed_words.py", "kernels/__init__.py")
#: every kernel source: the shared ones and the kernel modules (the factories)
KERNEL_SOURCES = SHARED_SOURCES + ("kernels/**/*.py",)
#: of those, the simulator's own intrinsics: they never become GPU code (the simulator runs
#: kernels as Python and keeps no compiled kernel)
SIMULATOR_SOURCES = "intrinsics/sim_*.py"
#: the package whose modules are kernel modules
KERNELS_PACKAGE = "forge_array.kernels"

_HASHES: dict = {}   # "all" / "shared" / a module's file -> hex digest


def _root() -> str:
    """The package's folder (``forge_array/``)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _files(patterns) -> list:
    root = _root()
    skip = set(glob.glob(os.path.join(root, SIMULATOR_SOURCES)))
    found = set()
    for pattern in patterns:
        found |= set(glob.glob(os.path.join(root, pattern), recursive=True))
    return sorted(found - skip)


def _digest(paths) -> str:
    root = _root()
    h = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            h.update(os.path.relpath(path, root).encode() + b"\0" + f.read())
    # build switches read by the kernel modules at import
    h.update(b"count=%d trace=%d" % (FLAGS["scan_count"].cell[0], FLAGS["scan_trace"].cell[0]))
    return h.hexdigest()


def source_hash() -> str:
    """Hash of every kernel source of this install (:data:`KERNEL_SOURCES` less
    :data:`SIMULATOR_SOURCES`) and the build switches the kernel modules read at import."""
    h = _HASHES.get("all")
    if h is None:
        h = _HASHES["all"] = _digest(_files(KERNEL_SOURCES))
    return h


def shared_hash() -> str:
    """Hash of :data:`SHARED_SOURCES` (less :data:`SIMULATOR_SOURCES`) and the build
    switches: the part of every kernel's key that any kernel source but a kernel module
    changes."""
    h = _HASHES.get("shared")
    if h is None:
        h = _HASHES["shared"] = _digest(_files(SHARED_SOURCES))
    return h


def _module_file(name: str):
    """The source file of kernel module ``name`` (``forge_array.kernels...``) in this
    install, or None when it is none."""
    if name != KERNELS_PACKAGE and not name.startswith(KERNELS_PACKAGE + "."):
        return None
    parts = name.split(".")[1:]   # below the package's folder
    base = os.path.join(_root(), *parts)
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


def module_file(name: str):
    """The source file of kernel module ``name`` (``forge_array.kernels.reduce``) in this
    install, or None when it is not a kernel module.

    >>> os.path.basename(module_file("forge_array.kernels.reduce")), module_file("json")
    ('reduce.py', None)
    """
    return _module_file(name)


def _module_name(path: str) -> str:
    rel = os.path.relpath(path, _root())[:-3].split(os.sep)
    if rel[-1] == "__init__":
        rel = rel[:-1]
    return ".".join(["forge_array"] + rel)


#: an import statement at the start of a line: ``from MODULE import NAMES`` (names in
#: parentheses may span lines) or ``import NAMES``
_IMPORT = re.compile(rb"^[ \t]*(?:from[ \t]+([.\w]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n;]*)|import[ \t]+([^\n;]*))",
                     re.M)
_COMMENT = re.compile(rb"#[^\n]*")


def _imported(path: str):
    """The modules (and module attributes) every import statement of ``path`` names, those
    inside functions included: the statements are found by a pattern over the source's lines
    (about 25 times faster than parsing the files, which a fresh process's first kernel of
    each family waited for); ``tests/test_prebuilt.py`` checks that it finds what Python's
    parser finds in every kernel module of the package."""
    with open(path, "rb") as f:
        text = f.read()
    name = _module_name(path)
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    for m in _IMPORT.finditer(text):
        source, names, plain = m.groups()
        listed = _COMMENT.sub(b"", names if plain is None else plain).strip().strip(b"()")
        aliases = [a.split()[0].decode() for a in listed.split(b",") if a.strip()]
        if plain is not None:
            yield from aliases
            continue
        source = source.decode()
        level = len(source) - len(source.lstrip("."))
        if level:
            base = package.split(".")
            base = base[:len(base) - (level - 1)]
            mod = ".".join(base + ([source[level:]] if source[level:] else []))
        else:
            mod = source
        yield mod
        for alias in aliases:
            yield f"{mod}.{alias}"


def module_files(path: str) -> tuple:
    """The kernel module at ``path``, its packages' ``__init__`` and the kernel modules it
    imports, followed through their imports, as sorted paths (a path outside the kernels
    package: itself alone).

    >>> import forge_array.kernels.scan.tile as m
    >>> files = [os.path.relpath(p, _root()) for p in module_files(m.__file__)]
    >>> "kernels/scan/tile.py" in files, "kernels/scan/__init__.py" in files, "kernels/reduce.py" in files
    (True, True, False)
    """
    seen = set()
    todo = [os.path.abspath(path)]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        name = _module_name(p)
        if _module_file(name) is None:   # not a kernel module: its own file only
            continue
        # its packages' __init__ run before it, then what it imports
        parents = [name.rsplit(".", k)[0] for k in range(1, name.count(".") + 1)]
        for mod in parents + list(_imported(p)):
            f = _module_file(mod)
            if f is not None and f not in seen:
                todo.append(f)
    return tuple(sorted(seen))


def module_hash(path: str) -> str:
    """The hash a kernel of a factory defined in the module at ``path`` takes of its
    sources: :func:`shared_hash` and the files of :func:`module_files`."""
    path = os.path.abspath(path)
    h = _HASHES.get(path)
    if h is None:
        h = _HASHES[path] = hashlib.sha256((shared_hash() + _digest(module_files(path))).encode()).hexdigest()
    return h


def factory_hash(factory) -> str:
    """:func:`module_hash` of the module ``factory`` is defined in (only the shared hash for
    a factory without a source file)."""
    mod = sys.modules.get(getattr(factory, "__module__", None) or "")
    path = getattr(mod, "__file__", None)
    return shared_hash() if path is None else module_hash(path)


def module_hashes() -> dict:
    """:func:`module_hash` of every kernel module of this install, by its path in the
    package (``kernels/scan/tile.py``): the manifest of the shipped kernels records them, so
    that :func:`.prebuilt.status` can say which families' shipped kernels are stale."""
    root = _root()
    return {os.path.relpath(p, root).replace(os.sep, "/"): module_hash(p) for p in _files(("kernels/**/*.py",))}


def forget() -> None:
    """Drop the hashes computed so far (a test that edits sources)."""
    _HASHES.clear()
