"""Sizes of the values the kernels move as one piece, without numba: the elements of a
128-bit vector access, and the status words of the single-pass algorithms (a status and a
small value in one 8- or 16-byte word, :mod:`forge_array.intrinsics.words`).  The
intrinsics, the kernel factories and the dispatch tier's planning read these rules here.

>>> vector_elems("float32"), value_bytes(("float32", "float32")), words_for(("float64",))
(4, 8, 4)
"""

from __future__ import annotations

import numpy as np

__all__ = ["vector_elems", "value_bytes", "words_for"]


def vector_elems(dtype) -> int:
    """Elements of ``dtype`` per 128-bit access (at least 1).

    >>> vector_elems("float64"), vector_elems("uint8"), vector_elems("complex128")
    (2, 16, 1)
    """
    return max(1, 16 // np.dtype(dtype).itemsize)


def value_bytes(dtypes) -> int:
    """Bytes of a value of scalar members ``dtypes`` packed without padding.

    >>> value_bytes(("float32", "float32")), value_bytes(("float64",))
    (8, 8)
    """
    return sum(np.dtype(d).itemsize for d in dtypes)


def words_for(dtypes):
    """32-bit pieces of the word holding a uint32 status and a value of ``dtypes``: 2 (8
    bytes) for values of <= 4 bytes, 4 (16 bytes) for <= 12 bytes, else None (too large for
    one 128-bit access).

    >>> words_for(("float32",)), words_for(("float64",)), words_for(("float32",) * 3), words_for(("complex128",))
    (2, 4, 4, None)
    """
    nb = value_bytes(dtypes)
    if any(np.dtype(d).kind not in "biufc" for d in dtypes):
        return None
    if nb <= 4:
        return 2
    if nb <= 12:
        return 4
    return None
