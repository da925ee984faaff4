"""Kernels shipped built: the archive's packing and look-up, the rule that a kernel whose
sources (or numba) changed is never loaded from it, and the compiler's use of it.  Runs
without a GPU: the kernel files are made up, the compiler's look-up is called directly."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile

import numpy as np
import pytest

from forge_array import runtime
from forge_array.runtime import (
    STATS,
    compiler,
    config,
    kernel_files,
    kernel_lookup,
    kernel_sources,
    prebuilt,
    zip_index,
)
from forge_array.runtime.flags import flags


def _ptx(n):
    return f"//\n// made-up kernel {n}\n.version 8.0\n.target sm_80\n.visible .entry k{n}()\n{{\n ret;\n}}\n"


def _cache_with(tmp_path, keys):
    cache = tmp_path / "cache"
    for n, key in enumerate(keys):
        kernel_files.write_cached(str(cache / key[:2] / f"{key}.ptx"), f"k{n}", _ptx(n))
    return str(cache)


@pytest.fixture
def archive(tmp_path):
    """Use an archive of ``tmp_path`` while the test runs; the shipped one again after."""
    yield str(tmp_path / "out" / "kernels.zip")
    prebuilt.use_archive(None)


def test_pack_then_lookup_returns_each_kernel(tmp_path, archive):
    keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(5)]
    m = prebuilt.pack(_cache_with(tmp_path, keys), str(tmp_path / "out"), {"source_hash": "s"})
    assert m["kernels"] == 5 and m["archive_bytes"] > 0 and m["ptx_bytes"] > m["archive_bytes"] // 10
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["kernels"] == 5
    prebuilt.use_archive(archive)
    hits = STATS["prebuilt_hits"]
    for n, key in enumerate(keys):
        assert prebuilt.lookup(key) == (f"k{n}", _ptx(n))
    assert prebuilt.lookup("f" * 64) is None
    assert STATS["prebuilt_hits"] == hits + 5


def _packed(tmp_path, count):
    keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(count)]
    prebuilt.pack(_cache_with(tmp_path, keys), str(tmp_path / "out"), {})
    return keys, str(tmp_path / "out" / "kernels.zip")


def test_pack_writes_the_index_and_lookups_read_through_it(tmp_path, archive, monkeypatch):
    """The archive's index finds every member without the archive's directory: a look-up
    never opens the archive with zipfile where the index is there."""
    keys, path = _packed(tmp_path, 40)
    assert os.path.exists(zip_index.index_path(path))
    reader = zip_index.Reader(path)
    with zipfile.ZipFile(path) as z:
        assert all(reader.read(n) == z.read(n) for n in z.namelist())
    prebuilt.use_archive(archive)
    monkeypatch.setattr(prebuilt.zipfile, "ZipFile", None)   # any use of zipfile would fail
    assert [prebuilt.lookup(k)[0] for k in keys] == [f"k{n}" for n in range(40)]
    assert prebuilt.lookup("f" * 64) is None and prebuilt.lookup_cubin(keys[0]) is None


def test_the_index_of_another_archive_is_never_used(tmp_path, archive):
    """An archive rewritten after its index was made (same size or not) is read with zipfile;
    an index record leading to another member's header reads as missing."""
    keys, path = _packed(tmp_path, 3)
    index = open(zip_index.index_path(path), "rb").read()
    with zipfile.ZipFile(path, "a") as z:
        z.writestr("ff" * 32 + ".ptx", f"k9 {hashlib.sha256(_ptx(9).encode()).hexdigest()}\n{_ptx(9)}")
    assert not zip_index.Reader(path).usable
    prebuilt.use_archive(archive)
    assert prebuilt.lookup("ff" * 32) == ("k9", _ptx(9)) and prebuilt.lookup(keys[1]) == ("k1", _ptx(1))
    os.unlink(zip_index.index_path(path))
    prebuilt.use_archive(archive)
    assert prebuilt.lookup(keys[2]) == ("k2", _ptx(2))   # no index: zipfile
    with open(zip_index.index_path(path), "wb") as f:      # a damaged index
        f.write(index[:50])
    assert not zip_index.Reader(path).usable


