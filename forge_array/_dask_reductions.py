"""Several reductions of one ``dask.array`` in one graph, each chunk read by one task.

Dask builds one graph per reduction: ``x.sum()``, ``x.max()`` and ``x.std()`` computed
together still read every chunk three times, in three tasks. :func:`reductions` makes one
task per chunk that computes every requested reduction of that chunk with forge_array (a
CuPy chunk on our kernels, where sibling reductions of one operand are computed in one pass
over it; a NumPy chunk on the CPU), then merges the chunks' partial results in a tree, per
group of chunks that share their position along the axes not reduced, and assembles each
result as a ``dask.array``. Partial results are small backend arrays (NumPy or CuPy, as the
chunks): ``sum``/``prod``/``max``/``min``/``any``/``all`` merge with their own operation,
``mean`` as (sum, count), ``var``/``std`` as Welford triples (count, mean, M2) merged with
Chan's formula.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

__all__ = ["reductions", "NAMES"]

#: the reductions :func:`reductions` computes
NAMES = ("sum", "prod", "max", "min", "any", "all", "mean", "var", "std")
_SPLIT = 8   # partials merged per task of the tree


def _backend(a):
    if a is not None and type(a).__module__.startswith("cupy"):
        import cupy  # noqa: PLC0415

        return cupy
    return np


def _chunk_partials(chunk, names, axes):
    """The partial results of ``names`` over ``axes`` of one chunk (keepdims shapes), as
    backend arrays: every reduction of the chunk computed by forge_array at once."""
    import forge_array as fa  # noqa: PLC0415  (in the worker that runs the chunk)

    bk = _backend(chunk)
    x = fa.asarray(chunk)
    count = math.prod(chunk.shape[a] for a in axes)
    out = {}
    for name in names:
        if name in ("mean", "var", "std"):
            if "moments" in out:
                continue
            if count == 0:
                out["moments"] = None
                continue
            mean = fa.mean(x, axis=axes, keepdims=True)
            var = fa.var(x, axis=axes, keepdims=True)
            out["moments"] = (count, mean, var)
        else:
            out[name] = getattr(fa, name)(x, axis=axes, keepdims=True)
    res = {}
    for k, v in out.items():
        if k == "moments":
            res[k] = None if v is None else (v[0], _back(bk, v[1]), _back(bk, v[2] * v[0]))
        else:
            res[k] = _back(bk, v)
    return res


def _back(bk, a):
    return bk.from_dlpack(a)


def _merge(parts):
    """Partial results of several chunks (dicts of :func:`_chunk_partials`) merged into one,
    along the reduced axes."""
    parts = list(parts)
    out = {}
    for k in parts[0]:
        vals = [p[k] for p in parts]
        if k == "moments":
            vals = [v for v in vals if v is not None]
            out[k] = None if not vals else _chan(vals)
            continue
        bk = _backend(vals[0])
        op = {"sum": bk.add, "prod": bk.multiply, "max": bk.maximum, "min": bk.minimum,
              "any": bk.logical_or, "all": bk.logical_and}[k]
        acc = vals[0]
        for v in vals[1:]:
            acc = op(acc, v)
        out[k] = acc
    return out


def _chan(triples):
    n, mean, m2 = triples[0]
    for nb, mb, m2b in triples[1:]:
        tot = n + nb
        d = mb - mean
        mean = mean + d * (nb / tot)
        m2 = m2 + m2b + d * d * (n * nb / tot)
        n = tot
    return (n, mean, m2)


def _final(part, name, correction, axes, keepdims):
    """Result ``name`` from a group's merged partials (squeezed unless ``keepdims``)."""
    if name in ("mean", "var", "std"):
        mom = part["moments"]
        if mom is None:
            raise ValueError(f"reductions(): {name} of an empty selection")
        n, mean, m2 = mom
        bk = _backend(mean)
        if name == "mean":
            r = mean
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                r = m2 / (n - correction) if n - correction > 0 else bk.full_like(m2, bk.nan)
            if name == "std":
                r = bk.sqrt(r)
    else:
        r = part[name]
    return r if keepdims else r.squeeze(axis=axes)


def _tree(parts):
    import dask  # noqa: PLC0415

    while len(parts) > 1:
        parts = [dask.delayed(_merge, pure=True)(parts[i:i + _SPLIT])
                 for i in range(0, len(parts), _SPLIT)]
    return parts[0]


