"""The axis reduction's dispatch tier (reductions along some axes, and the matrix-vector
products built on them): :mod:`.plan` picks the kernel kind, block, grid and scratch of a
layout from the tuning tables and compiles the kernels (:mod:`forge_array.kernels.rowcol`);
:mod:`.layout` flips negative strides, collapses dimensions, caches plans by layout
(``PLANS``) and runs them; :mod:`.replay` keeps a planned launch per call (``FAST``) that
later calls of the same layout replay with no planning.
"""

from .layout import PLANS, AxisReduction, layout_key, run_kernels
from .plan import entry_dtype
from .replay import FAST, Replay, axis_fast, axis_hot_key, fast_key, launch, remember, replayed

__all__ = ["PLANS", "AxisReduction", "layout_key", "run_kernels", "entry_dtype", "FAST", "Replay", "fast_key",
           "remember", "axis_fast", "axis_hot_key", "replayed", "launch"]