def test_an_archive_of_other_names_has_no_index(tmp_path):
    path = str(tmp_path / "a.zip")
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("ab" * 32 + ".ptx", b"x")
        z.writestr("readme.txt", b"y")
    assert zip_index.write(path) == 0 and not os.path.exists(zip_index.index_path(path))


def test_pack_is_reproducible(tmp_path, archive):
    keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(3)]
    cache = _cache_with(tmp_path, keys)
    prebuilt.pack(cache, str(tmp_path / "out"), {})
    first = (tmp_path / "out" / "kernels.zip").read_bytes()
    prebuilt.pack(cache, str(tmp_path / "out"), {})
    assert (tmp_path / "out" / "kernels.zip").read_bytes() == first


def test_a_damaged_member_is_never_returned(tmp_path, archive):
    key = "ab" * 32
    os.makedirs(os.path.dirname(archive))
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(f"{key}.ptx", f"k0 {'0' * 64}\n{_ptx(0)}")      # wrong checksum
        z.writestr(f"{'cd' * 32}.ptx", "no header line")
    prebuilt.use_archive(archive)
    assert prebuilt.lookup(key) is None
    assert prebuilt.lookup("cd" * 32) is None


def test_no_archive_means_no_kernels(tmp_path, archive):
    prebuilt.use_archive(str(tmp_path / "missing.zip"))
    assert prebuilt.lookup("ab" * 32) is None


def test_status_says_whether_the_archive_matches(tmp_path, archive, monkeypatch):
    keys = ["ab" * 32]
    out = tmp_path / "out"
    prebuilt.pack(_cache_with(tmp_path, keys), str(out), {"source_hash": "h", "numba": "1", "numba_cuda": "2",
                                                           "gpu": "Some GPU", "python": "3.12.3"})
    prebuilt.use_archive(archive)
    monkeypatch.setattr(prebuilt, "MANIFEST", str(out / "manifest.json"))
    assert prebuilt.status("h", "1", "2", "3.12").endswith("in use")
    assert "Some GPU" in prebuilt.status("h", "1", "2", "3.12")
    assert "the kernel sources changed since" in prebuilt.status("other", "1", "2", "3.12")
    assert "made with numba 1 / numba-cuda 2" in prebuilt.status("h", "1", "3", "3.12")
    assert "made with Python 3.12, this is 3.11" in prebuilt.status("h", "1", "2", "3.11")
    monkeypatch.setattr(prebuilt, "MANIFEST", str(tmp_path / "none.json"))
    assert "none shipped" in prebuilt.status("h", "1", "2")


def test_status_names_the_kernel_modules_whose_shipped_kernels_are_stale(tmp_path, archive, monkeypatch):
    out = tmp_path / "out"
    shipped = {"kernels/copy.py": "c", "kernels/reduce.py": "r", "kernels/scan/tile.py": "t"}
    prebuilt.pack(_cache_with(tmp_path, ["ab" * 32]), str(out),
                  {"source_hash": "h", "numba": "1", "numba_cuda": "2", "python": "3.12.3", "module_hashes": shipped})
    prebuilt.use_archive(archive)
    monkeypatch.setattr(prebuilt, "MANIFEST", str(out / "manifest.json"))
    line = prebuilt.status("other", "1", "2", "3.12", module_hashes=dict(shipped, **{"kernels/scan/tile.py": "t2"}))
    assert "in use but for the kernels of kernels/scan/tile.py (whose sources changed since)" in line
    line = prebuilt.status("other", "1", "2", "3.12", module_hashes=dict(shipped, **{"kernels/compaction.py": "n"}))
    assert line.endswith("in use but for the kernels of kernels/compaction.py (new since): those compile at first use")
    everything = {k: v + "2" for k, v in shipped.items()}
    assert "the kernel sources changed since" in prebuilt.status("other", "1", "2", "3.12", module_hashes=everything)
    assert "the kernel sources changed since" in prebuilt.status("other", "1", "2", "3.12")   # no hashes to compare


