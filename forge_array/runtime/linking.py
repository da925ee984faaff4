"""Operator linking: a kernel specialisation that differs from one built before only in its
operators is built by compiling the new operators alone and linking them into the stored
NVVM IR of the rest of the kernel (its *skeleton*), instead of a full numba build.

A full build of a kernel whose compile-time constants hold Python functions (a reduction's
operator and map, a scan's operator, a fused expression's function) keeps, as a by-product,
the NVVM IR of every module of the kernel except those of the operators' device functions,
each call of an operator renamed to a stable symbol per call signature (``forge_slot<n>``).
The skeleton is stored beside the kernel files (:mod:`.kernel_files`), under a key made of
everything in the kernel's own cache key but the operators (each replaced by a
:class:`Slot`).  A later specialisation with the same key compiles each new operator as a
numba device function for the recorded argument types (one small numba pipeline each),
renames it to its symbol and hands skeleton and operators to libNVVM together, which
inlines them as it inlines numba's own device functions: the PTX is the full build's, less
the numba typing and lowering of the kernel's body.  Where an operator's return type differs
from the skeleton's, or anything on this path fails (it rests on numba-cuda internals:
``_compile_pyfunc_with_fixup``, ``CUDACodeLibrary.modules``, ``CUDADispatcher.overloads``),
the specialisation is built in full.  The ``link`` flag (``FORGE_ARRAY_LINK=0``) turns it off.

>>> import types
>>> marked, found = mark((types.FunctionType((lambda a, b: a + b).__code__, {}), 3), [])
>>> marked[0], marked[1], len(found)
(('forge-slot', 0), 3, 1)
"""

from __future__ import annotations

import os
import pickle
import re
import types as pytypes
import zlib

from . import config, kernel_files, prebuilt
from .caches import Cache
from .counters import STATS
from .fingerprint import digest
from .flags import FLAGS

#: skeletons of this process by skeleton key: {"slots", "irs", "options"}
_SKELETONS = Cache("runtime.linking.SKELETONS", 64)
#: the target options of numba's device functions that shape their code
_OPTIONS = ("inline", "forceinline", "fastmath", "opt", "lineinfo", "debug")
#: how deep the search for an operator's device functions follows closures and globals
_MAX_DEPTH = 32
#: the code options of ``cuda.jit(device=True)``, read once
_DEFAULTS: dict = {}


class Slot(tuple):
    """The stand-in of operator ``k`` of a specialisation in its skeleton's key, with the code
    options of a numba device function given as the operator where they are not numba's
    defaults (so an operator compiled with ``fastmath`` never shares a skeleton with plain
    ones)."""

    def __new__(cls, k, options=()):
        return tuple.__new__(cls, ("forge-slot", k, *((options,) if options else ())))


def code_options(obj) -> tuple:
    """The options of the numba CUDA device function ``obj`` that shape its code and differ
    from those of ``cuda.jit(device=True)``, as sorted pairs (``()`` for a plain function)."""
    if type(obj).__name__ != "CUDADispatcher":
        return ()
    defaults = _default_options()
    return tuple(sorted((o, obj.targetoptions[o]) for o in _OPTIONS
                        if o in obj.targetoptions and obj.targetoptions[o] != defaults.get(o)))


def _default_options() -> dict:
    if not _DEFAULTS:
        from numba import cuda  # noqa: PLC0415

        opts = cuda.jit(device=True)(lambda: None).targetoptions
        _DEFAULTS.update({o: opts[o] for o in _OPTIONS if o in opts})
        _DEFAULTS.setdefault("_filled", True)
    return _DEFAULTS


def _linkable(obj) -> bool:
    """Whether ``obj`` is an operator the kernel calls as a device function: a Python
    function (or a numba CUDA device function of one) from outside the kernel layer."""
    if type(obj).__name__ == "CUDADispatcher":
        obj = getattr(obj, "py_func", None)
    if not isinstance(obj, pytypes.FunctionType):
        return False
    return not (obj.__module__ or "").startswith(("forge_array.kernels", "forge_array.intrinsics"))


