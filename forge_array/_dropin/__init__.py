"""Backend-generic drop-in reductions, scans and matrix-vector products with CuPy's
signatures (the engine of :mod:`forge_array.cupy`).

:class:`DropIn` builds, over an array module ``xp`` (``cupy`` on a GPU; ``numpy`` in the
simulator, which is how CI tests it), functions named and called like CuPy's (``sum``,
``prod``, ``max``/``amax``, ``min``/``amin``, ``mean``, ``var``, ``std``, ``argmax``,
``argmin``, ``any``, ``all``, ``cumsum``, ``cumprod``, ``nansum``, ``nanmax``, ``nanmin``,
``dot``, ``matmul``, ``vdot``, ``inner``) and the matching ``ndarray`` methods. Each one
runs on the primitives (:mod:`forge_array.primitives`) when our kernels take the array
(``runtime.kernels_available``) and the call is one they cover, and otherwise calls the
function it replaces -- captured when the :class:`DropIn` is built, so fallbacks never
recurse into a patched module -- with the same arguments: unsupported dtypes (float16,
complex for orderings), ``out=`` arrays of another dtype or shape, N-D @ N-D products
(cuBLAS), bad axes (the original raises its own error)...

Dtype rules are NumPy's, as CuPy follows them: ``sum``/``prod``/``cumsum``/``cumprod`` of
bool and integers narrower than 64 bits accumulate in int64 / uint64, ``mean``/``var``/
``std`` of integers give float64, ``argmax`` with ``axis=None`` gives the flat index,
NaN propagates through ``max``/``min`` and is skipped by ``nanmax``/``nanmin``/``nansum``.

>>> import numpy as np
>>> d = DropIn(np)
>>> x = np.arange(6, dtype=np.int32).reshape(2, 3)
>>> int(d.sum(x)), d.sum(x).dtype.name
(15, 'int64')
>>> d.cumsum(np.array([1, 2, 3], dtype=np.uint8)).tolist()
[1, 3, 6]
>>> d.argmax(np.array([[1, 9], [9, 2]])).tolist()        # flat index of the first maximum
1
"""


from .dropin import FUNCTIONS, METHODS, DropIn, namespace

__all__ = ["DropIn", "FUNCTIONS", "METHODS", "namespace"]