# ----------------------------------------------------------------------------- the compiler


def _spec():
    from forge_array.kernels import copy as kcopy

    pt = runtime.ptr_t("float32")
    return kcopy.make_copy_scalar, (np.float32, 7), (pt, pt, runtime.i64), None


@pytest.fixture
def device_cc(monkeypatch, tmp_path):
    """A device of compute capability 9.0 and an empty kernel cache under ``tmp_path``."""
    monkeypatch.setattr(runtime.backend, "target_cc", lambda: (9, 0))
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path / "kcache"))
    compiler._BY_KEY.clear()
    yield (9, 0)
    compiler._BY_KEY.clear()


def _archive_of(tmp_path, spec, cc=prebuilt.BASE_CC):
    key = compiler._key(*spec, cc)
    prebuilt.pack(_cache_with(tmp_path, [key]), str(tmp_path / "out"), {})
    prebuilt.use_archive(str(tmp_path / "out" / "kernels.zip"))
    return key


def test_the_compiler_loads_a_shipped_kernel_into_the_disk_cache(tmp_path, archive, device_cc):
    spec = _spec()
    _archive_of(tmp_path, spec)
    key = compiler._key(*spec, device_cc)
    k = compiler._from_prebuilt(*spec, "make_copy_scalar", key)
    assert k is not None and k.entry == "k0" and k.ptx == _ptx(0) and k.key == key
    # written under the device's own key: a later process finds it in the disk cache
    assert kernel_files.read_cached(kernel_files.cache_path(key)) == ("k0", _ptx(0))


def test_the_exact_mode_loads_the_compile_target_s_own_kernel_only(tmp_path, archive, device_cc):
    """A prebuild extending the archive reuses a kernel made for the target it builds, never
    an older target's PTX under the newer target's key."""
    spec = _spec()
    _archive_of(tmp_path, spec)   # made for sm_80 alone; the device compiles for 9.0
    key = compiler._key(*spec, device_cc)
    with flags(prebuilt="exact"):
        assert compiler._from_prebuilt(*spec, "make_copy_scalar", key) is None
    assert compiler._from_prebuilt(*spec, "make_copy_scalar", key) is not None   # a user's process takes it


def test_the_prebuilt_flag_turns_the_lookup_off(tmp_path, archive, device_cc):
    spec = _spec()
    _archive_of(tmp_path, spec)
    with flags(prebuilt=False):
        assert compiler._from_prebuilt(*spec, "make_copy_scalar", compiler._key(*spec, device_cc)) is None


def test_a_kernel_whose_sources_changed_is_never_loaded(tmp_path, archive, device_cc, monkeypatch):
    spec = _spec()
    _archive_of(tmp_path, spec)
    # the kernel's sources change after the archive was made: its key changes with them
    monkeypatch.setattr(kernel_sources, "factory_hash", lambda factory: "0" * 64)
    key = compiler._key(*spec, device_cc)
    assert compiler._from_prebuilt(*spec, "make_copy_scalar", key) is None
    assert not os.path.exists(kernel_files.cache_path(key))


def test_another_numba_never_loads_it(tmp_path, archive, device_cc, monkeypatch):
    spec = _spec()
    _archive_of(tmp_path, spec)
    monkeypatch.setattr(compiler, "_NUMBA_CUDA_VERSION", "0.0.0")
    assert compiler._from_prebuilt(*spec, "make_copy_scalar", compiler._key(*spec, device_cc)) is None


def test_another_factory_constant_misses(tmp_path, archive, device_cc):
    fn, args, argtypes, lb = _spec()
    _archive_of(tmp_path, (fn, args, argtypes, lb))
    other = (fn, (args[0], 8), argtypes, lb)
    assert compiler._from_prebuilt(*other, "make_copy_scalar", compiler._key(*other, device_cc)) is None