def reductions(x, names, *, axis=None, keepdims=False, correction=0.0):
    """Several reductions of the ``dask.array`` ``x`` in one graph, every chunk read by one
    task: a tuple of ``dask.array`` results in the order of ``names`` (of ``sum``, ``prod``,
    ``max``, ``min``, ``any``, ``all``, ``mean``, ``var``, ``std``), as ``x.sum(axis=axis)``,
    ``x.max(axis=axis)``... would give (``var`` and ``std`` with ``correction``, NumPy's
    ``ddof``).

    On a worker with forge_array's CuPy drop-in the chunk's reductions run on our kernels
    whether or not CuPy is patched, and sibling reductions of a chunk share a pass over it.

    Examples:
        >>> import dask.array as da, numpy as np
        >>> from forge_array.dask import reductions
        >>> x = da.from_array(np.arange(12.0).reshape(4, 3), chunks=(2, 3))
        >>> s, hi, sd = reductions(x, ["sum", "max", "std"], axis=0)
        >>> s.compute().tolist(), hi.compute().tolist()
        ([18.0, 22.0, 26.0], [9.0, 10.0, 11.0])
    """
    import dask  # noqa: PLC0415
    import dask.array as da  # noqa: PLC0415

    if isinstance(names, str):
        names = [names]
    names = list(names)
    if not names:
        raise ValueError("reductions(): name at least one reduction")
    for n in names:
        if n not in NAMES:
            raise ValueError(f"reductions(): unknown reduction {n!r}; known: {', '.join(NAMES)}")
    if not isinstance(x, da.Array):
        raise TypeError(f"reductions(): x must be a dask.array, got {type(x).__name__}")
    nd = x.ndim
    given = () if axis is None else (tuple(axis) if isinstance(axis, (tuple, list)) else (axis,))
    for a in given:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"reductions(): axis must be None, an int or a tuple of ints, got {axis!r}")
        if not -nd <= a < nd:
            raise ValueError(f"reductions(): axis {a} is out of bounds for an array of dimension {nd}")
    axes = tuple(range(nd)) if axis is None else tuple(sorted({int(a) % nd for a in given}))
    for n in names:
        if n in ("mean", "var", "std") and x.dtype.kind not in "fc":
            raise TypeError(f"reductions(): {n} requires a floating-point dtype, got {x.dtype}")
    kept = [d for d in range(nd) if d not in axes]
    blocks = x.to_delayed()
    task = dask.delayed(_chunk_partials, pure=True)
    groups = {}
    for idx in itertools.product(*(range(len(c)) for c in x.chunks)):
        g = groups.setdefault(tuple(idx[d] for d in kept), [])
        if all(x.chunks[d][i] for d, i in enumerate(idx)):   # empty chunks take no part
            g.append(task(blocks[idx], names, axes))
    if math.prod(x.shape[a] for a in axes) == 0:
        raise ValueError("reductions(): the reduced axes have no elements")
    bk = _backend(getattr(x, "_meta", None))
    # one merge tree per group (None: a group of no elements, where a kept axis' chunk is empty)
    roots = {gidx: _tree(parts) if parts else None for gidx, parts in groups.items()}
    outs = []
    for n in names:
        dt = _dtype_of(x.dtype, n)
        pieces = np.empty(tuple(len(x.chunks[d]) for d in kept), dtype=object)
        for gidx, root in roots.items():
            shape = [1 if d in axes else x.chunks[d][gidx[kept.index(d)]] for d in range(nd)]
            if not keepdims:
                shape = [s for d, s in enumerate(shape) if d not in axes]
            if root is None:
                pieces[gidx] = da.from_array(bk.empty(tuple(shape), dtype=dt), chunks=-1)
                continue
            val = dask.delayed(_final)(root, n, correction, axes, keepdims)
            pieces[gidx] = da.from_delayed(val, tuple(shape), dtype=dt,
                                           meta=bk.empty((0,) * len(shape), dtype=dt))
        if not kept:
            outs.append(pieces[()])
        elif keepdims:   # the reduced axes, one piece each, sit between the kept ones
            outs.append(da.block(_nest_keepdims(pieces, nd, kept)))
        else:
            outs.append(da.block(pieces.tolist()))
    return tuple(outs)


def _nest_keepdims(pieces, nd, kept):
    """The nested lists ``da.block`` wants for pieces laid out over the kept axes, with the
    reduced axes (one piece each) inserted."""
    def rec(d, idx):
        if d == nd:
            return pieces[tuple(idx)]
        if d in kept:
            return [rec(d + 1, idx + [i]) for i in range(pieces.shape[kept.index(d)])]
        return [rec(d + 1, idx)]
    return rec(0, [])


def _dtype_of(dtype, name):
    """The result dtype of ``name`` on elements of ``dtype`` (NumPy's rules, which
    forge_array's reductions follow for these)."""
    if name in ("any", "all"):
        return np.dtype(bool)
    probe = np.zeros((1,), dtype=dtype)
    if name in ("mean", "var", "std"):
        return np.mean(probe).dtype
    return getattr(np, name)(probe).dtype
