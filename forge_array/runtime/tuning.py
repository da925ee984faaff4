"""Launch parameters per GPU family, kept as data (like CUB's tuning policies).

``params(kind)`` returns the entry for the current device: the first of its name's family
("H200", "H100"), its architecture ("sm90"), then "default"; the simulator uses the tiny
shapes of "simulator" so that multi-warp, multi-block and look-back paths run on small
inputs. Kernel authors add their kinds to every family.

The ``tuning`` flag (``FORGE_ARRAY_TUNING``, JSON, e.g. ``{"scan": {"item_bytes": 32}}``, or
``set_flags(tuning={...})``) overrides entries on top of all of that; ``bench/tune.py`` uses it
to sweep parameters on a GPU.

Example
-------
>>> p = params("copy")
>>> p["block"] % 32
0
"""

from __future__ import annotations

from . import backend, config
from .caches import Cache
from .flags import FLAGS, on_change

#: Launch parameters. A GPU's entry is ``default`` overridden, key by key, by its
#: architecture's entry and then by its own (see :func:`params`), so each family lists only
#: what differs. The values for H100 and H200 are the ones the H200 benchmarks were run with.
TABLES: dict = {
    "default": {
        # copy: vecs, one_pass, load_hint, store_hint, realign: see primitives/strided_copy.py; one pass,
        # 2 vectors per thread: H200 sweep tune-copy-vec (x[1:] 0.88 -> 0.97 of copy at 1e9)
        "copy": {"block": 256, "items": 4, "blocks_per_sm": 8, "vecs": 2, "one_pass": True,
                 "load_hint": "", "store_hint": "", "realign": "shfl"},
        "reduce": {"block": 256, "items": 4, "blocks_per_sm": 4},
        # moments: var / std of float32 arrays of at least shifted_min elements across their
        # innermost axis take the shifted sums (one pass of d = x - pivot and d * d summed in
        # float64, no division per element; primitives/reductions/named.py) instead of Welford
        # triples, whose merge divides at every element; below it the sums' finishing launches
        # cost more than the pass saves. python -m bench.suite_moments, H200, std(axis=0) µs
        # shifted / Welford: (2e7, 100) 2560 / 5972, (1e6, 100) 219 / 372, (1e5, 1000) 207 /
        # 352; (2e5, 128) 194 / 161, (1e6, 16) 202 / 109; along the innermost axis Welford
        # stays: (2e7, 100) axis 1 12461 / 5015
        "moments": {"shifted_min": 1 << 25},
        # map: the element-wise kernel of fused expressions (kernels/elementwise.py): 128-bit
        # vectors per thread per step, a capped grid-stride grid
        "map": {"block": 256, "items": 2, "blocks_per_sm": 8},
        # rows: row programs (kernels/row_programs.py): a block of about `target` threads per row
        # (up to block_max), rows of min_row .. MAX_ROW elements, blocks_per_sm in the grid.
        # H200, row softmax of float32 (10^5, 10^3) under xp.fuse (python -m bench.run --suite
        # fusion --filter softmax, FORGE_ARRAY_TUNING={"rows": {...}}): target 256 / 16 blocks
        # per SM 424 us, 128 / 16 347, 64 / 16 417, 512 / 16 555, 128 / 32 333; rows of 100
        # (10^6, 100) took 727-1133 us, slower than the rounds of launches, hence min_row 256
        "rows": {"target": 128, "block_max": 1024, "min_row": 256, "blocks_per_sm": 32},
        # rowcol: occupancy (grids / splits sized by the blocks that really fit per SM, one wave),
        # row_tile_warp (staged short rows: each warp on its own tiles), col_tile (threads side
        # by side in a column tile, 0 = up to a block), col_min_blocks (launch bound of the
        # vectorised column kernel, 0 = none), col_flat (flat column kernel for C-contiguous
        # matrices of up to this many columns, 0 = off), row_multi (rows per block of A @ x
        # with long rows, sharing each vector of x; < 2 = off), col_tail (vectorised column
        # kernel: a thread's last 1-3 rows in one round trip when no operand is broadcast;
        # H200, tune-coltail: sum(axis=0) (10, 10^7) 144 -> 135 us, (100, 10^6) 129 -> 122,
        # (10^3, 10^5) 119 -> 111; x @ A (10, 10^7) 150 -> 171, so not for x @ A); see
        # primitives/axis_reduce/plan.py; row_fill: blocks per SM the row kernel splits few groups
        # of long rows into (0 = off); col_vstore (vectorised column kernel: a thread's results
        # in one 128-bit store), col_waves (column kernel of at least a wave of tiles: split the
        # rows into up to this many parts so that the last wave is as full as possible; 0 = off),
        # col_round (split rows in whole unrolled rounds per thread), col_min_items (rows per
        # thread below which the column kernel stops sharing a tile's rows among threads where
        # the tiles still fill half a wave, else min_items; default min_items; splits of the
        # rows across blocks keep min_items), col_block (threads per block of the vectorised
        # column kernel; default block),
        # col_flat_group (flat column kernel: partials combined in two levels, groups of R * U
        # blocks, R rows per column position; 0 = one level, the last block reads them all),
        # row_tile_accs (staged short rows of one operand and <= 16 elements: partial results
        # per lane, 1, 2 or 4),
        # col_flat_min_blocks (launch bound of the flat column kernel, 0 = none), col_combine
        # (vectorised column kernel split across blocks: rows of partials in flight per thread
        # of the last block, 2, 4 or 8), col_split_group (tiles split into at least this many
        # parts combine in two levels, groups of ceil(sqrt(parts)); 0 = one level), col_deep
        # (vectorised column kernel with occupancy: launches whose tiles split their rows
        # across blocks in one wave, at least 2 * col_deep rows per thread, take a kernel with
        # col_deep rows in flight per thread and no launch bound; 0 = off)
        "rowcol": {"block": 256, "blocks_per_sm": 8, "max_blocks_per_sm": 8, "unroll": 4, "row_items": 2,
                   "warp_rows": 32, "min_items": 16, "row_tile_max": 128, "row_tile_vecs": 4,
                   "row_tile_min_blocks": 4, "col_vec": True, "occupancy": False, "row_tile_warp": False,
                   "col_tile": 0, "col_min_blocks": 0, "col_flat": 256,
                   "row_multi": 8, "row_multi_unroll": 2, "col_tail": True, "row_fill": 0,
                   "col_vstore": False, "col_waves": 0, "col_round": False, "col_flat_group": 0,
                   "col_flat_min_blocks": 0, "col_combine": 2, "col_split_group": 0, "col_deep": 0,
                   "row_tile_accs": 1},
        # scan: ticket "atomic" | "block" | "persist" (+ "persist": blocks per SM, 0 = min_blocks);
        # wide: 16-byte status words for 5-12 byte values; keep_items: items in registers
        # across the look-back; spin_ns: look-back back-off; release: fence before publishing
        # lookback: predecessors per lane in one look-back round trip (H200 sweep tune-stripe2:
        # 1 beats 4 by 17% at 10^8 float32, 19% float64); det_lookback: the same in deterministic
        # mode, where a tile waits for the PREFIX of the tile 32 * det_lookback before it (a
        # chain of tiles / (32 * det_lookback) hops; python -m bench.tune --suite scan --filter
        # deterministic --sizes 1e7,1e8,1e9 --grid '{"scan": {"det_lookback": [1, 2, 4, 8, 16]}}'
        # at 758b51d, H200, float32 µs at 10^7 / 10^8 / 10^9: 1: 94 / 479 / 4195, 4: 72 / 369 /
        # 3256, 8: 69 / 365 / 3342, 16: 71 / 401 / 3762; the same sweep at ca31ee9, 10^8 and
        # 10^9 on the pipelined kernel, default mode 255 / 2254 in that run: 2: 756 / 6396, 4:
        # 413 / 3642, 8: 336 / 3025, 16: 451 / 4399, 32: 584 / 5489 -- short windows wait on the
        # chain, long ones on their own reads); det_group, det_groups: the deterministic
        # look-back in groups of det_group tiles whose last tile publishes the group's aggregate,
        # a tile reading the PREFIX det_groups groups back (kernels/scan/lookback.py
        # make_group_lookback; 0: the fixed window of det_lookback). python -m bench.tune
        # --suite scan --filter deterministic --sizes 1e7,1e8,1e9 --configs '[{"scan":
        # {"det_group": 0}}, {"scan": {"det_group": 32, "det_groups": 32}}, ...]' at 6c44c1c with
        # the group look-back, H200, float32 deterministic / default µs at 10^7 / 10^8 / 10^9:
        # window 65 / 58, 309 / 250, 2902 / 2322; groups of 32 x 8 67 / 64, 249 / 250, 2332 /
        # 2394; x 16 66 / 65, 263 / 260, 2350 / 2227; x 32 66 / 67, 247 / 250, 2322 / 2402; x 64
        # 59 / 70, 277 / 280, 2402 / 2385; shared_vec: whole tiles through
        # shared memory as 128-bit vectors (kernels.scan.make_tile_scan); pipeline: the
        # warp-specialised scan of kernels.scan.pipeline (pipe_warps per squad, pipe_vectors
        # odd, pipe_stages buffers, pipe_blocks_per_sm 0 = as shared memory allows) for scans of
        # at least pipe_min elements (all rows together; pipe_dynamic: tile buffers in dynamic
        # shared memory even when they would fit in static; pipe_lookback: the pipeline's
        # predecessors per lane in one look-back round trip; pipe_row_tiles: rows of a batch
        # shorter than this many tiles (a float) keep the tile scan; pipe_lookers: look-back warps per
        # block, 1 or 2, taking the tiles in turn; pipe_group: consecutive tiles per ticket)
        "scan": {"block": 256, "item_bytes": 64, "items_max": 32, "min_blocks": 5, "ticket": "atomic",
                 "persist": 0, "wide": True, "keep_items": False, "spin_ns": 0, "release": False,
                 "fit_items": True, "lookback": 1, "det_lookback": 8, "det_group": 32,
                 "det_groups": 32, "shared_vec": False,
                 "pipeline": False, "pipe_warps": 4, "pipe_vectors": 7, "pipe_stages": 3,
                 "pipe_blocks_per_sm": 0, "pipe_min": 0, "pipe_dynamic": False, "pipe_lookback": 1,
                 "pipe_row_tiles": 16, "pipe_lookers": 1, "pipe_group": 1},
        # scan_columns.staged: blocks whose elements form one dense range stage it through shared memory
        # lookback: chunks per round trip of a column's look-back (0: 8, 4 for 16-byte words;
        # H200 sweep tune-scan4: 1 takes axis 0 of (10^4, 10^4) from 410 to 356 us)
        # items 32: axis 0 of (10^4, 10^4) 356 -> 306 us on the H200 (tune-scan5)
        # warp_lookback_cols: blocks of at most this many columns look back with a warp per
        # column (H200, axis 0 of (10^7, 10): 605 -> 544-566 us, tune-scan6)
        # rows_items: items of the same kernel for many short rows (32 made axis 1 of
        # (10^7, 10) 2.5x slower than 16: tune-scan5)
        # rows_staged_vecs: many short rows (at most rows_staged_max elements) of a 4- or 8-byte
        # dtype scanned in place in shared memory by warps (kernels.scan.make_row_scan), tiles
        # of this many 16-byte vectors per lane (0 = off: the column kernel takes them);
        # rows_staged_long_vecs: rows longer than that tile take tiles of 2, 4 ... times as
        # many vectors, up to this many (the smallest that holds a row; blocks and blocks per
        # SM scaled to keep shared memory per block; 0 = off); rows_staged_flags: the staged
        # kernel takes include_initial / exclusive rows (shifted as they are stored) and
        # reversed rows too (False: they go to the column or tile kernels, as the flags' absence does);
        # rows_staged_bound: a launch bound where registers would keep some of the grid's
        # blocks per SM from being resident (H200, bench.tune sweep of scan_columns.rows_staged_bound: rows of
        # 1000 include_initial 408 -> 327 us, int32 -> int64 rows of 10 540 -> 385);
        # rows_column_max: many short rows that the staged kernel does not take go to the
        # column kernel up to this length (absent: a quarter of the tile scan's tile)
        # narrow_max: axis 0 of C-contiguous matrices of 2 .. narrow_max (<= 32) columns scanned
        # as rows of p-vectors (kernels.scan.narrow; 0 = off), blocks of narrow_block threads,
        # narrow_bytes of tile per thread, narrow_packed: packed status words per (tile, column),
        # that many tiles per round trip of a lane's look-back (0: a flag word per tile);
        # narrow_wide: 8 vector loads in flight per thread while staging (else 4).
        # H200, axis 0 of (10^7, 10) (bench.tune sweeps of scan_columns.narrow_*): column kernel 680-707 us; flag
        # words with blocks of 256 x 128 bytes 830, 128 x 256 bytes 565-576; packed 4 at
        # 128 x 256: 402; dense conflict-free tiles: 362; 96 x 384 bytes, 8 loads in flight: 328
        "scan_columns": {"block": 256, "items": 32, "staged": True, "lookback": 1,
                         "warp_lookback_cols": 16, "rows_items": 16, "rows_staged_vecs": 8,
                         "rows_staged_max": 128, "rows_staged_block": 256, "rows_staged_bound": True,
                         "rows_staged_blocks_per_sm": 4, "narrow_max": 32, "narrow_block": 96,
                         "narrow_bytes": 384, "narrow_packed": 4, "narrow_wide": True},
    },
    "sm90": {
        # H200, bench.tune --suite copy sweep of copy.block: 128-thread blocks, x[1:] 1e9 0.97 -> 0.99 of copy, aligned
        # 1e8 0.96 -> 0.99
        "copy": {"block": 128},
        "reduce": {"block": 512},
        # shared_vec (bench.tune sweep, H200): 1-D scans at 10^8 / 10^9 float32 282-297 /
        # 2746-2751 -> 285-288 / 2690-2702 us, float64 526-540 / 5324-5330 -> 513-515 / 5189-5196,
        # int32 290-302 / 2554-2665 -> 280-281 / 2504-2519; the axis scans unchanged
        # pipeline (bench.tune sweep, H200): warp-specialised blocks of 4 + 4 warps x 9
        # vectors x 4 buffers for scans of >= 2^28 elements: 10^9 float32 2701 / 2788 -> 2583 /
        # 2590 us, float64 5200 / 5275 -> 4934 / 4970, int32 2512 / 2516 -> 2411 / 2407; at
        # 10^8 it is level with the tile scan (281-298 either way), hence the threshold
        # pipe_vectors 13, pipe_min 2^26 (bench.tune sweep, H200): 4 + 4
        # warps x 13 vectors x 4 buffers (2 blocks per SM) against 9 vectors / the tile scan:
        # float32 10^8 297 -> 275-277 us, 10^9 2574-2584 -> 2429-2430; float64 546-591 ->
        # 476-477, 4899-4952 -> 4515-4523; int32 280-285 -> 262-266, 2398-2406 -> 2265; at 10^7
        # the tile scan stays (52-57 us against 72-76); wider squads of the same tile lost
        # pipe_row_tiles 0.5 (bench.tune sweep, H200): with
        # partial tiles moved by bulk copies, rows from half a pipelined tile up
        # take the pipeline: axis 1 of (10^4, 10^4) float32 316-317 -> 257-261 us, (1000,
        # 10^5) 277 -> 243, float64 (20000, 5000) 582 -> 439-458, (33333, 3000) 598 -> 468-487;
        # rows of a quarter tile lost (float32 3000: 420 -> 566, float64 1500: 683 -> 819)
        # min_tiles 128, item_bytes_min 16 (bench.tune sweep scan-mid, H200, 405d048: item_bytes
        # x block over 1-D float32 cumulative_sum): tiles of 8192 left mid sizes on few SMs
        # (10^5: 13 blocks); best per size was item_bytes 16 at 10^4 (16.0-17.0 against 30.6 us)
        # and 10^5 (17.9 against 34.1), 64 at 10^6 (23.0 against 33.9), 128 from 10^7 (55.5-61.0):
        # the largest tile that still gives ~128 tiles (one per SM)
        # ticket "block", min_tiles 264 (python -m bench.tune --suite scan --filter
        # "cumulative_sum float32 n=,cumulative_sum float64 n=,cumulative_sum int32 n=" --sizes
        # 1e3,1e4,1e5,1e6,1e7,3e7 --configs '[{}, {"scan": {"ticket": "block", "min_tiles":
        # 264}}]', H200, 6dbb322, two runs of each): tiles by block index (no atomic ticket, no
        # barrier before the loads) and ~2 tiles per SM before tiles shrink; float32 10^5
        # 17.6 / 16.7 -> 16.9 / 17.0 us, 10^6 21.9 / 21.1 -> 21.3 / 20.7, 10^7 51.9 / 51.0 ->
        # 49.3 / 47.4, 3*10^7 102.4 / 100.9 -> 98.3 / 96.6; float64 10^7 77.2 / 75.0 -> 72.5 /
        # 70.6; int32 10^7 54.9 / 55.1 -> 51.9 / 49.5; axis scans (10^7, 10^8 elements) and the
        # deterministic scan unchanged or faster (10^7: 58.4 / 56.5 -> 54.4 / 54.3); with the
        # block ticket the tiles stay 128 bytes per thread x 256 (bench.tune --grid '{"scan":
        # {"item_bytes": [32, 64, 128], "block": [128, 256]}}', 53063bd, float32 10^7: 32 B
        # 69-78 us, 64 B 51-56, 128 B 48-49; 3*10^7: 177-201, 124-131, 100-102)
        "scan": {"item_bytes": 128, "shared_vec": True, "pipeline": True, "pipe_vectors": 13,
                 "pipe_stages": 4, "pipe_min": 1 << 26, "pipe_row_tiles": 0.5,
                 "min_tiles": 264, "item_bytes_min": 16, "ticket": "block"},
        # H200, bench.tune sweeps of rowcol over the reduce and matvec suites: best overall of the variants
        # row_tile_vecs 8 (bench.tune sweep, H200): sum(axis=1) of (10^7, 10)
        # 177 -> 144 and 174 -> 141 us, A @ x (10^7, 10) 180 -> 146 and 175 -> 147 us; 16 vectors
        # and 8 loads in flight (row_tile_wide) were no better
        # row_fill 2 (bench.tune sweep, H200): A @ x (10, 10^6) 33.5 / 31.5 -> 29.1 us, (100, 10^5)
        # 32.9 / 34.4 -> 28.0 us; the n*p = 10^8 and 10^9 shapes unchanged
        # col_vstore (bench.tune sweeps of rowcol.col_*): sum(axis=0) of
        # (10, 10^7) 131 -> 118 us, x @ A 146 -> 132; col_flat_group 2: sum(axis=0) (10^6, 100)
        # 123-134 -> 108-111, x @ A (10^5, 100) 38.5 -> 31.7; col_min_items 64: (100, 10^6) sum
        # 119 -> 105, x @ A 126 -> 108; 128-thread vectorised column blocks, 8 per SM (64
        # registers, as 256 x 4): (10^3, 10^5) sum 110 -> 105, x @ A 116-123 -> 108
        # col_deep 8 (bench.tune sweep, H200): x @ A (10^4, 10^4) 122 -> 113 us, (10^5, 10^3)
        # 130 -> 115, n*p = 10^7 (10^4, 10^3) 35 -> 30-32, n*p = 10^9 (10^5, 10^4) 997-1004 ->
        # 933-935, int32 (10^5, 10^3) 130 -> 115-116, sum(axis=0) (10^4, 10^4) 114-116 -> 110-111;
        # the launches it does not take unchanged; row_tile_accs 2 (bench.tune sweep, H200): sum(axis=1) of (10^7, 10)
        # 139.3 / 139.3 -> 125.5 / 124.6 us
        # narrow-matrix scan tiles of 160 threads x 272 bytes (bench.tune sweep, H200): axis 0 of (10^7, 10) float32
        # 333-375 us (96 x 384) -> 308-335
        # rows_staged_max 4096, rows_staged_long_vecs 32, rows_column_max 200 (bench.tune sweep, H200): the staged
        # kernel's warps scan
        # tiles of fewer than 32 rows as one segmented sequence, so rows of 130 .. 2048 float32
        # (130 .. 1024 float64) leave the column kernel: float32 rows of 130 2874 -> 309 us,
        # 300 2630 -> 291-298, 1000 1998 -> 292-297, 2000 1860 -> 299 (tile scan 469); float64
        # rows of 600 2667 -> 536, 1000 2652 -> 532. Tiles of 16 vectors only past the 8-vector
        # tile (rows of 10: 244 -> 286 us with 16), 32 past the 16-vector one (float32 rows of
        # 2500 475 -> 348, 3000 412 -> 336, 3300 493 -> 322, 4000 450 (pipeline) -> 313; float64
        # 1500 681 -> 577, 2000 662 -> 549; rows of 1500-2000 float32: 297-312 with 16 against
        # 312-346 with 32). Rows the staged kernel does not take (a
        # conversion, include_initial, strided rows) keep the column kernel up to 200
        # elements (130: 2874 against the tile scan's 3987 us; 300: 2630 against 1865)
        # col_combine 8 (bench.tune sweep, H200): x @ A (10^4, 10^3) 20.9 -> 19.9-20.0 us (4: 20.3); x @ A
        # (10^3, 10^4), (10^5, 10^2), sum(axis=0) (10^4, 10^4), (10^3, 10^5) within 0.1 us
        "scan_columns": {"narrow_block": 160, "narrow_bytes": 272, "rows_staged_max": 4096,
                         "rows_staged_long_vecs": 32, "rows_column_max": 200},
        "rowcol": {"occupancy": True, "row_tile_warp": True, "row_tile_min_blocks": 0, "col_tile": 32,
                   "col_min_blocks": 8, "row_tile_v4": True, "row_tile_vecs": 8, "row_fill": 2,
                   "col_vstore": True, "col_flat_group": 2, "col_min_items": 64, "col_block": 128,
                   "col_deep": 8, "row_tile_accs": 2, "col_combine": 8},
    },
    "H100": {},
    "H200": {},
    "simulator": {
        "copy": {"block": 64, "items": 2, "blocks_per_sm": 2},
        "reduce": {"block": 64, "items": 2, "blocks_per_sm": 2},
        "moments": {"shifted_min": 64},
        "map": {"block": 64, "items": 2, "blocks_per_sm": 2},
        "rows": {"target": 32, "block_max": 64, "min_row": 8, "blocks_per_sm": 2},
        "rowcol": {"block": 64, "blocks_per_sm": 2, "max_blocks_per_sm": 1, "unroll": 2, "row_items": 1,
                   "warp_rows": 4, "min_items": 2, "row_tile_max": 128, "row_tile_vecs": 2, "col_vec": True,
                   "col_flat": 64, "row_multi": 3, "col_vstore": True, "col_round": True,
                   "col_flat_group": 1, "col_split_group": 4},
        # det_lookback 1: deterministic scans of a few dozen tiles wait on the chain of PREFIXes
        "scan": {"block": 64, "item_bytes": 16, "items_max": 4, "shared_vec": True,
                 "pipe_warps": 2, "pipe_vectors": 1, "pipe_stages": 3, "pipe_blocks_per_sm": 1,
                 "pipe_row_tiles": 2, "det_lookback": 1, "det_group": 4, "det_groups": 2},
        # warp look-backs are slow in the simulator (32 simulated lanes per column): off, except
        # in the tests that ask for them
        "scan_columns": {"block": 64, "items": 2, "warp_lookback_cols": 0, "rows_staged_vecs": 1,
                         "rows_staged_block": 64, "rows_staged_blocks_per_sm": 1,
                         "narrow_block": 64, "narrow_bytes": 16, "narrow_packed": 0},
    },
}