def test_the_device_own_capability_comes_first(tmp_path, archive, device_cc):
    spec = _spec()
    keys = [compiler._key(*spec, (8, 0)), compiler._key(*spec, (9, 0))]
    prebuilt.pack(_cache_with(tmp_path, keys), str(tmp_path / "out"), {})
    prebuilt.use_archive(archive)
    k = compiler._from_prebuilt(*spec, "make_copy_scalar", keys[1])
    assert k.entry == "k1"      # the sm_90 kernel, not the baseline's


def test_a_newer_device_takes_the_newest_target(tmp_path, archive, device_cc, monkeypatch):
    spec = _spec()
    _archive_of(tmp_path, spec, cc=(9, 0))
    monkeypatch.setattr(runtime.backend, "target_cc", lambda: (10, 0))
    key = compiler._key(*spec, (10, 0))
    assert compiler._from_prebuilt(*spec, "make_copy_scalar", key).entry == "k0"


def test_a_device_older_than_the_baseline_never_loads_it(tmp_path, archive, device_cc, monkeypatch):
    spec = _spec()
    _archive_of(tmp_path, spec)
    monkeypatch.setattr(runtime.backend, "target_cc", lambda: (7, 5))
    assert compiler._from_prebuilt(*spec, "make_copy_scalar", compiler._key(*spec, (7, 5))) is None


def test_target_cc_refuses_a_newer_capability(monkeypatch):
    from forge_array.runtime.flags import FLAGS

    cell = FLAGS["target_cc"].cell
    old = cell[0]
    try:
        cell[0] = (99, 0)
        with pytest.raises(ValueError, match="FORGE_ARRAY_TARGET_CC=99.0 is newer"):
            runtime.backend.target_cc()
        cell[0] = (8, 0)
        assert runtime.backend.target_cc() == (8, 0)
    finally:
        cell[0] = old


def test_the_source_hash_covers_the_kernel_sources_only():
    assert {"kernels/**/*.py", "intrinsics/**/*.py", "runtime/compiler.py", "runtime/kernel_types.py"} <= set(
        kernel_sources.KERNEL_SOURCES)
    assert not any(p.startswith("runtime/prebuilt") or p.startswith("runtime/launching") or p == "runtime/**/*.py"
                   for p in kernel_sources.KERNEL_SOURCES)
    assert "kernels/**/*.py" not in kernel_sources.SHARED_SOURCES


