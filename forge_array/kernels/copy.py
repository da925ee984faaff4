"""Copy kernels: vectorised contiguous copy, realigning copy and strided gather, one source
for all dtypes.

Elements are copied as raw bits: the kernels are specialised by item size (an unsigned
integer of that size, or complex128 for 16 bytes), so one compiled kernel serves every dtype
of that width.

- :func:`make_copy_contiguous`: both sides contiguous and equally misaligned modulo 16
  bytes: scalar head up to the first 16-byte boundary, 128-bit loads and stores for the
  body (``vecs`` per thread in flight, all loads before the stores), scalar tail. Grid-stride
  over whatever grid the host launches: a capped grid (a few blocks per SM) or one pass (a
  grid that covers the whole array, each thread's loop runs once).
- :func:`make_copy_realign`: both sides contiguous, misaligned differently by a whole number
  of elements (``x[1:]`` into a fresh buffer). The destination is aligned by a scalar head;
  the body reads *aligned* 128-bit vectors of the source, and each output vector is the
  16 bytes at offset ``r`` (the source's residual misalignment) of two neighbouring source
  vectors: the next vector comes from the next lane through a warp shuffle (the first lane
  loads the one after the warp's tile) or is loaded again (``mode="reload"``); 32-bit words
  are picked and joined with funnel shifts. 128-bit stores; a scalar tail.
- :func:`make_copy_scalar`: anything else contiguous (elements not aligned to their size):
  coalesced scalar copies, several per thread.
- :func:`make_copy_strided`: any view of up to :data:`MAX_DIMS` (collapsed) dimensions into
  any view: the flat C-order index is decomposed into coordinates.

Load / store cache hints (``ld.global<hint>`` / ``st.global<hint>``, e.g. ``".nc"``,
``".L1::no_allocate.L2::256B"``, ``".cs"``) are compile-time parameters of the vector
kernels, so a tuning sweep can compare them.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import cuda

from .. import intrinsics as fi

#: Most dimensions the strided kernel handles after the host collapsed the layout.
MAX_DIMS = 4

#: Vectors per thread per step of the vector kernels that the factories accept.
VECS = (1, 2, 4, 8)


def _check_vecs(vecs):
    if vecs not in VECS:
        raise ValueError(f"copy kernels: vecs must be one of {VECS}, got {vecs!r}")


def _scalar_ends(lines, vec):
    """Source lines: the scalar head (``head`` elements) and tail (after ``nvec`` vectors)."""
    lines += [
        "    bd = cuda.blockDim.x",
        "    tid = cuda.blockIdx.x * bd + cuda.threadIdx.x",
        "    if tid < head and tid < n:",
        "        dst[tid] = src[tid]",
        f"    nvec = (n - head) // {vec} if n > head else 0",
        f"    t = head + nvec * {vec} + tid",
        "    if t < n:",
        "        dst[t] = src[t]",
    ]


def make_copy_contiguous(itemsize: int, vecs: int = 4, load_hint: str = "", store_hint: str = ""):
    """Kernel ``(src, dst, n, head)``: copy ``n`` contiguous elements; the first ``head``
    elements are peeled so that ``src + head`` and ``dst + head`` are 16-byte aligned.

    Each thread moves ``vecs`` 128-bit vectors (``blockDim`` vectors apart, so that a block
    covers ``vecs * blockDim`` consecutive vectors) per step of a grid-stride loop, with the
    loads issued before the stores so that several loads are in flight per thread.

    >>> callable(make_copy_contiguous(4, 2, ".nc", ".cs"))
    True
    """
    _check_vecs(vecs)
    vec = max(1, 16 // itemsize)
    u = vecs
    lines = ["def copy_contiguous(src, dst, n, head):"]
    _scalar_ends(lines, vec)
    lines += [
        f"    j = cuda.blockIdx.x * bd * {u} + cuda.threadIdx.x",
        f"    step = cuda.gridDim.x * bd * {u}",
        f"    while j + {u - 1} * bd < nvec:",
        f"        e0 = head + j * {vec}",
    ]
    lines += [f"        e{k} = e{k - 1} + bd * {vec}" for k in range(1, u)]
    lines += [f"        v{k} = _ld(src, e{k})" for k in range(u)]
    lines += [f"        _st(dst, e{k}, v{k})" for k in range(u)]
    lines += [
        "        j += step",
        f"    for k in range({u}):",
        "        jj = j + k * bd",
        "        if jj < nvec:",
        f"            e = head + jj * {vec}",
        "            _st(dst, e, _ld(src, e))",
    ]
    g = {"cuda": cuda, "_ld": fi.vload_hinted(load_hint), "_st": fi.vstore_hinted(store_hint)}
    exec(compile("\n".join(lines) + "\n", f"<forge_array copy_contiguous {itemsize} {u}>", "exec"), g)
    return g["copy_contiguous"]


def realign_words(r: int, a: str, b: str) -> list:
    """Source expressions of the four 32-bit words at byte offset ``r`` (1..15) of the
    32 bytes ``a ++ b`` (four little-endian words each; ``a`` and ``b`` are format strings
    naming word ``k`` with ``{}``).

    >>> realign_words(4, "a[{}]", "b{}")
    ['a[1]', 'a[2]', 'a[3]', 'b0']
    >>> realign_words(6, "a[{}]", "b{}")[3]
    '_fshr(b0, b1)'
    """
    q, rb = divmod(r, 4)
    w = [a.format(k) for k in range(4)] + [b.format(k) for k in range(4)]
    if rb == 0:
        return [w[q + i] for i in range(4)]
    return [f"_fshr({w[q + i]}, {w[q + i + 1]})" for i in range(4)]


def _next_words(r: int) -> int:
    """How many leading words of the next source vector the output at offset ``r`` uses."""
    return r // 4 + (1 if r % 4 else 0)


def make_copy_realign(itemsize: int, r: int, vecs: int = 4, mode: str = "shfl",
                      load_hint: str = "", store_hint: str = ""):
    """Kernel ``(src, dst, srcw, dstw, n, head)``: copy ``n`` contiguous elements of
    ``itemsize`` bytes from ``src`` to ``dst`` (element pointers) where ``dst + head`` is
    16-byte aligned and ``src + head`` is ``r`` bytes (``0 < r < 16``) past a 16-byte
    boundary. ``dstw`` is ``dst + head`` and ``srcw`` is ``src + head`` less ``r`` bytes,
    both as pointers to 32-bit words (each aligned source vector the kernel reads holds at
    least one byte of ``src``, so nothing outside the array's 16-byte blocks is touched).

    A warp moves a tile of ``32 * vecs`` consecutive output vectors per step (grid-stride
    over warps): it loads the tile's source vectors (lane ``l`` of part ``k`` loads vector
    ``32k + l``), takes each lane's next vector from lane ``l + 1`` by a shuffle (lane 31
    from lane 0 of the next part; lane 0 loads the vector after the tile), realigns and
    stores. ``mode="reload"`` loads the next vector from memory instead (no shuffles; the
    second load hits L1/L2). The partial last tile moves vector by vector, loading both.

    >>> callable(make_copy_realign(4, 4, 2, "shfl", ".nc", ".cs"))
    True
    """
    _check_vecs(vecs)
    if not 0 < r < 16 or r % min(itemsize, 8):
        raise ValueError(f"make_copy_realign: offset {r} is not a non-zero multiple of {min(itemsize, 8)} below 16")
    if mode not in ("shfl", "reload"):
        raise ValueError(f"make_copy_realign: mode must be 'shfl' or 'reload', got {mode!r}")
    vec = max(1, 16 // itemsize)
    u = vecs
    tile = 32 * u
    lines = ["def copy_realign(src, dst, srcw, dstw, n, head):"]
    _scalar_ends(lines, vec)
    lines += [
        "    lane = tid % 32",
        "    j = (tid // 32) * " + str(tile),
        f"    step = ((cuda.gridDim.x * bd) // 32) * {tile}",
        f"    while j + {tile} <= nvec:",
    ]
    for k in range(u):
        lines.append(f"        a{k} = _ld(srcw, 4 * (j + {32 * k} + lane))")
    if mode == "shfl":
        lines += [
            f"        x = a{u - 1}",
            "        if lane == 0:",
            f"            x = _ld(srcw, 4 * (j + {tile}))",
        ]
        for k in range(u):  # shuffle only the words of the next vector that are used
            nxt = f"a{k + 1}" if k + 1 < u else "x"
            for m in range(_next_words(r)):
                lines.append(f"        b{k}_{m} = fi.shfl_idx({nxt}[{m}] if lane == 0 else a{k}[{m}], lane + 1)")
        bname = "b{}_{{}}"
    else:
        for k in range(u):
            lines.append(f"        b{k} = _ld(srcw, 4 * (j + {32 * k + 1} + lane))")
        bname = "b{}[{{}}]"
    for k in range(u):
        words = realign_words(r, f"a{k}[{{}}]", bname.format(k))
        lines.append(f"        _st(dstw, 4 * (j + {32 * k} + lane), ({', '.join(words)},))")
    lines += [
        "        j += step",
        "    j += lane",
        "    while j < nvec:",
        "        a = _ld(srcw, 4 * j)",
        "        b = _ld(srcw, 4 * j + 4)",
        f"        _st(dstw, 4 * j, ({', '.join(realign_words(r, 'a[{}]', 'b[{}]'))},))",
        "        j += 32",
    ]
    sh = np.uint64(8 * (r % 4))

    def fshr(lo, hi):  # (hi:lo >> 8 * (r % 4)) & 0xffffffff: one shf.r on the GPU
        return np.uint32(((np.uint64(hi) << np.uint64(32)) | np.uint64(lo)) >> sh & np.uint64(0xFFFFFFFF))

    g = {"cuda": cuda, "fi": fi, "_ld": fi.vload_hinted(load_hint), "_st": fi.vstore_hinted(store_hint),
         "_fshr": cuda.jit(device=True)(fshr)}
    exec(compile("\n".join(lines) + "\n", f"<forge_array copy_realign {itemsize} {r} {u} {mode}>", "exec"), g)
    return g["copy_realign"]


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
