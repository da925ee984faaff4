"""The copy kernel over sizes, dtypes and views (simulator in CI, the GPU on the device)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from forge_array import primitives
from forge_array.testing import dtypes, shapes, views

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
        runtime.compile_ptx_offline(k.make_copy_scalar, (np.dtype("uint16"), 4), (pt("uint16"),) * 2 + (runtime.i64,))
        runtime.compile_ptx_offline(k.make_copy_strided, (3,), (pt("uint32"),) * 2 + (runtime.i64,) * 13)
        print("OK")
        """
    )
    assert "OK" in out