@pytest.fixture
def source_tree(monkeypatch, tmp_path):
    """A copy of the kernel sources that :mod:`forge_array.runtime.kernel_sources` reads."""
    import shutil

    root = tmp_path / "forge_array"
    here = os.path.join(os.path.dirname(compiler.__file__), "..")
    for part in ("intrinsics", "kernels", "runtime"):
        shutil.copytree(os.path.join(here, part), root / part, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(kernel_sources, "__file__", str(root / "runtime" / "kernel_sources.py"))
    kernel_sources.forget()
    yield root
    kernel_sources.forget()


def _edited(root, rel):
    with open(root / rel, "a") as f:
        f.write("\n# edited\n")
    kernel_sources.forget()


def test_editing_the_simulator_leaves_the_source_hash(source_tree):
    """The simulator's intrinsics never become GPU code: a change there keeps every shipped
    and cached kernel; a change to a CUDA intrinsic does not."""
    hashes = [kernel_sources.source_hash()]
    for edit in ("intrinsics/sim_threads.py", "intrinsics/cuda_warp.py"):
        _edited(source_tree, edit)
        hashes.append(kernel_sources.source_hash())
    assert hashes[0] == hashes[1] != hashes[2]


_FAMILIES = ("kernels/scan/tile.py", "kernels/reduce.py", "kernels/elementwise.py", "kernels/rowcol/rows.py",
             "kernels/copy.py")


@pytest.mark.parametrize("edit, changed", [
    ("kernels/scan/tile.py", {"kernels/scan/tile.py"}),
    ("kernels/reduce.py", {"kernels/reduce.py", "kernels/elementwise.py"}),   # the map imports its modes
    ("kernels/copy.py", {"kernels/copy.py"}),
    ("kernels/__init__.py", set(_FAMILIES)),
    ("intrinsics/cuda_warp.py", set(_FAMILIES)),
    ("runtime/compiler.py", set(_FAMILIES)),
    ("intrinsics/sim_threads.py", set()),
    ("runtime/launching.py", set()),   # the launch path shapes no kernel code
])
def test_a_kernel_family_s_key_follows_its_own_sources(source_tree, edit, changed):
    """Editing one kernel module changes the source hash of the kernels of that module and
    of the modules that import it, and of no other: their disk-cached and shipped kernels
    stay valid; a shared source (intrinsics, compiler, package) changes every kernel's."""
    before = {m: kernel_sources.module_hash(source_tree / m) for m in _FAMILIES}
    _edited(source_tree, edit)
    after = {m: kernel_sources.module_hash(source_tree / m) for m in _FAMILIES}
    assert {m for m in _FAMILIES if before[m] != after[m]} == changed


def test_the_key_of_a_kernel_takes_its_factory_s_sources():
    from forge_array.kernels import copy as kcopy
    from forge_array.kernels import reduce as kreduce

    fh = kernel_sources.factory_hash
    assert fh(kcopy.make_copy_scalar) == kernel_sources.module_hash(kcopy.__file__)
    assert fh(kcopy.make_copy_scalar) != fh(kreduce.make_reduce_kernel)
    assert fh(print) == kernel_sources.shared_hash()   # no source file


def _parsed_imports(path):
    """What every import statement of ``path`` names, by Python's parser (the reference)."""
    import ast

    name = kernel_sources._module_name(path)
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(open(path, "rb").read(), path)):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - (node.level - 1)] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out |= {mod} | {f"{mod}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return out


def test_the_import_scan_finds_what_the_parser_finds_in_every_kernel_module():
    """A kernel's key follows the kernel modules its module imports; they are found by a pattern
    over the source lines instead of parsing: in every kernel module of the package it finds
    exactly the imports Python's parser finds (a form the pattern misses shows here)."""
    import glob

    files = glob.glob(os.path.join(kernel_sources._root(), "kernels", "**", "*.py"), recursive=True)
    assert len(files) > 10
    for path in files:
        assert set(kernel_sources._imported(path)) == _parsed_imports(path), path


def test_the_import_scan_reads_every_form_of_import(source_tree):
    path = source_tree / "kernels" / "scan" / "m.py"
    path.write_text("import numpy as np, math\nfrom .. import copy, reduce as r  # two\n"
                    "def f():\n    from .tile import (a,  # one\n        b as c)\n    from . import state\n"
                    "from numba import cuda\n")
    found = set(kernel_sources._imported(str(path)))
    assert {"numpy", "math", "forge_array.kernels", "forge_array.kernels.copy", "forge_array.kernels.reduce",
            "forge_array.kernels.scan.tile.a", "forge_array.kernels.scan.tile.b", "forge_array.kernels.scan.state",
            "numba.cuda"} <= found == _parsed_imports(str(path))


def test_pack_ships_every_skeleton_of_the_stand_in_caches_and_nothing_else(tmp_path, archive):
    import pickle
    import zlib

    keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(2)]
    cache = _cache_with(tmp_path, keys)
    folder = tmp_path / "operators"

    def skeleton(key, value, root=folder):
        path = root / key[:2] / f"{key}.skeleton"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(zlib.compress(pickle.dumps(value)))

    # a stand-in's own operator and forge_array's operators around it (vecmat's swapped map)
    made = {"slots": [], "irs": ["; ir"], "options": {}}
    skeleton("a" * 64, dict(made, operators=["forge_array._warmup._user_plus"]))
    skeleton("b" * 64, dict(made, operators=["forge_array.primitives.matvec._swap.<locals>.swapped"]))
    skeleton("c" * 64, {"not": "a skeleton"})
    (folder / "dd").mkdir()
    (folder / "dd" / ("d" * 64 + ".skeleton")).write_bytes(b"damaged")
    skeleton("e" * 64, dict(made, operators=["user.f"]), root=tmp_path / "cache")   # not shipped
    m = prebuilt.pack(cache, str(tmp_path / "out"), {}, skeleton_dirs=(str(folder),))
    assert m["kernels"] == 2 and m["skeletons"] == 2
    prebuilt.use_archive(archive)
    assert prebuilt.skeleton("a" * 64)["operators"] == ["forge_array._warmup._user_plus"]
    assert prebuilt.skeleton("b" * 64) is not None
    assert prebuilt.skeleton("c" * 64) is None and prebuilt.skeleton("d" * 64) is None
    assert prebuilt.skeleton("e" * 64) is None
    m = prebuilt.pack(cache, str(tmp_path / "out"), {})
    assert m["skeletons"] == 0


