"""The copy kernel over sizes, dtypes and views (simulator in CI, the GPU on the device)."""

import importlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from forge_array import primitives, runtime
from forge_array.runtime import tuning
from forge_array.testing import dtypes, shapes, views

pcopy = importlib.import_module("forge_array.dispatch.copy")

DTYPES = ["bool", "int8", "uint16", "int32", "float32", "float64", "complex64", "complex128"]


def _to_host(bk, a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 257, 1000])
@pytest.mark.parametrize("offset", [0, 1, 3])
def test_contiguous_sizes_and_misaligned_starts(bk, dtype, n, offset):
    base = (np.arange(n + offset + 5) % 251).astype(dtype)
    x = bk.asarray(base)[offset : offset + n]
    y = primitives.copy(x)
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_array_equal(_to_host(bk, y), base[offset : offset + n])


def test_copy_into_misaligned_out(bk):
    base = bk.asarray(np.arange(300, dtype=np.float32))
    out = bk.zeros(305, dtype=np.float32)
    primitives.copy(base[1:201], out[3:203])
    np.testing.assert_array_equal(_to_host(bk, out)[3:203], np.arange(1, 201, dtype=np.float32))
    assert _to_host(bk, out)[:3].sum() == 0 and _to_host(bk, out)[203:].sum() == 0


@given(x=views(dtypes(("integral", "real floating", "complex floating", "bool")),
               shapes(min_dims=0, max_dims=5, max_side=9)))
def test_views_match_numpy(x):
    y = primitives.copy(x)
    assert y.flags.c_contiguous
    np.testing.assert_array_equal(y, np.array(x, copy=True))


@given(n=st.integers(0, 600), step=st.integers(-4, 4).filter(bool))
def test_strided_1d(bk, n, step):
    base = np.random.default_rng(n).standard_normal(n * 4 + 1).astype(np.float32)
    x = bk.asarray(base)[::step][:n]
    np.testing.assert_array_equal(_to_host(bk, primitives.copy(x)), base[::step][:n])


def test_errors(bk):
    with pytest.raises(ValueError, match="shape"):
        primitives.copy(bk.zeros(3), bk.zeros(4))


# ------------------------------------------------- vector paths at every byte offset

#: one dtype per item size (the kernels copy raw bits of that size)
SIZED = ["uint8", "int16", "float32", "float64", "complex128"]


def _at_offset(bk, data, off):
    """A ``bk`` array equal to the 1-D NumPy array ``data`` whose first element lies ``off``
    bytes past a 16-byte boundary (a view of a byte buffer, filled bytewise)."""
    nb = data.nbytes
    buf = bk.zeros(nb + 48, dtype=np.uint8)
    a0 = (-runtime.data_address(buf)) % 16 + off
    buf[a0:a0 + nb] = bk.asarray(data.view(np.uint8))
    v = buf[a0:a0 + nb].view(data.dtype)
    assert nb == 0 or runtime.data_address(v) % 16 == off
    return v, buf, a0


def _data(dtype, n, seed=0):
    bits = np.random.default_rng(seed).integers(0, 256, n * np.dtype(dtype).itemsize, dtype=np.uint8)
    return bits.view(dtype)


def _check_copy(bk, dtype, n, src_off, dst_off, seed=0):
    """Copy ``n`` elements from ``src_off`` to ``dst_off`` bytes past a boundary; the result
    matches bit for bit and the bytes around the destination are untouched."""
    data = _data(dtype, n, seed)
    x, _, _ = _at_offset(bk, data, src_off)
    out, obuf, o0 = _at_offset(bk, np.zeros(n, dtype), dst_off)
    obuf[:o0] = 7
    obuf[o0 + data.nbytes:] = 7
    primitives.copy(x, out)
    got = _to_host(bk, obuf)
    assert got[o0:o0 + data.nbytes].tobytes() == data.tobytes(), (dtype, n, src_off, dst_off)
    assert (got[:o0] == 7).all() and (got[o0 + data.nbytes:] == 7).all()


def _plan_names():
    return sorted({p[0].name for p in pcopy.PLANS.values() if type(p) is tuple})


@pytest.fixture
def copy_tuning(monkeypatch):
    """``set(**params)``: override the copy tuning parameters for this test (fresh plans)."""

    def set_(**params):
        monkeypatch.setitem(tuning.OVERRIDES, "copy", {**tuning.OVERRIDES.get("copy", {}), **params})
        tuning._CACHE.clear()
        pcopy.PLANS.clear()

    pcopy.PLANS.clear()
    yield set_
    tuning._CACHE.clear()
    pcopy.PLANS.clear()


@pytest.mark.parametrize("dtype", SIZED)
@pytest.mark.parametrize("off", range(16))
def test_every_source_and_destination_offset(bk, dtype, off):
    """Source ``off`` bytes past a boundary into an aligned destination and the reverse
    (offsets that are not whole elements are copied as bytes)."""
    _check_copy(bk, dtype, 100, off, 0, seed=off)
    _check_copy(bk, dtype, 77, 0, off, seed=off + 16)
    _check_copy(bk, dtype, 45, off, (off * 7 + 4) % 16, seed=off + 32)


@pytest.mark.parametrize("dtype", SIZED)
@pytest.mark.parametrize("n", [0, 1, 15, 31, 32, 33])
def test_small_sizes_at_offsets(bk, dtype, n):
    al = min(np.dtype(dtype).itemsize, 8)
    for src_off, dst_off in ((0, 0), (al, 0), (0, 16 - al), (16 - al, al)):
        _check_copy(bk, dtype, n, src_off, dst_off)


