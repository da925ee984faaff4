"""Kernels shipped built: the standard operations' PTX in the package, loaded instead of compiled.

``python -m forge_array prebuild`` (on a GPU machine; see :mod:`forge_array._warmup`) runs the
standard reductions, scans and matrix-vector products for every standard dtype and every
layout class the dispatch picks, once per compute capability of :data:`TARGETS`: the baseline
sm_80 (PTX the driver JITs for every later GPU) and sm_90, whose plans pick kernels of their
own (the pipelined scan's bulk copies).  It packs the kernel files into
``forge_array/prebuilt/kernels.zip`` (each file LZMA-compressed, named by its cache key; with
its index ``kernels.idx``, :mod:`.zip_index`, so that a look-up reads one member and never the
archive's directory) and ``manifest.json`` beside it: the command, the commit, the GPU, the versions, the kernel
sources' hash, the number of kernels and their sizes.  The kernels of the targets in
:data:`CUBIN_TARGETS` ship as machine code instead (a cubin linked from the PTX on the
prebuild's GPU machine; the PTX where the linker fails): the driver compiles PTX when it loads
it, tens to hundreds of milliseconds per kernel on a machine whose driver cache is empty, where
a cubin loads in under a millisecond.  In the disk cache such a kernel is a kernel file without
PTX (its entry point) beside its cubin.

A specialisation missing from the memory and disk caches is looked up here under the cache
key it would have had when compiled for the newest target the device runs (the device's own
capability where it is a target); a hit is written into the disk cache
under the device's own key (a later process finds it there; a cubin only where the device
runs it: the same major compute capability, not newer, and the driver loads it) and loaded
through CuPy like any cached kernel, so numba neither types nor compiles it.  A key digests the kernel sources, the
factory and its constants, the argument types and the numba / numba-cuda versions, so a
kernel whose generating source changed after the archive was made (or another numba) has
another key and is never found: it is compiled as before.  :func:`status` says whether the
shipped archive matches this install's sources.  ``FORGE_ARRAY_PREBUILT=0`` (the ``prebuilt``
flag) turns the look-up off.

>>> TARGETS
((8, 0), (9, 0))
>>> lookup("0" * 64) is None
True
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import sys
import threading
import zipfile
import zlib

from . import zip_index
from .counters import STATS

__all__ = ["TARGETS", "BASE_CC", "CUBIN_TARGETS", "ARCHIVE", "MANIFEST", "lookup", "lookup_cubin", "runs_cubin",
           "open_index", "manifest", "status", "pack", "make_cubins", "use_archive"]

#: the compute capabilities the shipped PTX is compiled for (the driver JITs it for later GPUs)
TARGETS = ((8, 0), (9, 0))
#: the oldest of them: a device below it compiles everything
BASE_CC = TARGETS[0]
#: the targets whose kernels ship as cubins (machine code of that major capability) instead of
#: PTX: the sm_90 set, which H100 and H200 load without the driver's compile; GPUs of other
#: capabilities compile the sm_80 PTX at load, once per machine (the driver caches it)
CUBIN_TARGETS = ((9, 0),)

_HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "prebuilt")
#: the shipped archive of kernel files
ARCHIVE = os.path.join(_HERE, "kernels.zip")
#: what made it (JSON)
MANIFEST = os.path.join(_HERE, "manifest.json")

_LOCK = threading.Lock()
_OPEN: dict = {}   # "archive" -> (ZipFile, frozenset of member names) or None; "index" -> zip_index.Reader


def use_archive(path: str | None) -> None:
    """Read kernels from the archive at ``path`` from now on (None: the shipped one); tests and
    the prebuild command's check use it."""
    global ARCHIVE
    with _LOCK:
        old = _OPEN.pop("archive", None)
        if old:
            old[0].close()
        index = _OPEN.pop("index", None)
        if index is not None:
            index.close()
        ARCHIVE = path or os.path.join(_HERE, "kernels.zip")


def _archive():
    with _LOCK:
        if "archive" not in _OPEN:
            try:
                z = zipfile.ZipFile(ARCHIVE)
                _OPEN["archive"] = (z, frozenset(z.namelist()))
            except (OSError, zipfile.BadZipFile):
                _OPEN["archive"] = None
        return _OPEN["archive"]