# ----------------------------------------------------------------------------- cubins


def _ptx_for(n, cc):
    return _ptx(n).replace(".target sm_80", ".target sm_%d%d" % cc)


def _fake_link(ptx, cc):
    return b"\x7fELF cubin for sm_%d%d of " % tuple(cc) + ptx.encode()[-40:]


def test_make_cubins_links_the_cubin_targets_kernels_once(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    keys = {cc: hashlib.sha256(repr(cc).encode()).hexdigest() for cc in ((8, 0), (9, 0), (10, 0))}
    for n, (cc, key) in enumerate(keys.items()):
        kernel_files.write_cached(str(cache / key[:2] / f"{key}.ptx"), f"k{n}", _ptx_for(n, cc))
    calls = []
    monkeypatch.setattr(prebuilt, "LINK", [lambda ptx, cc: calls.append(cc) or _fake_link(ptx, cc)])
    assert prebuilt.CUBIN_TARGETS == ((9, 0),)
    assert prebuilt.make_cubins(str(cache)) == 1 and calls == [(9, 0)]
    made = sorted(p.name for p in cache.rglob("*.cubin"))
    assert made == [keys[(9, 0)] + ".cubin"]
    assert prebuilt.make_cubins(str(cache)) == 0 and calls == [(9, 0)]   # linked once


def _archive_with_cubin(tmp_path, monkeypatch, spec, target=(9, 0), also_ptx_of=None):
    """An archive of the kernel ``spec`` for ``target``, linked to a (made-up) cubin, and with
    the PTX of ``also_ptx_of`` (another target) beside it."""
    key = compiler._key(*spec, target)
    cache = tmp_path / "cache"
    kernel_files.write_cached(str(cache / key[:2] / f"{key}.ptx"), "k0", _ptx_for(0, target))
    if also_ptx_of:
        other = compiler._key(*spec, also_ptx_of)
        kernel_files.write_cached(str(cache / other[:2] / f"{other}.ptx"), "k1", _ptx_for(1, also_ptx_of))
    monkeypatch.setattr(prebuilt, "LINK", [_fake_link])
    assert prebuilt.make_cubins(str(cache)) == 1
    m = prebuilt.pack(str(cache), str(tmp_path / "out"), {})
    prebuilt.use_archive(str(tmp_path / "out" / "kernels.zip"))
    return key, m


def test_pack_ships_a_cubin_instead_of_the_ptx_and_lookup_checks_it(tmp_path, archive, monkeypatch):
    key, m = _archive_with_cubin(tmp_path, monkeypatch, _spec())
    assert m["kernels"] == 1 and m["cubins"] == 1 and m["cubin_bytes"] > 0 and m["cubin_targets"] == [[9, 0]]
    assert m["ptx_bytes"] == 0 and prebuilt.lookup(key) is None
    assert prebuilt.lookup_cubin(key) == ("k0", _fake_link(_ptx_for(0, (9, 0)), (9, 0)))
    assert prebuilt.lookup_cubin("f" * 64) is None
    # a member whose checksum does not match is never returned
    with zipfile.ZipFile(archive, "a") as z:
        z.writestr("ab" * 32 + ".cubin", b"k9 " + b"0" * 64 + b"\nnot this")
    prebuilt.use_archive(archive)
    assert prebuilt.lookup_cubin("ab" * 32) is None
    # unpacking writes it back as a kernel file without PTX beside its cubin, which packs again
    out = tmp_path / "unpacked"
    assert prebuilt.unpack_kernels(str(out)) == 1
    assert (out / key[:2] / f"{key}.cubin").read_bytes() == prebuilt.lookup_cubin(key)[1]
    assert kernel_files.read_cached(str(out / key[:2] / f"{key}.ptx")) == ("k0", "")
    again = prebuilt.pack(str(out), str(tmp_path / "again"), {})
    assert again["kernels"] == again["cubins"] == 1


def _loads(monkeypatch, ok=True):
    """The driver stand-in: loading a cubin succeeds (``ok``) or fails as a driver's would."""
    loaded = []

    def load(key, entry, ptx=None):
        if os.path.exists(kernel_files.cubin_path(key)) and ok:
            loaded.append(key)
            return ("function", entry)
        return None

    monkeypatch.setattr(kernel_files, "load_function", load)
    monkeypatch.setattr(kernel_lookup, "_adopt", lambda k, fn: k._fns.__setitem__(0, fn))
    return loaded


def test_the_compiler_takes_the_cubin_a_device_runs(tmp_path, archive, device_cc, monkeypatch):
    spec = _spec()
    key, _ = _archive_with_cubin(tmp_path, monkeypatch, spec)
    monkeypatch.setattr(runtime.backend, "device_info", lambda *a: {"cc": (9, 0)})
    loaded = _loads(monkeypatch)
    k = compiler._from_prebuilt(*spec, "make_copy_scalar", key)
    assert k.entry == "k0" and k.ptx == "" and k._fns[0] == ("function", "k0") and loaded == [key]
    assert open(kernel_files.cubin_path(key), "rb").read() == prebuilt.lookup_cubin(key)[1]
    # a later process finds it in the disk cache: a kernel file without PTX beside the cubin
    compiler._BY_KEY.clear()
    k = compiler._from_caches(key, "make_copy_scalar", spec[2])
    assert k.entry == "k0" and k._fns[0] == ("function", "k0")


def test_a_cubin_the_driver_refuses_is_never_used(tmp_path, archive, device_cc, monkeypatch):
    spec = _spec()
    key, _ = _archive_with_cubin(tmp_path, monkeypatch, spec)
    monkeypatch.setattr(runtime.backend, "device_info", lambda *a: {"cc": (9, 0)})
    _loads(monkeypatch, ok=False)
    assert compiler._from_prebuilt(*spec, "make_copy_scalar", key) is None   # compiled instead
    assert compiler._from_caches(key, "make_copy_scalar", spec[2]) is None
    # a kernel file of machine code alone whose cubin fails is removed from the disk cache
    kernel_files.write_cached(kernel_files.cache_path(key), "k0", "")
    assert compiler._from_caches(key, "make_copy_scalar", spec[2]) is None
    assert not os.path.exists(kernel_files.cache_path(key))


def test_a_device_of_another_major_capability_takes_the_ptx_of_an_older_target(tmp_path, archive, device_cc,
                                                                                monkeypatch):
    spec = _spec()
    _archive_with_cubin(tmp_path, monkeypatch, spec, also_ptx_of=(8, 0))
    monkeypatch.setattr(runtime.backend, "target_cc", lambda: (10, 0))
    monkeypatch.setattr(runtime.backend, "device_info", lambda *a: {"cc": (10, 0)})
    loaded = _loads(monkeypatch)
    key = compiler._key(*spec, (10, 0))
    k = compiler._from_prebuilt(*spec, "make_copy_scalar", key)
    assert k.entry == "k1" and k.ptx == _ptx_for(1, (8, 0)) and loaded == []
    assert not os.path.exists(kernel_files.cubin_path(key))
