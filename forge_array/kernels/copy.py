"""Copy kernels: vectorised contiguous copy and strided gather, one source for all dtypes.

Elements are copied as raw bits: the kernels are specialised by item size (an unsigned
integer of that size, or complex128 for 16 bytes), so one compiled kernel serves every dtype
of that width.

- :func:`make_copy_contiguous`: both sides contiguous and equally misaligned modulo 16
  bytes: scalar head up to the first 16-byte boundary, 128-bit loads and stores for the
  body (several per thread in flight), scalar tail. Grid-stride.
- :func:`make_copy_scalar`: both sides contiguous but misaligned differently (``x[1:]`` into
  a fresh buffer): coalesced scalar copies, several per thread.
- :func:`make_copy_strided`: any view of up to :data:`MAX_DIMS` (collapsed) dimensions into
  any view: the flat C-order index is decomposed into coordinates.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import cuda

from .. import intrinsics as fi

#: Most dimensions the strided kernel handles after the host collapsed the layout.
MAX_DIMS = 4


def make_copy_contiguous(itemsize: int):
    """Kernel ``(src, dst, n, head)``: copy ``n`` contiguous elements; the first ``head``
    elements are peeled so that ``src + head`` and ``dst + head`` are 16-byte aligned.

    Each thread moves four 128-bit vectors per step of a grid-stride loop, with the four
    loads issued before the four stores so that several loads are in flight per thread."""
    vec = max(1, 16 // itemsize)

    def copy_contiguous(src, dst, n, head):
        tid = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        bd = cuda.blockDim.x
        if tid < head and tid < n:
            dst[tid] = src[tid]
        nvec = (n - head) // vec if n > head else 0
        t = head + nvec * vec + tid
        if t < n:
            dst[t] = src[t]
        j = cuda.blockIdx.x * bd * 4 + cuda.threadIdx.x
        step = cuda.gridDim.x * bd * 4
        while j + 3 * bd < nvec:
            e0 = head + j * vec
            e1 = e0 + bd * vec
            e2 = e1 + bd * vec
            e3 = e2 + bd * vec
            v0 = fi.vload(src, e0)
            v1 = fi.vload(src, e1)
            v2 = fi.vload(src, e2)
            v3 = fi.vload(src, e3)
            fi.vstore(dst, e0, v0)
            fi.vstore(dst, e1, v1)
            fi.vstore(dst, e2, v2)
            fi.vstore(dst, e3, v3)
            j += step
        for k in range(4):
            jj = j + k * bd
            if jj < nvec:
                e = head + jj * vec
                fi.vstore(dst, e, fi.vload(src, e))

    return copy_contiguous


def make_copy_scalar(dtype, items: int):
    """Kernel ``(src, dst, n)``: contiguous element-by-element copy for operands whose
    misalignments differ; each thread loads ``items`` coalesced elements before storing them."""
    nb_type = numba.from_dtype(np.dtype(dtype))

    def copy_scalar(src, dst, n):
        bd = cuda.blockDim.x
        j = cuda.blockIdx.x * bd * items + cuda.threadIdx.x
        step = cuda.gridDim.x * bd * items
        buf = cuda.local.array(items, nb_type)
        while j < n:
            for k in range(items):
                jj = j + k * bd
                if jj < n:
                    buf[k] = src[jj]
            for k in range(items):
                jj = j + k * bd
                if jj < n:
                    dst[jj] = buf[k]
            j += step

    return copy_scalar


def make_copy_strided(ndim: int):
    """Kernel ``(src, dst, n, d0..d3, s0..s3, t0..t3)``: element ``(i0, .., i3)`` (C order of
    the shape ``d``) goes from ``src[sum(i*s)]`` to ``dst[sum(i*t)]``; unused leading dims
    have size 1."""

    def copy_strided(src, dst, n, d0, d1, d2, d3, s0, s1, s2, s3, t0, t1, t2, t3):
        tid = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        nthreads = cuda.gridDim.x * cuda.blockDim.x
        j = tid
        while j < n:
            r = j
            i3 = r % d3
            r //= d3
            a = i3 * s3
            b = i3 * t3
            if ndim > 1:
                i2 = r % d2
                r //= d2
                a += i2 * s2
                b += i2 * t2
            if ndim > 2:
                i1 = r % d1
                r //= d1
                a += i1 * s1
                b += i1 * t1
            if ndim > 3:
                a += r * s0
                b += r * t0
            dst[b] = src[a]
            j += nthreads

    return copy_strided
