"""Row and column kernels: ``out[r] = op-reduce_j f(A0[r, j], A1[r, j], ...)``.

One implementation serves the axis reductions (``x = None``: one input) and the
matrix-vector products (``y = A @ x`` is the row reduction of ``f = multiply`` over the
inputs ``(A, x)`` where ``x`` has row stride 0). KernelForge's layout (its Figure 2):

- :func:`make_row_kernel` reduces along the *contiguous* axis (each output reads one
  row of consecutive elements).

  * ``G <= 32`` (short rows): lanes split into groups of ``G`` lanes; a group owns one
    row (``G = 32``: one warp per row; ``G = 8``: four rows per warp, e.g. ``p = 10``).
    Group totals by ``shfl_down`` inside the warp. Grid-stride over rows.
  * ``G == BLOCK`` (long rows): ``SPLIT`` blocks per row; each reduces its chunk with a
    block reduction; for ``SPLIT > 1`` each writes a partial, takes an atomic ticket,
    and the last block of the row combines the partials and resets the ticket. No float
    atomics: results are the same run to run.
  * 128-bit loads (``VEC > 1``) when the rows are contiguous: scalar head up to the
    16-byte boundary, vector body, scalar tail.

- :func:`make_col_kernel` reduces *across* the contiguous axis: a block owns a tile of
  ``C`` consecutive outputs; thread ``t`` owns output ``t % C`` and rows ``t // C`` +
  ``k * (BLOCK // C)``, so a warp reads consecutive elements (coalesced) even when
  there are few outputs (``C = 10``: a warp covers 3.2 rows; the "warp-cooperative"
  layout of tall, narrow matrices). Per-output partials are combined through shared
  memory; ``SPLIT`` blocks share a tile's rows (partials + last-block ticket as above).

- :func:`make_rowtile_kernel` (short rows, adjacent and contiguous: a block stages tiles of
  whole rows into shared memory with 128-bit loads, groups of ``G`` lanes reduce a row each)
  and :func:`make_colvec_kernel` (``VEC`` adjacent outputs per thread, one 128-bit load per
  row and operand) are the vectorised fast paths of the two; the host picks them when the
  layout allows (see :mod:`forge_array.primitives.axis_reduce`).

- :func:`make_rowmulti_kernel` is the long-row kernel of ``A @ x`` with several rows per
  block, so that each vector of ``x`` is loaded once for all of them.
- :func:`make_colflat_kernel` reduces across the rows of a thin C-contiguous matrix
  (``p = 10``: ``x @ A``, ``sum(A, axis=0)``) read as one flat run of 128-bit vectors, each
  thread's lanes keeping their columns from step to step (the grid is sized for that).

Layout of every kernel's arguments (the host flattens any view into this, see
:mod:`forge_array.primitives.axis_reduce`):

``(ins, out, part, tick, nb, nr, m0, m1, SB, SR, S0, S1, ob, orr, kb, L0, L1, chunk, aux)``

- ``ins``: tuple of the ``K`` input buffers (each a buffer or a tuple of buffers).
- ``out``: result buffer(s) of the accumulator type; element ``(b, i)`` at
  ``b * ob + i * orr``. ``part``: partials (``SPLIT > 1``; else any buffer of that
  type); ``tick``: zeroed uint32 tickets, left zeroed.
- output rows ``(b, i)`` in ``nb x nr``; reduction index ``j`` in ``m0 * m1`` =
  ``(j0, j1)``. Input ``k``'s element is at
  ``b * SB[k] + i * SR[k] + j0 * S0[k] + j1 * S1[k]``.
- with ``INDEX``, ``f`` also receives ``kb + j0 * L0 + j1 * L1`` (the position of the
  element in the reduced axes, for argmax / argmin).
- ``chunk``: reduction elements per split block. ``aux``: the 16-byte misalignment of
  input 0's origin in elements (row kernel with ``VEC > 1``), or ``C`` (column kernel).

Values are scalars or tuples (struct-of-arrays in memory, tuples in registers): ``ID``
(the identity of ``op``, a NumPy scalar or tuple of them) fixes the accumulator type, and
every ``f`` / ``op`` result is converted to it. ``op`` must be associative; the kernels
combine in index order inside a lane/group/block but lanes take strided elements, so a
non-commutative ``op`` is only correct where the primitive says so (it is the caller's
contract that ``op`` is commutative).

Example
-------
>>> import numpy as np
>>> k = make_row_kernel(lambda a, b: a * b, lambda a, b: a + b, 2, np.dtype("float32"),
...                     np.float32(0), False, None, 32, 64, 1, False, False, 1, 1)
>>> callable(k)
True
"""


from .colflat import make_colflat_kernel
from .columns import make_col_kernel, make_colvec_kernel
from .common import MAX_INPUTS
from .rows import make_row_kernel, make_rowmulti_kernel
from .rowtile import make_rowtile_kernel

__all__ = ["MAX_INPUTS", "make_col_kernel", "make_colflat_kernel", "make_colvec_kernel",
           "make_row_kernel", "make_rowmulti_kernel", "make_rowtile_kernel"]