_CACHE = Cache("runtime.tuning.CACHE")


#: entries of the ``tuning`` flag (``FORGE_ARRAY_TUNING``), applied after the tables
OVERRIDES: dict = FLAGS["tuning"].cell[0]


@on_change("tuning")
def _retuned(old, new):
    global OVERRIDES
    OVERRIDES = new
    _CACHE.clear()


def family() -> tuple:
    """Table names to consult for the current device, most specific first: its name's family
    and the architecture kernels are compiled for (:func:`.backend.target_cc`: the device's,
    or an older one that ``FORGE_ARRAY_TARGET_CC`` names, whose table then applies alone)."""
    if config.SIMULATE:
        return ("simulator", "default")
    info = backend.device_info()
    cc = backend.target_cc()
    names = [n for n in ("H200", "H100") if n in info["name"]] if cc == tuple(info["cc"]) else []
    names.append("sm%d%d" % cc)
    names.append("default")
    return tuple(names)


def params(kind: str) -> dict:
    """Launch parameters of kernel ``kind`` for the current device (a dict; do not mutate)."""
    fam = family()
    key = (kind, fam)
    p = _CACHE.get(key)
    if p is None:
        p = {}
        for name in reversed(fam):  # least specific first, more specific entries override
            p.update(TABLES.get(name, {}).get(kind, {}))
        p.update(OVERRIDES.get(kind, {}))
        if not p:
            raise KeyError(f"no tuning parameters for kernel kind {kind!r}")
        _CACHE[key] = p
    return p
