"""The runtime's host-side machinery: fingerprints, the disk cache, parameter packing,
operator typing, tuning lookups (no GPU needed)."""

import os
import struct

import numpy as np
import pytest
from numba import types as nt

from forge_array import runtime
from forge_array.runtime import kernel_files, launching, tuning
from forge_array.runtime.fingerprint import digest, fingerprint


def _make_adder(k):
    return lambda a: a + k


def test_fingerprint_follows_code_closure_and_globals():
    assert fingerprint(lambda a, b: a + b) == fingerprint(lambda a, b: a + b)
    assert fingerprint(lambda a, b: a + b) != fingerprint(lambda a, b: a - b)
    assert fingerprint(_make_adder(1)) == fingerprint(_make_adder(1))
    assert fingerprint(_make_adder(1)) != fingerprint(_make_adder(2))
    assert digest(np.dtype("float32"), 4) != digest(np.dtype("float64"), 4)


def test_disk_cache_round_trip_and_corrupt_entries(tmp_path):
    path = str(tmp_path / "ab" / "abcdef.ptx")
    kernel_files.write_cached(path, "entry_1", ".version 9.0\n// body\n")
    assert kernel_files.read_cached(path) == ("entry_1", ".version 9.0\n// body\n")
    with open(path, "a") as f:  # corrupt the body: the checksum no longer matches
        f.write("garbage")
    assert kernel_files.read_cached(path) is None
    assert not os.path.exists(path), "a corrupt entry must be deleted, never loaded"
    with open(path, "w") as f:  # no header at all
        f.write(".version 9.0\n")
    assert kernel_files.read_cached(path) is None
    assert kernel_files.read_cached(str(tmp_path / "missing.ptx")) is None


def test_packed_parameters_follow_cuda_alignment():
    argtypes = (runtime.ptr_t("float32"), runtime.i32, runtime.i64, runtime.f32,
                runtime.tuple_ptr_t(["float32", "int64"]), nt.complex128)
    st = launching._param_struct(argtypes)
    assert st.format == "<QixxxxqfxxxxQQdd"
    flatten = launching._make_flattener(argtypes)
    flat = flatten((10, 2, 3, 1.5, (20, 30), 4 + 5j))
    assert flat == (10, 2, 3, 1.5, 20, 30, 4.0, 5.0)
    buf = bytearray(st.size)
    st.pack_into(buf, 0, *flat)
    assert struct.unpack_from("<Q", buf, 0)[0] == 10
    assert struct.unpack_from("<q", buf, 16)[0] == 3  # int64 aligned to 8 after the int32
    assert struct.unpack_from("<Q", buf, 32)[0] == 20


def test_result_type_and_compile_errors():
    assert str(runtime.result_type(lambda a, b: a * b, (nt.float32, nt.float32))) == "float32"
    with pytest.raises(TypeError, match="cannot compile operator"):
        runtime.result_type(lambda a, b: a.nonexistent, (nt.float32, nt.float32))
    with pytest.raises(TypeError, match="callable"):
        runtime.result_type(3, (nt.float32,))


def test_tuning_tables_and_status():
    for kind in ("copy", "reduce", "rowcol", "scan", "scan_columns"):
        p = tuning.params(kind)
        assert p["block"] % 32 == 0
    for fam in ("default", "sm90", "H100", "H200", "simulator"):
        assert "reduce" in tuning.TABLES[fam] or fam in ("H100", "H200", "sm90")
    assert runtime.kernels_status().startswith("kernels:")
    with pytest.raises(KeyError):
        tuning.params("no-such-kernel")
