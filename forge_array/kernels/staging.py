"""Staging tiles through shared memory: a warp or a block copies a contiguous range of a
global array into shared memory with coalesced 128-bit loads (whatever the range's 16-byte
phase), or back out with 128-bit stores. Used by the kernels whose threads then work on
short rows that are not aligned to 16 bytes (the short-row reduction of :mod:`.rowcol`,
the short-row scan of :mod:`.scan`).

Example (inside a kernel; ``lane`` of a warp, ``sh`` a shared array of the tile's size)::

    load_tile = make_tile_loader(32, 4)         # 32 threads, 4 float32 per vector
    load_tile(sh, 0, src, start, n, mis, lane)  # sh[0 : n] = src[start : start + n]
"""

from __future__ import annotations

from numba import cuda

from .. import intrinsics as fi

__all__ = ["make_gather", "make_tile_loader", "make_tile_storer", "make_vector_split"]


def make_gather(VEC):
    """``(sh, a) -> VEC-tuple``: ``VEC`` (2 or 4) consecutive scalars of a shared array from
    ``sh[a]``, for a 128-bit store (scalar loads: ``a`` need not be 16-byte aligned).

    >>> callable(make_gather(4))
    True
    """
    if VEC == 4:
        @cuda.jit(device=True)
        def gather(sh, a):
            return (fi.load(sh, a), fi.load(sh, a + 1), fi.load(sh, a + 2), fi.load(sh, a + 3))
    elif VEC == 2:
        @cuda.jit(device=True)
        def gather(sh, a):
            return (fi.load(sh, a), fi.load(sh, a + 1))
    else:
        raise ValueError(f"make_gather: VEC must be 2 or 4, got {VEC}")
    return gather


def make_vector_split(VEC):
    """``(mis, start, n) -> (ha, nv)``: a run ``p[start : start + n]`` of an array whose
    ``p[0]`` has the 16-byte phase ``mis`` (elements) as ``ha`` scalars up to the first 16-byte
    boundary, then ``nv`` whole vectors of ``VEC`` elements (the rest is the scalar tail).

    >>> callable(make_vector_split(4))
    True
    """
    @cuda.jit(device=True)
    def split(mis, start, n):
        po = (mis + start) % VEC
        ha = (VEC - po) % VEC
        if ha > n:
            ha = n
        return ha, (n - ha) // VEC
    return split


def make_tile_loader(BLOCK, VEC, V4=False, WIDE=False):
    """``(sh, so, p, start, n, mis, tid)``: ``BLOCK`` threads (``tid`` in ``0 .. BLOCK - 1``: a
    block, or the 32 lanes of a warp) copy ``p[start : start + n]`` to shared memory with
    coalesced 128-bit loads (scalar head up to the 16-byte boundary, up to four vectors in
    flight per thread, eight with ``WIDE``, scalar tail); ``mis`` is the phase of ``p[0]`` in
    elements.

    ``V4=False``: the tile goes to ``sh[so : so + n]``, each vector as ``VEC`` scalar stores.
    ``V4=True``: it is laid out from the 16-byte boundary, ``p[start + e]`` to
    ``sh[so + ph + e]`` with ``ph = (mis + start) % VEC`` (``so`` a multiple of ``VEC``), so every
    vector is one ``st.shared.v4`` (no bank conflicts) instead of ``VEC`` scalar stores at a
    ``VEC``-word stride (4-way conflicts for 4-byte types)."""

    # fi.store / fi.load: plain addressing (array indexing would add a negative-index
    # wraparound select per access, which keeps every address in its own register)
    if V4:
        put = fi.vstore_shared
    else:
        @cuda.jit(device=True)
        def put(sh, at, v):
            for e in range(VEC):
                fi.store(sh, at + e, v[e])

    @cuda.jit(device=True)
    def load_tile(sh, so, p, start, n, mis, tid):
        ph = (mis + start) % VEC
        ha = (VEC - ph) % VEC
        if ha > n:
            ha = n
        nv = (n - ha) // VEC
        d0 = so + ph if V4 else so
        if tid < ha:
            fi.store(sh, d0 + tid, fi.load(p, start + tid))
        g = start + ha
        d = d0 + ha
        q = tid
        if WIDE:
            while q + 7 * BLOCK < nv:
                v0 = fi.vload(p, g + q * VEC)
                v1 = fi.vload(p, g + (q + BLOCK) * VEC)
                v2 = fi.vload(p, g + (q + 2 * BLOCK) * VEC)
                v3 = fi.vload(p, g + (q + 3 * BLOCK) * VEC)
                v4 = fi.vload(p, g + (q + 4 * BLOCK) * VEC)
                v5 = fi.vload(p, g + (q + 5 * BLOCK) * VEC)
                v6 = fi.vload(p, g + (q + 6 * BLOCK) * VEC)
                v7 = fi.vload(p, g + (q + 7 * BLOCK) * VEC)
                put(sh, d + q * VEC, v0)
                put(sh, d + (q + BLOCK) * VEC, v1)
                put(sh, d + (q + 2 * BLOCK) * VEC, v2)
                put(sh, d + (q + 3 * BLOCK) * VEC, v3)
                put(sh, d + (q + 4 * BLOCK) * VEC, v4)
                put(sh, d + (q + 5 * BLOCK) * VEC, v5)
                put(sh, d + (q + 6 * BLOCK) * VEC, v6)
                put(sh, d + (q + 7 * BLOCK) * VEC, v7)
                q += 8 * BLOCK
        while q + 3 * BLOCK < nv:
            v0 = fi.vload(p, g + q * VEC)
            v1 = fi.vload(p, g + (q + BLOCK) * VEC)
            v2 = fi.vload(p, g + (q + 2 * BLOCK) * VEC)
            v3 = fi.vload(p, g + (q + 3 * BLOCK) * VEC)
            put(sh, d + q * VEC, v0)
            put(sh, d + (q + BLOCK) * VEC, v1)
            put(sh, d + (q + 2 * BLOCK) * VEC, v2)
            put(sh, d + (q + 3 * BLOCK) * VEC, v3)
            q += 4 * BLOCK
        if q + BLOCK < nv:
            v0 = fi.vload(p, g + q * VEC)
            v1 = fi.vload(p, g + (q + BLOCK) * VEC)
            put(sh, d + q * VEC, v0)
            put(sh, d + (q + BLOCK) * VEC, v1)
            q += 2 * BLOCK
        if q < nv:
            put(sh, d + q * VEC, fi.vload(p, g + q * VEC))
        tl = ha + nv * VEC + tid
        if tl < n:
            fi.store(sh, d0 + tl, fi.load(p, start + tl))

    return load_tile