def _index():
    """The archive's index (:mod:`.zip_index`), or None where it has none."""
    index = _OPEN.get("index")
    if index is None:
        with _LOCK:
            index = _OPEN.get("index")
            if index is None:
                index = _OPEN["index"] = zip_index.Reader(ARCHIVE)
    return index if index.usable else None


def open_index() -> None:
    """Open the archive's index now (a first look-up then reads one member)."""
    _index()


def _read(name: str):
    """The bytes of archive member ``name``, or None: through the archive's index where it has
    one (a member looked up without reading the archive's directory, which costs a fresh
    process tens of milliseconds), else through :mod:`zipfile`."""
    index = _index()
    if index is not None:
        return index.read(name)
    opened = _archive()
    if opened is None or name not in opened[1]:
        return None
    try:
        with _LOCK:
            return opened[0].read(name)
    except (OSError, zipfile.BadZipFile, KeyError, ValueError, EOFError):
        return None


def _member(name: str):
    """``(entry, body)`` of archive member ``name`` (a first line ``entry sha256-of-body``,
    then the body's bytes), or None where it is missing, unreadable or its checksum does not
    match."""
    data = _read(name)
    if data is None:
        return None
    first, _, body = data.partition(b"\n")
    parts = first.split(b" ")
    if len(parts) != 2 or hashlib.sha256(body).hexdigest().encode() != parts[1]:
        return None
    return parts[0].decode("ascii", "replace"), body


def _member_bytes(entry: str, body: bytes) -> bytes:
    """The stored form of a kernel member (see :func:`_member`)."""
    return f"{entry} {hashlib.sha256(body).hexdigest()}\n".encode() + body


def lookup(key: str):
    """``(entry, ptx)`` of the shipped kernel of cache key ``key`` (its key for
    :data:`BASE_CC`), or None. A member whose checksum does not match is never returned."""
    found = _member(key + ".ptx")
    if found is None:
        return None
    try:
        ptx = found[1].decode("utf-8")
    except UnicodeDecodeError:
        return None
    STATS["prebuilt_hits"] += 1
    return found[0], ptx


def lookup_cubin(key: str):
    """``(entry, cubin)`` of the shipped machine code of cache key ``key`` (a key of one of
    :data:`CUBIN_TARGETS`), or None. A member whose checksum does not match is never
    returned."""
    found = _member(key + ".cubin")
    if found is not None:
        STATS["prebuilt_hits"] += 1
    return found


def runs_cubin(target, device_cc) -> bool:
    """Whether a device of compute capability ``device_cc`` runs machine code made for
    ``target``: the same major capability, the device's minor not older.

    >>> runs_cubin((9, 0), (9, 0)), runs_cubin((9, 0), (10, 0)), runs_cubin((8, 0), (8, 6))
    (True, False, True)
    """
    return target[0] == device_cc[0] and target[1] <= device_cc[1]


def skeleton(skey: str):
    """The shipped skeleton (:mod:`.linking`) of key ``skey``, or None."""
    data = _read(skey + ".skeleton")
    if data is None:
        return None
    try:
        return pickle.loads(data)
    except Exception:  # noqa: BLE001 - a damaged member, or numba types of another version
        return None


