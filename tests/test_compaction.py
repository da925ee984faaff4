"""Boolean masks through our scan (:mod:`forge_array.primitives.compaction`): ``nonzero`` of
backend arrays against NumPy's (exact), and on a GPU ``x[mask]`` / ``xp.nonzero`` of
forge_array arrays against NumPy's; the mask's shape checked as NumPy checks it."""

from __future__ import annotations

import numpy as np
import pytest

import forge_array as xp
from forge_array._array import mask_indices
from forge_array.primitives import compaction
from forge_array.runtime import config

_RNG = np.random.default_rng(7)


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = np.asarray(g.get() if hasattr(g, "get") else g)
        assert g.dtype == np.int64 and np.array_equal(g, w)


@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 255, 256, 257, 1025])
@pytest.mark.parametrize("density", [0.0, 0.3, 1.0])
def test_nonzero_of_1d_masks(bk, n, density):
    m = _RNG.random(n) < density
    _same(compaction.nonzero(bk.asarray(m)), np.nonzero(m))


@pytest.mark.parametrize("shape", [(5, 7), (3, 1, 4), (1, 33)])
def test_nonzero_of_nd_masks_views_and_numbers(bk, shape):
    m = _RNG.random(shape) < 0.4
    _same(compaction.nonzero(bk.asarray(m)), np.nonzero(m))
    t = m.swapaxes(0, -1)                                # a transposed (strided) mask
    _same(compaction.nonzero(bk.asarray(m).swapaxes(0, -1)), np.nonzero(t))
    v = (_RNG.integers(-2, 3, size=(2 * shape[0],) + shape[1:]))[::2]   # numbers: non-zero
    _same(compaction.nonzero(bk.asarray(v)), np.nonzero(v))


def test_nonzero_of_a_0d_array_is_refused(bk):
    with pytest.raises(ValueError, match="0-d"):
        compaction.nonzero(bk.asarray(True))


def test_a_mask_of_another_shape_is_an_index_error():
    with pytest.raises(IndexError, match="did not match indexed array along axis 1; size of axis is 3"):
        mask_indices(np.ones(4, dtype=bool), (3,), 1)
    with pytest.raises(IndexError, match="too many indices"):
        mask_indices(np.ones((2, 2), dtype=bool), (2,), 0)


@pytest.mark.skipif(config.SIMULATE, reason="GPU arrays: the GPU run")
@pytest.mark.parametrize("shape, axis", [((1000, 6), 0), ((8, 9, 10), 1), ((300,), 0)])
def test_mask_indexing_of_gpu_arrays(shape, axis):
    a = _RNG.standard_normal(shape).astype(np.float32)
    x = xp.asarray(a, device="cuda:0")
    m = _RNG.random(shape[axis]) < 0.5
    key = (slice(None),) * axis + (xp.asarray(m, device="cuda:0"),)
    np.testing.assert_array_equal(np.asarray(xp.asarray(x[key], device="cpu")), a[(slice(None),) * axis + (m,)])
    full = a > 0
    np.testing.assert_array_equal(np.asarray(xp.asarray(x[x > 0], device="cpu")), a[full])
    got = xp.nonzero(x > 0)
    for g, w in zip(got, np.nonzero(full)):
        np.testing.assert_array_equal(np.asarray(xp.asarray(g, device="cpu")), w)
    with pytest.raises(IndexError, match="did not match"):
        x[xp.asarray(np.ones(shape[0] + 1, dtype=bool), device="cuda:0")]