def mark(obj, found: list):
    """``obj`` (a factory's constants: tuples, named tuples, lists) with every operator
    replaced by ``Slot(k)``, ``k`` its place in ``found`` (one slot per distinct object)."""
    if _linkable(obj):
        for k, f in enumerate(found):
            if f is obj:
                return Slot(k, code_options(obj))
        found.append(obj)
        return Slot(len(found) - 1, code_options(obj))
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(mark(v, found) for v in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(mark(v, found) for v in obj)
    return obj


def skeleton_key(kernel_key: str | None) -> str | None:
    """The skeleton's key of a specialisation whose operators are marked (``kernel_key``:
    the kernel cache key of the marked constants; None where they cannot be fingerprinted)."""
    return None if kernel_key is None else digest("forge_array-skeleton-v1", kernel_key)


def find(key_for, cc):
    """``(key, skeleton)`` of a specialisation whose marked constants have the kernel key
    ``key_for(target)`` for a compile target: the key for ``cc`` (None where the constants
    cannot be fingerprinted) and the skeleton built here before for ``cc``, else the
    package's for ``cc`` or the newest earlier target (:mod:`.prebuilt`), else None."""
    skey = skeleton_key(key_for(cc))
    if skey is None:
        return None, None
    sk = load(skey)
    if sk is None and FLAGS["prebuilt"].cell[0]:
        for target in sorted((t for t in prebuilt.TARGETS if t <= tuple(cc)), reverse=True):
            key = skey if target == tuple(cc) else skeleton_key(key_for(target))
            sk = None if key is None else prebuilt.skeleton(key)
            if sk is not None:
                _SKELETONS[skey] = sk
                break
    return skey, sk


def _path(skey: str) -> str:
    return os.path.join(config.CACHE_DIR, skey[:2], skey + ".skeleton")


def _py_func(fn):
    return getattr(fn, "py_func", fn)


# --------------------------------------------------------------------------- the full build


def _dispatchers(pyfunc) -> list:
    """Every numba CUDA dispatcher the kernel function ``pyfunc`` reaches through closures
    and referenced globals (and theirs, recursively)."""
    out, seen, todo = [], set(), [(pyfunc, 0)]
    while todo:
        obj, depth = todo.pop()
        if id(obj) in seen or depth > _MAX_DEPTH:
            continue
        seen.add(id(obj))
        if type(obj).__name__ == "CUDADispatcher":
            out.append(obj)
            obj = getattr(obj, "py_func", None)
        if isinstance(obj, (tuple, list)):
            todo.extend((v, depth + 1) for v in obj)
            continue
        if not isinstance(obj, pytypes.FunctionType):
            continue
        for cell in obj.__closure__ or ():
            try:
                todo.append((cell.cell_contents, depth + 1))
            except ValueError:  # an empty cell
                pass
        g = obj.__globals__
        todo.extend((g[n], depth + 1) for n in _names(obj.__code__) if n in g)
    return out


def _names(code) -> set:
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, pytypes.CodeType):
            names |= _names(c)
    return names


def _unique_modules(lib) -> list:
    """The library's modules and its linked libraries', each once (numba-cuda lists a
    library met on several linking paths once per path)."""
    out, seen = [], set()
    for m in lib.modules:
        if id(m) not in seen:
            seen.add(id(m))
            out.append(m)
    return out


def _rename(text: str, names: dict) -> str:
    for old, new in names.items():
        text = text.replace(f'"{old}"', f'"{new}"').replace(f"@{old}(", f"@{new}(")
    return text


def skeleton_of(lib, pyfunc, users: list):
    """The skeleton of the kernel library ``lib`` (numba's, of kernel function ``pyfunc``)
    with operators ``users``, or None where an operator is reached otherwise than as a
    device function of this kernel (then the kernel cannot be linked)."""
    mods = _unique_modules(lib)
    ids = {id(m) for m in mods}
    by_func = {}
    for d in _dispatchers(pyfunc):
        by_func.setdefault(id(d.py_func), []).append(d)
    slots, names, drop = [], {}, set()
    for k, fn in enumerate(users):
        found = 0
        for d in by_func.get(id(_py_func(fn)), ()):
            for args, cres in list(d.overloads.items()):
                if id(cres.library._module) not in ids:
                    continue            # an overload made for another kernel
                sym = f"forge_slot{len(slots)}"
                slots.append((k, tuple(args), cres.signature.return_type, sym))
                names[cres.fndesc.mangled_name] = sym
                drop |= {id(m) for m in _unique_modules(cres.library)}
                found += 1
        if not found:
            return None
    irs = [_rename(str(m), names) for m in mods if id(m) not in drop]
    text = "\n".join(irs)
    if any(f'@"{s}"(' not in text and f"@{s}(" not in text for s in names.values()):
        return None
    return {"slots": slots, "irs": irs, "options": dict(lib._nvvm_options),
            "operators": [f"{_py_func(fn).__module__}.{_py_func(fn).__qualname__}" for fn in users]}


