"""The scan's dispatch tier: :mod:`.plan` picks the kernel (one-pass tile scan with decoupled
look-back, pipelined tiles, row and column scans, narrow rows, the deterministic variant)
and its block, items per thread and grid for a layout from the tuning tables, compiles it
(:mod:`forge_array.kernels.scan`) and launches it; :mod:`.replay` keeps the replayable plans
per thread by call and replays them; :mod:`.state` holds what the kernels keep between
launches (tile status words with their epochs, counters, look-back statistics, the tile
sizes that fit shared memory).
"""

from .plan import ScanCall
from .replay import cumulative_key, fast_plans, launch, replayed, run_fast
from .state import scan_statistics, state_key

__all__ = ["ScanCall", "cumulative_key", "fast_plans", "launch", "replayed", "run_fast", "scan_statistics",
           "state_key"]
