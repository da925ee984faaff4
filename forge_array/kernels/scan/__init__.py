"""Single-pass scans with decoupled look-back (Merrill & Garland, NVR-2016-002).

Two kernels, both generic over the operator (any associative ``op``, commutative or not,
on scalars or tuples) and the value type, specialised at compile time by their factories:

``make_tile_scan``  (rows: the scan axis is walked in tiles of ``block * items`` elements)
    1. A tile id from an atomic counter (``atomic_add``), so that every predecessor of a
       tile is already running: correctness never depends on block scheduling. Tile ``t``
       is tile ``t % tiles_per_row`` of row ``t // tiles_per_row``; look-back stops at the
       row's first tile, so a batch of rows (any strides) is scanned in ONE launch.
    2. Warp-striped coalesced loads (128-bit ``vload`` when the row is contiguous; tiles
       are shifted by ``lead`` elements so that they start 16-byte aligned), all of a
       thread's loads issued before the first use, then through the warp's part of shared
       memory so that each thread owns ``items`` consecutive elements (CUB's
       BLOCK_LOAD_WARP_TRANSPOSE; padded against bank conflicts; a warp barrier only).
    3. Thread-sequential reduce (a scalar's items stay in registers for step 5), warp scan
       through shuffles, block combine.
    4. Warp 0 looks back over a window of ``32 * lookback`` predecessor tiles (lane ``l``
       reads ``lookback`` consecutive ones; 1 by default: on an H200 a window of 32 beat
       one of 128 by 17-19%, see docs/scans.md); a status word per tile
       says INVALID (0), AGGREGATE (1, the tile's own total) or PREFIX (2, inclusive of
       every tile before it). For values of <= 12 bytes, status and value share ONE 8- or
       16-byte word (CUB's transaction word), written and read with ONE relaxed vector
       access (:mod:`..intrinsics.words`: no fence, no release store); larger values use a
       flag word plus separate aggregate and prefix slots (values written before the flag's
       release; one fence after the flags are read, before the values are). The window is folded by a warp scan of a
       *segmented* operator that restarts at the last PREFIX lane.
    5. Second thread-sequential pass with the prefix; results go back through the warp's
       part of shared memory and out with warp-striped coalesced stores, 128-bit when the
       output tile has the input's 16-byte phase (``ovec``). Every input element is read
       once, every output element written once. Block barriers per tile: the ticket, the
       warp totals and the look-back result (three).

``make_column_scan``  (columns: threads own columns, walk down the scan axis)
    For scans whose batch axis is the contiguous one (axis 0 of a C-contiguous matrix):
    a block covers ``cb`` columns x ``block // cb`` groups of ``items`` rows; loads are
    coalesced across columns; groups combine through shared memory and each column looks
    back (serially) over the chunks above it.

Status words carry an *epoch* (launch generation, kept on the host per status buffer):
a word from an older launch reads as INVALID, so no launch ever zeroes the status array.
Tile ids come from a monotone 64-bit counter minus a host-kept ``base``: no reset either.

Exclusive results and ``include_initial`` are an output shift (``shift = 1``): element
``k``'s inclusive result is written at ``k + 1`` and the initial value at 0 (the last one
is dropped for exclusive scans, ``m = n``). ``reverse`` is a negative-stride view.

``det`` (deterministic): the exclusive prefix of a tile is always the same fold of the same
published states in a fixed tree, whatever the timing. With packed status words the tiles
form groups whose last tile publishes the group's aggregate (from aggregates only), and
tile ``t`` of group ``g`` folds ``PREFIX`` of the tile before group ``g - groups``, the
aggregates of groups ``g - groups .. g - 1`` and those of its own group's earlier tiles
(:func:`.lookback.make_group_lookback`): a chain of prefixes ``groups * group`` tiles a hop;
otherwise (flag-and-slot words, the column scans) ``PREFIX(t - W) . AGG(t - W + 1) . ... .
AGG(t - 1)`` over a fixed window ``W`` (see docs/scans.md).

Values are tuples inside the kernels (a scalar is a 1-tuple); statuses travel as *tagged*
tuples ``(kind, *value)`` with kind EMPTY (0, no value: operators need no identity),
AGG (1) or PREFIX (2).

Example (the public way in is :func:`forge_array.primitives.accumulate`):

>>> import numpy as np
>>> from forge_array.kernels.scan import tagged_combine
>>> comb = tagged_combine(lambda a, b: (a[0] + b[0],), device=False)
>>> comb((1, 2.0), (1, 3.0)), comb((2, 2.0), (0, 9.0)), comb((1, 2.0), (2, 5.0))
((1, 5.0), (2, 2.0), (2, 5.0))
"""


from ..scan_spec import STAT_AGG_WINDOWS, STAT_SPINS, STAT_WORDS, ovec_ok, packable, status_words
from .column import make_column_scan
from .column_direct import make_column_direct
from .lookback import AGG, COUNT, EMPTY, PREFIX, tagged_combine, value_op
from .row import make_row_scan
from .tile import make_tile_scan

__all__ = [
    "EMPTY", "AGG", "PREFIX", "COUNT", "packable", "status_words", "ovec_ok", "value_op", "tagged_combine",
    "make_tile_scan", "make_column_scan", "make_column_direct", "make_row_scan", "STAT_SPINS",
    "STAT_AGG_WINDOWS", "STAT_WORDS",
]