def test_kernel_choice(bk, copy_tuning):
    copy_tuning()
    f4 = np.arange(1000, dtype=np.float32)
    primitives.copy(bk.asarray(f4))
    assert _plan_names() == ["make_copy_contiguous"]
    primitives.copy(bk.asarray(f4)[1:])
    assert _plan_names() == ["make_copy_contiguous", "make_copy_realign"]
    pcopy.PLANS.clear()
    primitives.copy(bk.asarray(f4)[::-1])
    primitives.copy(bk.asarray(f4)[::2])
    primitives.copy(bk.asarray(f4.reshape(40, 25))[:, 1:])
    assert _plan_names() == ["make_copy_strided"]
    pcopy.PLANS.clear()
    copy_tuning(realign="")
    primitives.copy(bk.asarray(f4)[1:])
    assert _plan_names() == ["make_copy_scalar"]


#: tuning variants of the vector kernels (the simulator's block is 64 threads, 2 warps)
VARIANTS = [
    {},
    {"one_pass": False, "vecs": 4},
    {"realign": "reload"},
    {"realign": ""},
    {"vecs": 1},
    {"vecs": 2, "one_pass": True},
    {"vecs": 8, "realign": "reload", "one_pass": True},
    {"load_hint": ".nc.L1::no_allocate.L2::256B", "store_hint": ".cs"},
]


@pytest.mark.parametrize("params", VARIANTS, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "tables")
def test_tuning_variants_tile_edges(bk, copy_tuning, params):
    """Sizes around the warp tile (32 * vecs vectors) and over several grid-stride steps."""
    copy_tuning(**params)
    vecs = tuning.params("copy")["vecs"]
    for dtype, src_off, dst_off in (("float32", 4, 0), ("uint8", 3, 14), ("float64", 8, 0),
                                    ("float32", 0, 0), ("int16", 6, 10)):
        vec = 16 // np.dtype(dtype).itemsize
        tile = 32 * vecs * vec
        big = (9 * tile + 5,) if dtype in ("float32", "uint8") else ()  # > 1 grid-stride step
        for n in (tile - 1, tile, tile + 1, 2 * tile + vec + 3) + big:
            _check_copy(bk, dtype, n, src_off, dst_off, seed=n)


def test_complex128_eight_bytes_off(bk, copy_tuning):
    """complex128 8 bytes past a boundary: realigned into an aligned destination (no scalar
    head or tail), bytes into a misaligned one."""
    copy_tuning()
    _check_copy(bk, "complex128", 300, 8, 0)
    assert _plan_names() == ["make_copy_realign"]
    _check_copy(bk, "complex128", 300, 8, 8)
    _check_copy(bk, "complex128", 300, 0, 8)


def test_bad_hint_is_refused(bk, copy_tuning):
    copy_tuning(load_hint="; trap;")
    with pytest.raises((ValueError, TypeError), match="hint"):
        primitives.copy(bk.arange(100, dtype=np.float32))


def test_gpu_code_path_compiles_to_ptx(offline_ptx):
    out = offline_ptx(
        """
        from forge_array import runtime
        from forge_array.kernels import copy as k
        import numpy as np
        pt = lambda d: runtime.ptr_t(d)
        for size, raw in ((1, "uint8"), (4, "uint32"), (8, "uint64")):
            ptx = runtime.compile_ptx_offline(k.make_copy_contiguous, (size,),
                                              (pt(raw), pt(raw), runtime.i64, runtime.i64))
            assert "ld.global.v4" in ptx or "ld.global.v2" in ptx, ptx[-2000:]
            assert "st.global.v4" in ptx or "st.global.v2" in ptx
        ptx = runtime.compile_ptx_offline(k.make_copy_contiguous, (16,),
                                          (pt("complex128"),) * 2 + (runtime.i64,) * 2)
        ptx = runtime.compile_ptx_offline(k.make_copy_contiguous, (4, 2, ".nc.L1::no_allocate.L2::256B", ".cs"),
                                          (pt("uint32"), pt("uint32"), runtime.i64, runtime.i64))
        assert "ld.global.nc.L1::no_allocate.L2::256B.v4.u32" in ptx and "st.global.cs.v4.u32" in ptx
        w = (pt("uint32"),) * 2 + (runtime.i64,) * 2
        for size, raw, r in ((1, "uint8", 5), (2, "uint16", 6), (4, "uint32", 4), (8, "uint64", 8),
                             (16, "complex128", 8)):
            for mode in ("shfl", "reload"):
                ptx = runtime.compile_ptx_offline(k.make_copy_realign, (size, r, 4, mode, "", ""),
                                                  (pt(raw), pt(raw)) + w)
                assert "ld.global.v4.u32" in ptx and "st.global.v4.u32" in ptx
                assert ("shfl.sync.idx" in ptx) == (mode == "shfl")
                assert ".local" not in ptx
        runtime.compile_ptx_offline(k.make_copy_scalar, (np.dtype("uint16"), 4), (pt("uint16"),) * 2 + (runtime.i64,))
        runtime.compile_ptx_offline(k.make_copy_strided, (3,), (pt("uint32"),) * 2 + (runtime.i64,) * 13)
        print("OK")
        """
    )
    assert "OK" in out
