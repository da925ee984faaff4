"""Kernels named without numba (runtime/factories.py, runtime/param_types.py): parameter types
that print as numba's, keys equal to the compiler's, the fingerprint tables and their
validity, and the planning modules importing with numba unavailable."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from forge_array import ops
from forge_array.runtime import compiler, factories, kernel_sources, param_types
from forge_array.runtime.kernel_types import numba_type, ptr_t, tuple_ptr_t

numba_types = pytest.importorskip("numba.core.types")


def _numba_cases():
    nt = numba_types
    P = param_types
    return [
        (P.ptr("float32"), ptr_t("float32")),
        (P.ptr("bool"), ptr_t("bool")),
        (P.ptr("complex128"), ptr_t("complex128")),
        (P.scalar("float16"), numba_type("float16")),
        (P.I64, nt.int64), (P.U32, nt.uint32), (P.F64, nt.float64),
        (P.tuple_of(()), nt.Tuple(())),
        (P.tuple_ptr(("int8",)), tuple_ptr_t(("int8",))),
        (P.tuple_ptr(("float32", "float64")), tuple_ptr_t(("float32", "float64"))),
        (P.tuple_of((P.tuple_ptr(("float32", "float32")), P.ptr("uint8"))),
         nt.Tuple((tuple_ptr_t(("float32", "float32")), ptr_t("uint8")))),
        (P.unituple(P.I64, 4), nt.UniTuple(nt.int64, 4)),
    ]


def test_parameter_types_print_as_numbas():
    for ours, theirs in _numba_cases():
        assert repr(ours) == repr(theirs)
        assert param_types.to_numba(ours) == theirs
    ours, theirs = zip(*_numba_cases())
    assert str(tuple(ours)) == str(tuple(theirs))   # what a key digests


def test_parameter_types_are_interned_and_checked():
    P = param_types
    assert P.tuple_of((P.I64, P.I64)) is P.unituple(P.I64, 2) is P.tuple_of([P.I64, P.I64])
    assert P.ptr(np.float32) is P.ptr("float32")
    with pytest.raises(TypeError, match="parameter types"):
        P.tuple_of((P.I64, "int64"))
    with pytest.raises(TypeError, match="no kernel parameter type"):
        P.ptr(np.dtype([("a", "f4")]))


def test_packing_takes_plain_and_numba_types_alike():
    from forge_array.runtime.launching import _make_flattener, _param_struct

    P = param_types
    plain = (P.tuple_ptr(("float32", "int64")), P.I64, P.scalar("complex64"), P.F32)
    theirs = tuple(param_types.to_numba(t) for t in plain)
    assert _param_struct(plain).format == _param_struct(theirs).format == "<QQqfff"
    args = ((1, 2), 3, 4 + 5j, 6.0)
    assert _make_flattener(plain)(args) == _make_flattener(theirs)(args) == (1, 2, 3, 4.0, 5.0, 6.0)


@pytest.fixture
def table(monkeypatch, tmp_path):
    """A shipped table of the factories named so far, written to ``tmp_path``."""
    def make(entries=None):
        path = str(tmp_path / "factories.json.z")
        monkeypatch.setattr(factories, "TABLE", path)
        monkeypatch.setattr(factories, "_TABLES", {"disk": {}})
        factories.write_table(path, factories.table_entries(factories.known()) if entries is None else entries)
        return path
    return make


def _specialisations(monkeypatch):
    """(factory, constants, argument types, launch bounds) of the kernels the planners ask
    for while sums, axis sums, products and scans run."""
    import forge_array as xp

    seen = []
    real = factories.kernel

    def spy(f, fargs, argtypes, launch_bounds=None):
        seen.append((f, fargs, argtypes, launch_bounds))
        return real(f, fargs, argtypes, launch_bounds)

    monkeypatch.setattr(factories, "kernel", spy)
    from forge_array.runtime import caches

    caches.clear_all()   # every launch plans afresh
    rng = np.random.default_rng(3)
    dev = xp.__array_namespace_info__().default_device()
    a = xp.asarray(rng.standard_normal((37, 33)).astype(np.float32), device=dev)
    v = xp.asarray(rng.standard_normal(33).astype(np.float32), device=dev)
    for r in (xp.sum(a), xp.std(a), xp.argmax(a), xp.sum(a, axis=0), xp.max(a, axis=1), a @ v,
              xp.sum(a[::2, 1:], axis=0), xp.cumulative_sum(v), xp.cumulative_sum(a, axis=0),
              xp.cumulative_sum(a[:4], axis=0), xp.cumulative_sum(a[:, ::-1], axis=1),
              xp.cumulative_prod(xp.astype(a > 0, xp.int32), axis=1, include_initial=True)):
        r.to_device(xp.cpu)
    return seen


def test_a_key_without_numba_is_the_compilers(monkeypatch, table):
    seen = _specialisations(monkeypatch)
    if not seen:
        pytest.skip("the reductions ran on the CPU's loops here")
    table()
    kinds = set()
    for f, fargs, argtypes, lb in seen:
        for cc in ((8, 0), (9, 0)):
            ours = factories.key(f, fargs, argtypes, lb, cc)
            assert ours is not None
            assert ours == compiler._key(f.fn(), fargs, param_types.to_numba(tuple(argtypes)), lb, cc)
        kinds.add(f.name)
    assert {"make_reduce_kernel", "make_tile_scan"} <= kinds and len(kinds) >= 4


def test_a_fingerprint_holds_for_its_sources_python_and_numba(monkeypatch, table):
    f = factories.factory("forge_array.kernels.reduce", "make_reduce_kernel")
    text = factories.table_entries([f])[f.qualname][1]
    table({f.qualname: [kernel_sources.module_hash(kernel_sources.module_file(f.module)), text]})
    assert factories._fingerprint_of(f) == text
    table({f.qualname: ["0" * 64, text]})              # the kernel sources changed since
    assert factories._fingerprint_of(f) is None
    assert factories.key(f, (), (), None, (9, 0)) is None
    path = table()
    monkeypatch.setattr(factories, "_VERSIONS", [("2.7", "0.1", "0.1")])   # another Python / numba
    monkeypatch.setattr(factories, "_TABLES", {"disk": {}})
    assert factories._read_table(path, True) == {} and factories._fingerprint_of(f) is None


def test_a_damaged_table_is_no_table(tmp_path):
    path = tmp_path / "t.json.z"
    for data in (b"", b"not zlib", __import__("zlib").compress(b"[1, 2]")):
        path.write_bytes(data)
        assert factories._read_table(str(path), True) == {}
    assert factories._read_table(str(tmp_path / "missing"), True) == {}


def test_a_process_that_loaded_a_factory_leaves_its_fingerprint(monkeypatch, tmp_path):
    f = factories.factory("forge_array.kernels.rowcol.rows", "make_row_kernel")
    monkeypatch.setattr(factories.config, "CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(factories.config, "SIMULATE", False)
    monkeypatch.setattr(factories, "_TABLES", {"shipped": {}})
    monkeypatch.setattr(factories, "_WRITTEN", set())
    assert factories._fingerprint_of(f) is None
    factories._note(f)
    monkeypatch.setattr(factories, "_TABLES", {"shipped": {}})   # a later process reads the disk
    assert factories._fingerprint_of(f) == factories.table_entries([f])[f.qualname][1]


def test_versions_are_read_without_importing():
    py, numba_v, numba_cuda_v = factories.versions()
    import numba

    assert py == "%d.%d" % sys.version_info[:2] and numba_v == numba.__version__
    assert numba_cuda_v == compiler._NUMBA_CUDA_VERSION
    assert factories._dist_version("numba", "numba") == numba.__version__
    assert factories._dist_version("no_such_package_here", "nothing") is None


def test_factories_name_their_functions():
    f = factories.factory("forge_array.kernels.reduce", "make_reduce_kernel")
    from forge_array.kernels import reduce as kr

    assert f.fn() is kr.make_reduce_kernel and f.__name__ == "make_reduce_kernel"
    import pickle

    assert pickle.loads(pickle.dumps(f)) is f


_NO_NUMBA = r"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "numba" or name.startswith("numba."):
            raise ImportError("numba is not available here")
sys.meta_path.insert(0, Block())
import numpy as np
import forge_array as xp
import forge_array.dispatch.reduce, forge_array.dispatch.axis_reduce
import forge_array.primitives.reductions, forge_array.primitives.matvec, forge_array.primitives.scan
import forge_array.dispatch.scan
from forge_array.kernels import reduce_spec, scan_spec
from forge_array.runtime import factories, param_types
spec = reduce_spec.ReduceSpec(op=xp.ops.add.fn, acc_dtypes=("<f4",), identity=(0.0,))
print(reduce_spec.kernel_argtypes(spec, ("<f4",), reduce_spec.MODE_VEC, 1))
print(scan_spec.status_words(("<f8",)), scan_spec.pipeline_shape("<f4", 4, 7, 3))
print(float(xp.sum(xp.asarray(np.arange(10.0)))), "numba" in sys.modules)
"""


def test_the_planning_modules_import_without_numba():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FORGE_ARRAY_", "NUMBA_"))}   # no simulator
    done = subprocess.run([sys.executable, "-c", _NO_NUMBA], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[:3] == ["(float32*, int64, int64, float32*, uint8*, uint32*, float32*, float64)",
                                           "4 (320, 3584, 43008)", "45.0 False"]


def test_inside_shipped_only_a_build_is_pending(monkeypatch):
    from forge_array.runtime import background

    f = factories.factory("forge_array.kernels.reduce", "make_reduce_kernel")
    monkeypatch.setattr(factories, "_MEMORY", {})
    monkeypatch.setattr(factories, "_found", lambda *a: None)
    monkeypatch.setattr(factories.config, "SIMULATE", False)
    spec = __import__("forge_array.kernels.reduce_spec", fromlist=["x"]).ReduceSpec(
        op=ops.add.fn, acc_dtypes=("<f4",), identity=(0.0,))
    with factories.shipped_only(), pytest.raises(background.Pending):
        factories.kernel(f, (spec,), ())
