"""The routing seam: backend arrays in, backend arrays of the exact dtype/shape out."""

import numpy as np
import pytest

from forge_array import _routing as r

# Namespace semantics are checked against NumPy; the kernels have their own tests.
pytestmark = pytest.mark.usefixtures("numpy_routes")


@pytest.mark.parametrize("dtype,acc", [(np.int32, np.int64), (np.uint8, np.uint64),
                                       (np.bool_, np.int64), (np.float32, np.float32)])
def test_reduce_sum_dtypes(dtype, acc):
    x = np.ones((3, 4), dtype=dtype)
    out = r.reduce_sum(x, (0, 1), np.dtype(acc), False)
    assert isinstance(out, np.ndarray) and out.dtype == acc and out.shape == ()
    out = r.reduce_sum(x, (1,), np.dtype(acc), True)
    assert out.shape == (3, 1)


def test_other_routes():
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert r.reduce_max(x, (0,), False).tolist() == [8, 9, 10, 11]
    assert r.reduce_min(x, (0, 1), True).shape == (1, 1)
    assert r.reduce_mean(x, (1,), False).dtype == np.float64
    assert r.reduce_var(x, (0, 1), 1.0, False) == pytest.approx(np.var(x, ddof=1))
    assert r.reduce_std(x, (0, 1), 0.0, False) == pytest.approx(np.std(x))
    assert r.reduce_any(x, (0,), False).dtype == np.bool_
    assert r.reduce_all(x, (0, 1), False).shape == ()
    assert r.argmax(x, None, False).dtype == np.int64
    assert r.argmin(x, 1, True).shape == (3, 1)
    cs = r.cumulative_sum(x.astype(np.int32), 1, np.dtype(np.int64), True)
    assert cs.shape == (3, 5) and cs.dtype == np.int64
    assert r.cumulative_prod(x, 0, np.dtype(np.float64), False).shape == (3, 4)
    assert r.matmul(x, x.T).shape == (3, 3)
    assert r.vecdot(x, x[0], -1).shape == (3,)
    assert r.tensordot(x, x, ((1,), (1,))).shape == (3, 3)
    c = r.copy(x.T)
    assert c.flags.c_contiguous and not np.shares_memory(c, x)
