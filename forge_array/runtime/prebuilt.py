"""Kernels shipped built: the standard operations' PTX in the package, loaded instead of compiled.

``python -m forge_array prebuild`` (on a GPU machine; see :mod:`forge_array._warmup`) runs the
standard reductions, scans and matrix-vector products for every standard dtype and every
layout class the dispatch picks, once per compute capability of :data:`TARGETS`: the baseline
sm_80 (PTX the driver JITs for every later GPU) and sm_90, whose plans pick kernels of their
own (the pipelined scan's bulk copies).  It packs the kernel files into
``forge_array/prebuilt/kernels.zip`` (each file LZMA-compressed, named by its cache key) with
``manifest.json`` beside it: the command, the commit, the GPU, the versions, the kernel
sources' hash, the number of kernels and their sizes.

A specialisation missing from the memory and disk caches is looked up here under the cache
key it would have had when compiled for the newest target the device runs (the device's own
capability where it is a target); a hit is written into the disk cache
under the device's own key (a later process finds it there) and loaded through CuPy like any
cached kernel, so numba neither types nor compiles it.  A key digests the kernel sources, the
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
import sys
import threading
import zipfile
import zlib

from .counters import STATS

__all__ = ["TARGETS", "BASE_CC", "ARCHIVE", "MANIFEST", "lookup", "manifest", "status", "pack", "use_archive"]

#: the compute capabilities the shipped PTX is compiled for (the driver JITs it for later GPUs)
TARGETS = ((8, 0), (9, 0))
#: the oldest of them: a device below it compiles everything
BASE_CC = TARGETS[0]

_HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "prebuilt")
#: the shipped archive of kernel files
ARCHIVE = os.path.join(_HERE, "kernels.zip")
#: what made it (JSON)
MANIFEST = os.path.join(_HERE, "manifest.json")

_LOCK = threading.Lock()
_OPEN: dict = {}   # "archive" -> (ZipFile, frozenset of member names) or None


def use_archive(path: str | None) -> None:
    """Read kernels from the archive at ``path`` from now on (None: the shipped one); tests and
    the prebuild command's check use it."""
    global ARCHIVE
    with _LOCK:
        old = _OPEN.pop("archive", None)
        if old:
            old[0].close()
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


def lookup(key: str):
    """``(entry, ptx)`` of the shipped kernel of cache key ``key`` (its key for
    :data:`BASE_CC`), or None. A member whose checksum does not match is never returned."""
    opened = _archive()
    if opened is None or key + ".ptx" not in opened[1]:
        return None
    z = opened[0]
    try:
        with _LOCK:
            data = z.read(key + ".ptx")
        text = data.decode("utf-8")
    except (OSError, zipfile.BadZipFile, KeyError, UnicodeDecodeError, ValueError):
        return None
    first, _, ptx = text.partition("\n")
    parts = first.split(" ")
    if len(parts) != 2 or hashlib.sha256(ptx.encode()).hexdigest() != parts[1]:
        return None
    STATS["prebuilt_hits"] += 1
    return parts[0], ptx


def skeleton(skey: str):
    """The shipped skeleton (:mod:`.linking`) of key ``skey``, or None."""
    opened = _archive()
    if opened is None or skey + ".skeleton" not in opened[1]:
        return None
    try:
        with _LOCK:
            data = opened[0].read(skey + ".skeleton")
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


def status(source_hash: str, numba_version: str, numba_cuda_version: str, python: str | None = None) -> str:
    """One line on the shipped kernels: how many, for which GPU and compute capability, and
    whether they match this install (its kernel sources' hash, numba versions and Python's
    ``major.minor``, whose bytecode the keys digest; default: this interpreter's).

    >>> status("x", "0", "0").startswith("prebuilt kernels:")
    True
    """
    m = manifest()
    if m is None or _archive() is None:
        return "prebuilt kernels: none shipped (every specialisation compiles at first use)"
    ccs = ", ".join("sm_%d%d" % tuple(t) for t in m.get("targets", TARGETS))
    what = f"{m.get('kernels', '?')} ({ccs} PTX), made on {m.get('gpu', '?')}"
    stale = []
    if m.get("source_hash") != source_hash:
        stale.append("the kernel sources changed since")
    if m.get("numba") != numba_version or m.get("numba_cuda") != numba_cuda_version:
        stale.append(f"made with numba {m.get('numba')} / numba-cuda {m.get('numba_cuda')}")
    python = python or "%d.%d" % sys.version_info[:2]
    made = ".".join(str(m.get("python", "?")).split(".")[:2])
    if made != python:
        stale.append(f"made with Python {made}, this is {python}")
    if stale:
        return f"prebuilt kernels: {what}; not used here ({'; '.join(stale)}): kernels compile at first use"
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
    ``out_dir/kernels.zip`` and write ``out_dir/manifest.json`` from ``meta`` plus the counts
    and sizes; returns the manifest. Members are written in key order with fixed dates, so
    the same kernels give the same archive."""
    from . import kernel_files  # noqa: PLC0415

    files = _cache_files(cache_dir, ".ptx")
    for folder in skeleton_dirs:
        files += _cache_files(folder, ".skeleton")
    os.makedirs(out_dir, exist_ok=True)
    archive = os.path.join(out_dir, "kernels.zip")
    tmp = archive + ".tmp"
    raw = skeleton_bytes = count = skeletons = 0
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
                data = f"{entry} {hashlib.sha256(ptx.encode()).hexdigest()}\n{ptx}".encode()
                raw += len(data)
                count += 1
            info = zipfile.ZipInfo(os.path.basename(path), date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_LZMA
            z.writestr(info, data)
    os.replace(tmp, archive)
    m = dict(meta, kernels=count, ptx_bytes=raw, skeletons=skeletons, skeleton_bytes=skeleton_bytes,
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
    return n


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