def keep(skey: str, lib, pyfunc, users: list) -> None:
    """Store the skeleton of a full build (nothing where it has none, or numba-cuda's
    internals it reads have moved)."""
    try:
        sk = skeleton_of(lib, pyfunc, users)
    except Exception:  # noqa: BLE001 - numba-cuda's internals moved: no skeleton, full builds
        return
    if sk is not None:
        save(skey, sk)


def save(skey: str, skeleton) -> None:
    """Keep ``skeleton`` for this process and write it beside the kernel files."""
    _SKELETONS[skey] = skeleton
    try:
        kernel_files.write_atomic_bytes(_path(skey), zlib.compress(pickle.dumps(skeleton), 6))
    except OSError as exc:
        kernel_files.warn_unwritable(exc)


def load(skey: str):
    """The skeleton of key ``skey`` from this process or the disk, or None."""
    sk = _SKELETONS.get(skey)
    if sk is not None:
        return sk
    try:
        with open(_path(skey), "rb") as f:
            sk = pickle.loads(zlib.decompress(f.read()))
    except (OSError, zlib.error, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError):
        return None
    _SKELETONS[skey] = sk
    return sk


# --------------------------------------------------------------------------- the linked build

_DEFINE = re.compile(r"^define (?!(?:linkonce_odr|linkonce|internal|private|weak|weak_odr|available_externally)\b)",
                     re.M)


def _operator_texts(users: list, slots: list) -> list | None:
    """NVVM IR of the operators compiled alone for every call signature of the skeleton,
    renamed to its symbols, their definitions ``linkonce_odr`` (inlined, never emitted on
    their own); None where an operator returns another type than the skeleton's.  A numba
    device function compiles with its own options, a plain function as the kernel
    factories compile it (``cuda.jit(device=True)``, whatever the skeleton's first operator
    was: operators of other options never share a skeleton, :class:`Slot`)."""
    from numba import cuda  # noqa: PLC0415

    made, texts, seen = {}, [], set()
    for k, args, ret, sym in (s[:4] for s in slots):
        fn = users[k]
        disp = made.get(k)
        if disp is None:
            disp = made[k] = fn if type(fn).__name__ == "CUDADispatcher" else cuda.jit(device=True)(_py_func(fn))
        cres = disp.compile_device(tuple(args))
        if cres.signature.return_type != ret:
            return None
        for m in _unique_modules(cres.library):
            if (id(m), sym) in seen:
                continue
            seen.add((id(m), sym))
            texts.append(_DEFINE.sub("define linkonce_odr ", _rename(str(m), {cres.fndesc.mangled_name: sym})))
    return texts


def link(skeleton, users: list, cc) -> str | None:
    """:func:`linked_ptx`, or None where it fails on the way (counted in
    ``STATS["link_failures"]``; the caller then builds in full)."""
    try:
        return linked_ptx(skeleton, users, cc)
    except Exception:  # noqa: BLE001 - numba-cuda's internals moved, NVVM refused: build in full
        STATS["link_failures"] += 1
        return None


def linked_ptx(skeleton, users: list, cc) -> str | None:
    """PTX of ``skeleton`` with operators ``users`` for compute capability ``cc``, or None
    where they cannot be linked into it (an operator's return type differs)."""
    from numba.cuda.cudadrv import nvrtc, nvvm  # noqa: PLC0415

    texts = _operator_texts(users, skeleton["slots"])
    if texts is None:
        return None
    options = dict(skeleton["options"])
    options["arch"] = nvrtc.get_arch_option(*cc)
    ptx = nvvm.compile_ir(skeleton["irs"] + texts, **options)
    return ptx.decode().strip("\x00").strip()


def full_build(pyfunc, argtypes: tuple, cc, launch_bounds):
    """numba's build of kernel function ``pyfunc`` as ``numba.cuda.compile_ptx`` makes it,
    returning the code library (its PTX: ``lib.get_asm_strs(cc=cc)[0]``)."""
    from numba.cuda import compiler as ncc  # noqa: PLC0415

    lib, _ = ncc._compile_pyfunc_with_fixup(
        pyfunc, argtypes, debug=False, lineinfo=False, device=False, fastmath=False, cc=cc, opt=True,
        abi="numba", abi_info=None, forceinline=False, launch_bounds=launch_bounds, lto=False)
    return lib
