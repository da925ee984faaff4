"""The scan's dispatch tier: :mod:`.plan` picks the kernel (one-pass tile scan with decoupled
look-back, pipelined tiles, row and column scans, narrow rows, the deterministic variant)
and its block, items per thread and grid for a layout from the tuning tables, compiles it
(:mod:`forge_array.kernels.scan`), launches it and keeps replayable plans per thread;
:mod:`.state` holds what the kernels keep between launches (tile status words with their
epochs, counters, look-back statistics, the tile sizes that fit shared memory).
"""

from .plan import cumulative_key, fast_key, fast_plans, launch_scan, layout_key, out_key, remember, run_fast, run_into
from .state import THREAD_LOCAL, scan_statistics, state_key

__all__ = ["cumulative_key", "fast_key", "fast_plans", "launch_scan", "layout_key", "out_key", "remember",
           "run_fast", "run_into", "THREAD_LOCAL", "scan_statistics", "state_key"]