def manifest() -> dict | None:
    """The shipped archive's manifest, or None when there is none."""
    try:
        with open(MANIFEST, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def status(source_hash: str, numba_version: str, numba_cuda_version: str, python: str | None = None,
           module_hashes: dict | None = None) -> str:
    """One line on the shipped kernels: how many, for which GPU and compute capability, and
    whether they match this install (its kernel sources' hash, numba versions and Python's
    ``major.minor``, whose bytecode the keys digest; default: this interpreter's).  Where
    only some kernel modules changed or were added (``module_hashes``, this install's
    :func:`.kernel_sources.module_hashes`, against the manifest's), the kernels of the
    others still load: the line names the changed and the new ones.

    >>> status("x", "0", "0").startswith("prebuilt kernels:")
    True
    """
    m = manifest()
    if m is None or (_index() is None and _archive() is None):
        return "prebuilt kernels: none shipped (every specialisation compiles at first use)"
    cubin = [tuple(t) for t in m.get("cubin_targets", ())]
    ccs = ", ".join("sm_%d%d %s" % (t[0], t[1], "cubins" if tuple(t) in cubin else "PTX")
                    for t in m.get("targets", TARGETS))
    what = f"{m.get('kernels', '?')} ({ccs}), made on {m.get('gpu', '?')}"
    stale = []
    changed = added = None
    if m.get("source_hash") != source_hash:
        shipped = m.get("module_hashes")
        if shipped and module_hashes:
            changed = sorted(k for k in shipped if module_hashes.get(k) != shipped[k])
            added = sorted(k for k in module_hashes if k not in shipped)
        if changed is None or len(changed) == len(shipped):
            stale.append("the kernel sources changed since")
            changed = added = None
    if m.get("numba") != numba_version or m.get("numba_cuda") != numba_cuda_version:
        stale.append(f"made with numba {m.get('numba')} / numba-cuda {m.get('numba_cuda')}")
    python = python or "%d.%d" % sys.version_info[:2]
    made = ".".join(str(m.get("python", "?")).split(".")[:2])
    if made != python:
        stale.append(f"made with Python {made}, this is {python}")
    if stale:
        return f"prebuilt kernels: {what}; not used here ({'; '.join(stale)}): kernels compile at first use"
    parts = []
    for names, why in ((changed, "whose sources changed since"), (added, "new since")):
        if names:
            listed = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            parts.append(f"{listed} ({why})")
    if parts:
        return (f"prebuilt kernels: {what}; in use but for the kernels of {'; '.join(parts)}: those "
                "compile at first use")
    return f"prebuilt kernels: {what}; in use"


def _cache_files(cache_dir: str, suffix: str) -> list:
    files = []
    for sub in sorted(os.listdir(cache_dir)) if os.path.isdir(cache_dir) else []:
        folder = os.path.join(cache_dir, sub)
        if len(sub) == 2 and os.path.isdir(folder):
            files += [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(suffix)]
    return files


def pack(cache_dir: str, out_dir: str, meta: dict, skeleton_dirs=()) -> dict:
    """Pack every kernel file under ``cache_dir`` (a kernel cache filled for :data:`TARGETS`)
    and every skeleton (:mod:`.linking`) under ``skeleton_dirs`` (the caches of the warmup's
    stand-in user operators, each built there in full; a skeleton is keyed by everything but
    its operators, so any operator of the same kernel structure links into it) into
    ``out_dir/kernels.zip``, with the cubins beside the kernel files (:func:`make_cubins`), and
    write ``out_dir/manifest.json`` from ``meta`` plus the counts and sizes; returns the
    manifest. Members are written in key order with fixed dates, so
    the same kernels give the same archive."""
    from . import kernel_files  # noqa: PLC0415

    files = _cache_files(cache_dir, ".ptx")
    for folder in skeleton_dirs:
        files += _cache_files(folder, ".skeleton")
    os.makedirs(out_dir, exist_ok=True)
    archive = os.path.join(out_dir, "kernels.zip")
    tmp = archive + ".tmp"
    raw = skeleton_bytes = count = skeletons = cubins = cubin_bytes = 0
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_LZMA) as z:
        for path in sorted(files, key=os.path.basename):
            if path.endswith(".skeleton"):
                data = _shipped_skeleton(path)
                if data is None:
                    continue
                skeleton_bytes += len(data)
                skeletons += 1
            else:
                cached = kernel_files.read_cached(path)
                if cached is None:
                    continue
                entry, ptx = cached
                count += 1
                if os.path.exists(path[:-4] + ".cubin"):
                    with open(path[:-4] + ".cubin", "rb") as f:
                        code = f.read()
                    data = _member_bytes(entry, code)
                    cubin_bytes += len(code)
                    cubins += 1
                    path = path[:-4] + ".cubin"
                elif not ptx:
                    count -= 1   # a kernel file of a cubin that is gone
                    continue
                else:
                    data = _member_bytes(entry, ptx.encode())
                    raw += len(data)
            info = zipfile.ZipInfo(os.path.basename(path), date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_LZMA
            z.writestr(info, data)
    os.replace(tmp, archive)
    zip_index.write(archive)
    m = dict(meta, kernels=count, ptx_bytes=raw, skeletons=skeletons, skeleton_bytes=skeleton_bytes,
             cubins=cubins, cubin_bytes=cubin_bytes, cubin_targets=[list(t) for t in CUBIN_TARGETS],
             archive_bytes=os.path.getsize(archive), targets=[list(t) for t in TARGETS])
    with open(os.path.join(out_dir, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(m, f, indent=1, sort_keys=True)
        f.write("\n")
    if os.path.abspath(archive) == os.path.abspath(ARCHIVE):
        use_archive(archive)
    return m


def unpack_kernels(cache_dir: str) -> int:
    """Write the shipped archive's kernels into ``cache_dir`` as kernel files (for a prebuild
    that builds the skeletons alone); returns how many."""
    from . import kernel_files  # noqa: PLC0415

    opened = _archive()
    n = 0
    for name in sorted(opened[1]) if opened else ():
        if name.endswith(".ptx"):
            found = lookup(name[:-4])
            if found is not None:
                kernel_files.write_cached(os.path.join(cache_dir, name[:2], name), *found)
                n += 1
        elif name.endswith(".cubin"):
            found = lookup_cubin(name[:-6])
            if found is not None:
                entry, code = found
                kernel_files.write_atomic_bytes(os.path.join(cache_dir, name[:2], name), code)
                kernel_files.write_cached(os.path.join(cache_dir, name[:2], name[:-6] + ".ptx"), entry, "")
                n += 1
    return n


_TARGET_LINE = re.compile(r"^\.target\s+sm_(\d+)", re.M)


def _ptx_target(ptx: str):
    """The compute capability a PTX text is made for (``.target sm_90`` -> (9, 0)), or None."""
    m = _TARGET_LINE.search(ptx)
    if m is None:
        return None
    digits = m.group(1)
    return int(digits[:-1]), int(digits[-1])


def link_cubin(ptx: str, cc) -> bytes:
    """The cubin of PTX text ``ptx`` for compute capability ``cc``, linked by CUDA's linker
    (``cuda.core``: nvJitLink, or the driver's), with its default optimisation as the driver
    applies when it loads PTX."""
    try:
        from cuda.core import Linker, LinkerOptions, ObjectCode  # noqa: PLC0415
    except ImportError:  # cuda-core before 0.4
        from cuda.core.experimental import Linker, LinkerOptions, ObjectCode  # noqa: PLC0415
    obj = ObjectCode.from_ptx(ptx.encode(), name="kernel.ptx")
    return bytes(Linker(obj, options=LinkerOptions(arch="sm_%d%d" % tuple(cc))).link("cubin").code)


def _link_files(paths) -> int:
    from . import kernel_files  # noqa: PLC0415

    n = 0
    for path in paths:
        cached = kernel_files.read_cached(path)
        if cached is None:
            continue
        try:
            code = LINK[0](cached[1], _ptx_target(cached[1]))
        except Exception as exc:  # noqa: BLE001 - that kernel ships as PTX alone
            print(f"no cubin for {os.path.basename(path)}: {exc}", file=sys.stderr)
            continue
        kernel_files.write_atomic_bytes(path[:-4] + ".cubin", code)
        n += 1
    return n


#: the linker :func:`make_cubins` calls (tests put a stand-in here)
LINK = [link_cubin]


def make_cubins(cache_dir: str, jobs: int = 1) -> int:
    """Link a cubin beside every kernel file under ``cache_dir`` made for one of
    :data:`CUBIN_TARGETS` that has none yet (``jobs`` processes); returns how many were
    linked (a kernel the linker fails on ships as PTX alone, with a line on stderr).  Needs
    CUDA's linker (``cuda.core``: nvJitLink, or a GPU machine's driver)."""
    todo = []
    for path in _cache_files(cache_dir, ".ptx"):
        if os.path.exists(path[:-4] + ".cubin"):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
        if _ptx_target(head) in CUBIN_TARGETS:
            todo.append(path)
    if jobs <= 1 or len(todo) < 2 * jobs:
        return _link_files(todo)
    import concurrent.futures  # noqa: PLC0415
    import multiprocessing  # noqa: PLC0415

    chunks = [todo[i::jobs] for i in range(jobs)]
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as ex:
        return sum(ex.map(_link_files, chunks))


def _shipped_skeleton(path: str) -> bytes | None:
    """The pickled skeleton of the file at ``path``, or None where it is not a skeleton of
    this version."""
    try:
        with open(path, "rb") as f:
            data = zlib.decompress(f.read())
        sk = pickle.loads(data)
    except Exception:  # noqa: BLE001 - not a skeleton of this version
        return None
    return data if isinstance(sk, dict) and {"slots", "irs", "options"} <= sk.keys() else None
