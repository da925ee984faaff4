"""Fused expressions: element-wise chains computed inside the kernels that consume them.

- :mod:`.expr`: expression nodes and deferred arrays;
- :mod:`.codegen`: expressions to numba-compilable functions, cached by structure;
- :mod:`.build`: nodes from namespace calls, while a fused call is traced or in plain code;
- :mod:`.evaluate`: computing pending expressions in few launches;
- :mod:`.replay`: plans recorded per input signature and replayed;
- :mod:`.auto`: automatic fusion of plain code (what is deferred, when it is settled);
- :mod:`.trace`: the :func:`fuse` decorator and its ``explain``.

See ``docs/fusion.md``.
"""

from .trace import Fused, fuse

__all__ = ["fuse", "Fused"]