def make_tile_storer(BLOCK, VEC, V4=False):
    """``(sh, so, p, start, n, mis, tid)``: ``BLOCK`` threads (``tid`` in ``0 .. BLOCK - 1``)
    copy ``sh[so : so + n]`` to ``p[start : start + n]`` with coalesced 128-bit stores (scalar
    head up to the 16-byte boundary, each vector gathered from ``VEC`` shared words, scalar
    tail); ``mis`` is the phase of ``p[0]`` in elements. ``VEC`` is 2 or 4 (8- or 4-byte
    elements): the mirror of :func:`make_tile_loader` without ``V4``, so a tile staged in
    with one phase can go out with another.

    ``V4=True``: the mirror of the loader's ``V4`` layout, with one more argument, ``ph``: tile
    element ``i`` is at ``sh[so + ph + i]`` (``so`` a multiple of ``VEC``). When the output's
    16-byte phase is the tile's (``(mis + start) % VEC == ph``) every vector is one
    ``ld.shared.v4`` and one 128-bit store; otherwise the vectors are gathered from scalars.

    >>> callable(make_tile_storer(32, 4))
    True
    """
    if VEC not in (2, 4):
        raise ValueError(f"make_tile_storer: VEC must be 2 or 4, got {VEC}")
    gather = make_gather(VEC)
    split = make_vector_split(VEC)

    @cuda.jit(device=True)
    def store_from(sh, s0, p, start, n, mis, tid, aligned):
        """``sh[s0 + i]`` to ``p[start + i]``; ``aligned``: the shared vectors behind the global
        16-byte boundaries are 16-byte aligned too (one ``ld.shared.v4`` each)."""
        ha, nv = split(mis, start, n)
        if tid < ha:
            fi.store(p, start + tid, fi.load(sh, s0 + tid))
        g = start + ha
        d = s0 + ha
        q = tid
        if aligned:
            while q < nv:
                fi.vstore(p, g + q * VEC, fi.vload_shared(sh, d + q * VEC))
                q += BLOCK
        else:
            while q < nv:
                fi.vstore(p, g + q * VEC, gather(sh, d + q * VEC))
                q += BLOCK
        tl = ha + nv * VEC + tid
        if tl < n:
            fi.store(p, start + tl, fi.load(sh, s0 + tl))

    if V4:
        @cuda.jit(device=True)
        def store_tile_v4(sh, so, p, start, n, mis, tid, ph):
            store_from(sh, so + ph, p, start, n, mis, tid, (mis + start) % VEC == ph)

        return store_tile_v4

    @cuda.jit(device=True)
    def store_tile(sh, so, p, start, n, mis, tid):
        store_from(sh, so, p, start, n, mis, tid, False)

    return store_tile
