"""Arrays split over several devices: ``forge_array.Sharding``.

A :class:`Sharding` lists devices and an axis; an array placed on it is split along that
axis into contiguous blocks, one per device (a device may be listed more than once). The
namespace's functions take sharded arrays wherever they have a sharded implementation:
element-wise functions and operators, reductions (``sum`` ... ``std``, ``argmax``,
``reduce`` / ``mapreduce`` with any operator), scans (``cumulative_sum``,
``cumulative_prod``, ``accumulate``), products with a vector (``matmul``, ``vecdot``,
``matvec``, ``vecmat``), casts, transposes and basic indexing. Every block runs the
namespace's own function on its device; work on all devices is issued before anything
waits. Any other function raises ``NotImplementedError`` naming itself and the gather to
use (``x.to_device("cuda:0")``).

```python
import forge_array as xp

sh = xp.Sharding(["cuda:0", "cuda:1", "cuda:2", "cuda:3"])     # split along axis 0
x = xp.asarray(data, device=sh)                                 # scatter from the host
s = xp.std(x, axis=0)                                           # combined on cuda:0
c = xp.cumulative_sum(x, axis=0)                                # sharded, like x
y = x.to_device("cuda:0")                                       # gather
```

See docs/scale-out.md.
"""

from ._core import ShardedArray, Sharding, block_sizes
from ._install import sharded_functions

__all__ = ["Sharding", "ShardedArray", "block_sizes", "sharded_functions"]
