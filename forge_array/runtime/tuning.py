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
from .caches import Cache, clear_all
from .flags import FLAGS, on_change

#: Launch parameters. A GPU's entry is ``default`` overridden, key by key, by its
#: architecture's entry and then by its own (see :func:`params`), so each family lists only
#: what differs. What each key means and the sweeps each value rests on: docs/tuning.md.
TABLES: dict = {
    "default": {
        # copy: vecs (128-bit vectors per thread), one_pass, load / store cache hints, realign
        # (how a misaligned view is realigned): dispatch/copy.py
        "copy": {"block": 256, "items": 4, "blocks_per_sm": 8, "vecs": 2, "one_pass": True,
                 "load_hint": "", "store_hint": "", "realign": "shfl"},
        "reduce": {"block": 256, "items": 4, "blocks_per_sm": 4},
        # moments: var / std of float32 arrays of at least shifted_min elements across their
        # innermost axis take the shifted float64 sums (primitives/reductions/named.py)
        "moments": {"shifted_min": 1 << 25},
        # map: the element-wise kernel of fused expressions (kernels/elementwise.py)
        "map": {"block": 256, "items": 2, "blocks_per_sm": 8},
        # compaction: run starts, selection and rank scatter of nonzero / unique
        # (kernels/compaction.py), one grid-stride pass each
        "compaction": {"block": 256, "blocks_per_sm": 8},
        # rows: row programs (kernels/row_programs.py): about `target` threads per row
        "rows": {"target": 128, "block_max": 1024, "min_row": 256, "blocks_per_sm": 32},
        # rowcol: the row and column kernels of reductions along axes and matrix-vector
        # products (dispatch/axis_reduce/plan.py reads the keys)
        "rowcol": {"block": 256, "blocks_per_sm": 8, "max_blocks_per_sm": 8, "unroll": 4, "row_items": 2,
                   "warp_rows": 32, "min_items": 16, "row_tile_max": 128, "row_tile_vecs": 4,
                   "row_tile_min_blocks": 4, "col_vec": True, "occupancy": False, "row_tile_warp": False,
                   "col_tile": 0, "col_min_blocks": 0, "col_flat": 256,
                   "row_multi": 8, "row_multi_unroll": 2, "col_tail": True, "row_fill": 0,
                   "col_vstore": False, "col_waves": 0, "col_round": False, "col_flat_group": 0,
                   "col_flat_min_blocks": 0, "col_combine": 2, "col_split_group": 0, "col_deep": 0,
                   "row_tile_accs": 1, "row_tile_banks": False, "row_tile_wide": False, "row_tile_v4": False,
                   "row_tile_vrow": 0, "row_tile_vrow_fill": 0, "row_tile_vrow_accs": 1,
                   "row_tile_vrow_fit": False,
                   "row_tile_held": 0, "col_unroll": None, "col_block": None, "col_min_items": None,
                   "col_preload": False},
        # scan: the 1-D and batched tile scans and the warp-specialised pipeline
        "scan": {"block": 256, "item_bytes": 64, "items_max": 32, "min_blocks": 5, "ticket": "atomic",
                 "persist": 0, "wide": True, "keep_items": False, "spin_ns": 0, "release": False,
                 "fit_items": True, "lookback": 1, "det_lookback": 8, "det_group": 32,
                 "det_groups": 32, "shared_vec": False,
                 "pipeline": False, "pipe_warps": 4, "pipe_vectors": 7, "pipe_stages": 3,
                 "pipe_blocks_per_sm": 0, "pipe_min": 0, "pipe_dynamic": False, "pipe_lookback": 1,
                 "pipe_row_tiles": 16, "pipe_lookers": 1, "pipe_group": 1, "vector": True,
                 "min_tiles": 0, "item_bytes_min": 16, "item_bytes_8": None},
        # scan_columns: scans along axes (column, staged-row and narrow-matrix kernels)
        "scan_columns": {"block": 256, "items": 32, "staged": True, "lookback": 1,
                         "warp_lookback_cols": 16, "rows_items": 16, "rows_staged_vecs": 8,
                         "rows_staged_max": 128, "rows_staged_block": 256, "rows_staged_bound": True,
                         "rows_staged_blocks_per_sm": 4, "narrow_max": 32, "narrow_block": 96,
                         "narrow_bytes": 384, "narrow_packed": 4, "narrow_wide": True,
                         "narrow_prefix_every": 1, "rows_staged_flags": True, "direct": True,
                         "direct_rows": 16, "direct_block": None, "direct_exact": True, "direct_vec": True,
                         "rows_column_max": None, "rows_staged_long_vecs": 0, "staged_strip": True,
                         "strip_block": None},
    },
    "sm90": {
        # H200 sweeps (python -m bench.tune), each value's figures in docs/tuning.md
        "copy": {"block": 128},
        "reduce": {"block": 512},
        "scan": {"item_bytes": 128, "shared_vec": True, "pipeline": True, "pipe_vectors": 13,
                 "pipe_stages": 4, "pipe_min": 1 << 26, "pipe_row_tiles": 0.5,
                 "min_tiles": 264, "item_bytes_min": 16, "ticket": "block"},
        "scan_columns": {"narrow_block": 160, "narrow_bytes": 272, "narrow_max": 256, "rows_staged_max": 4096,
                         "rows_staged_long_vecs": 32, "rows_column_max": 200,
                         "staged_strip": False, "strip_block": 512},
        "rowcol": {"occupancy": True, "row_tile_warp": True, "row_tile_min_blocks": 0, "col_tile": 32,
                   "col_min_blocks": 8, "row_tile_v4": True, "row_tile_vecs": 8, "row_fill": 2,
                   "col_vstore": True, "col_flat_group": 2, "col_min_items": 64, "col_block": 128,
                   "col_deep": 8, "row_tile_accs": 2, "col_combine": 8,
                   "row_tile_vrow": 4, "row_tile_held": 2, "row_tile_vrow_fill": 0.8,
                   "row_tile_vrow_fit": True, "col_preload": True},
    },
    "H100": {},
    "H200": {},
    "simulator": {
        "copy": {"block": 64, "items": 2, "blocks_per_sm": 2},
        "reduce": {"block": 64, "items": 2, "blocks_per_sm": 2},
        "moments": {"shifted_min": 64},
        "map": {"block": 64, "items": 2, "blocks_per_sm": 2},
        "compaction": {"block": 32, "blocks_per_sm": 2},
        "rows": {"target": 32, "block_max": 64, "min_row": 8, "blocks_per_sm": 2},
        "rowcol": {"block": 64, "blocks_per_sm": 2, "max_blocks_per_sm": 1, "unroll": 2, "row_items": 1,
                   "warp_rows": 4, "min_items": 2, "row_tile_max": 128, "row_tile_vecs": 2, "col_vec": True,
                   "col_flat": 64, "row_multi": 3, "col_vstore": True, "col_round": True,
                   "col_flat_group": 1, "col_split_group": 4},
        # det_lookback 1: deterministic scans of a few dozen tiles wait on the chain of prefixes
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
    """New overrides: every cache forgets what it holds (the plans made with the old
    parameters, with them the launches replayed from those plans)."""
    global OVERRIDES
    OVERRIDES = new
    clear_all()


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


def known_keys() -> dict:
    """Every kernel kind and the parameter names it takes (``None`` as a table's value: derived
    from another parameter, as its planner says): the keys of the tables of every family.

    >>> "block" in known_keys()["rowcol"]
    True
    """
    keys: dict = {}
    for table in TABLES.values():
        for kind, entry in table.items():
            keys.setdefault(kind, set()).update(entry)
    return keys


def check_overrides(overrides: dict) -> None:
    """ValueError naming each kind or parameter of ``overrides`` (the ``tuning`` flag's value)
    that no table has: a misspelt override would otherwise be ignored without a word.

    >>> check_overrides({"rowcol": {"block": 128}})
    >>> check_overrides({"rowcol": {"blocks": 128}})
    Traceback (most recent call last):
    ...
    ValueError: tuning overrides (FORGE_ARRAY_TUNING): unknown parameter 'blocks' of 'rowcol' (see docs/tuning.md)
    """
    keys = known_keys()
    for kind, entry in overrides.items():
        if kind not in keys:
            raise ValueError(f"tuning overrides (FORGE_ARRAY_TUNING): unknown kernel kind {kind!r}; "
                             f"the kinds are {', '.join(sorted(keys))}")
        unknown = sorted(set(entry) - keys[kind])
        if unknown:
            raise ValueError(f"tuning overrides (FORGE_ARRAY_TUNING): unknown parameter "
                             f"{', '.join(map(repr, unknown))} of {kind!r} (see docs/tuning.md)")


def params(kind: str) -> dict:
    """Launch parameters of kernel ``kind`` for the current device (a dict; do not mutate).
    ValueError where the ``tuning`` overrides name a kind or parameter no table has."""
    fam = family()
    key = (kind, fam)
    p = _CACHE.get(key)
    if p is None:
        check_overrides(OVERRIDES)
        p = {}
        for name in reversed(fam):  # least specific first, more specific entries override
            p.update(TABLES.get(name, {}).get(kind, {}))
        p.update(OVERRIDES.get(kind, {}))
        if not p:
            raise KeyError(f"no tuning parameters for kernel kind {kind!r}")
        _CACHE[key] = p
    return p
