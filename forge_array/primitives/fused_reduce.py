"""Several named reductions of mapped operands in one pass (horizontal and vertical fusion).

``reduce_terms(expr, leaves, terms, axes, keepdims)`` reduces the values ``expr(*leaves)``
(a tuple, one value per term) with each term's reduction, all in one launch: the
accumulator is the concatenation of the terms' states (``sum``: one value, ``mean``: one,
``var`` / ``std``: a Welford triple, ``argmax``: a (value, index) pair, ...), the operator
combines each slice with its own operator, and the finishing step divides, takes a square
root or picks the index.  ``mean``, ``std`` and ``max`` of one array read it once.

>>> import numpy as np
>>> def expr(a):
...     return (a, a, a)
>>> terms = (Term("mean", np.dtype("float64")), Term("std", np.dtype("float64")),
...          Term("max", np.dtype("float64")))
>>> m, s, mx = reduce_terms(expr, [np.arange(4.0)], terms, None, False)   # doctest: +SKIP
>>> float(m), float(mx)                                                   # doctest: +SKIP
(1.5, 3.0)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import cuda

from .. import ops as _ops
from ..dispatch import axis_reduce as _dax
from ..dispatch import reduce as _kl
from ..kernels import reduce_spec as _k
from ..runtime import array_module
from ..runtime.build_process import rebuilt_by
from ..runtime.caches import Cache
from . import axis_reduce as _axis

__all__ = ["Term", "TERM_NAMES", "reduce_terms", "full_launch", "axis_launch", "TermsReplay", "term_dtype",
           "state_size", "pass_functions"]


class Term(NamedTuple):
    """One reduction of a fused pass: ``name`` (sum, prod, max, min, any, all, mean, var,
    std, argmax, argmin), ``dtype`` the dtype it accumulates and returns (for argmax /
    argmin: the values' dtype), ``correction`` of var / std."""

    name: str
    dtype: np.dtype
    correction: float = 0.0


#: reductions a fused pass computes
TERM_NAMES = ("sum", "prod", "max", "min", "any", "all", "mean", "var", "std", "argmax",
              "argmin")

_OPS = {"sum": _ops.add, "prod": _ops.multiply, "max": _ops.maximum, "min": _ops.minimum,
        "any": _ops.logical_or, "all": _ops.logical_and, "mean": _ops.add,
        "var": _ops.welford, "std": _ops.welford, "argmax": _ops.argmax, "argmin": _ops.argmin}


def term_dtype(t):
    """The result dtype of term ``t``."""
    if t.name in ("argmax", "argmin"):
        return np.dtype(_ops.INDEX_DTYPE)
    if t.name in ("any", "all"):
        return np.dtype(np.bool_)
    return np.dtype(t.dtype)


def state_size(name):
    """The number of accumulator values of a term named ``name``: a Welford triple for
    ``var`` / ``std``, a (value, index) pair for ``argmax`` / ``argmin``, one value otherwise
    (the accumulator of :func:`_state`)."""
    return 3 if name in ("var", "std") else 2 if name in ("argmax", "argmin") else 1


def _state(t):
    """(accumulator dtypes, identity values) of term ``t``."""
    dt = np.dtype(t.dtype)
    op = _OPS[t.name]
    if t.name in ("var", "std"):
        acc = (dt, dt, dt)
    elif t.name in ("argmax", "argmin"):
        acc = (dt, np.dtype(_ops.INDEX_DTYPE))
    elif t.name in ("any", "all"):
        acc = (np.dtype(np.bool_),)
    else:
        acc = (dt,)
    ident = op.identity(acc if len(acc) > 1 else acc[0])
    ident = tuple(ident) if len(acc) > 1 else (ident,)
    return acc, tuple(v.item() if hasattr(v, "item") else v for v in ident)


def _sources(terms, with_index, nleaves):
    """Source of the combined element map, operator and finishing step."""
    leaves = ", ".join(f"l{k}" for k in range(nleaves))
    lines = [f"def _elem({leaves}{', idx' if with_index else ''}):",
             f"    _v = _expr({leaves})"]
    comps = []
    for j, t in enumerate(terms):
        if t.name in ("var", "std"):
            lines.append(f"    _w{j} = _wm{j}(_v[{j}])")
            comps += [f"_w{j}[0]", f"_w{j}[1]", f"_w{j}[2]"]
        elif t.name in ("argmax", "argmin"):
            comps += [f"_v[{j}]", "idx"]
        elif t.name in ("any", "all"):
            comps.append(f"(_v[{j}] != 0)")
        else:
            comps.append(f"_v[{j}]")
    lines.append(f"    return ({', '.join(comps)},)")
    lines.append("def _op(a, b):")
    out = []
    pos = 0
    for j, t in enumerate(terms):
        width = len(_state(t)[0])
        if width == 1:
            out.append(f"_o{j}(a[{pos}], b[{pos}])")
        else:
            sa = ", ".join(f"a[{pos + c}]" for c in range(width))
            sb = ", ".join(f"b[{pos + c}]" for c in range(width))
            lines.append(f"    _r{j} = _o{j}(({sa}), ({sb}))")
            out += [f"_r{j}[{c}]" for c in range(width)]
        pos += width
    lines.append(f"    return ({', '.join(out)},)")
    lines.append("def _post(t, n):")
    res = []
    pos = 0
    for j, t in enumerate(terms):
        width = len(_state(t)[0])
        if t.name == "mean":
            res.append(f"t[{pos}] / n")
        elif t.name in ("var", "std"):
            lines.append(f"    _d{j} = n - {float(t.correction)!r}")
            lines.append(f"    if _d{j} < 0.0:")
            lines.append(f"        _d{j} = 0.0")
            lines.append(f"    _q{j} = t[{pos + 2}] / _d{j}")
            res.append(f"_sqrt(_q{j})" if t.name == "std" else f"_q{j}")
        elif t.name in ("argmax", "argmin"):
            res.append(f"t[{pos + 1}]")
        else:
            res.append(f"t[{pos}]")
        pos += width
    lines.append(f"    return ({', '.join(res)},)")
    return "\n".join(lines) + "\n"


_COMBINED = Cache("primitives.fused_reduce.COMBINED")


def _combined(expr, terms, with_index, nleaves):
    """(elem, op, post) functions of a fused pass, cached per (expr, terms)."""
    key = (expr, terms, with_index, nleaves)
    fns = _COMBINED.get(key)
    if fns is None:
        dev = cuda.jit(device=True)
        g = {"_expr": dev(expr), "_sqrt": _sqrt_fn()}
        for j, t in enumerate(terms):
            g[f"_o{j}"] = dev(_OPS[t.name].fn)
            if t.name in ("var", "std"):
                g[f"_wm{j}"] = dev(_ops.welford_map(np.dtype(t.dtype)))
        loc: dict = {}
        exec(compile(_sources(terms, with_index, nleaves), "<forge_array fused reduction>",
                     "exec"), g, loc)
        fns = _COMBINED[key] = tuple(rebuilt_by(loc[name], combined_function, expr, terms, with_index,
                                                nleaves, i)
                                     for i, name in enumerate(("_elem", "_op", "_post")))
    return fns


def combined_function(expr, terms, with_index, nleaves, i):
    """Function ``i`` (0: the element map, 1: the operator, 2: the finishing step) of the
    fused pass of ``terms`` over ``expr`` (how the build process makes it again)."""
    return _combined(expr, terms, with_index, nleaves)[i]


def _sqrt_fn():
    from ..runtime.config import SIMULATE

    if SIMULATE:
        return _quiet_sqrt
    return math.sqrt


def _quiet_sqrt(v):
    with np.errstate(all="ignore"):
        return np.sqrt(v)


_PREPARED = Cache("primitives.fused_reduce.PREPARED")


def _prepared(expr, terms, nleaves):
    """Everything of a fused pass that does not depend on the arrays, cached per
    (expr, terms, number of leaves)."""
    key = (expr, terms, nleaves)
    prep = _PREPARED.get(key)
    if prep is None:
        with_index = any(t.name in ("argmax", "argmin") for t in terms)
        elem, op, post = _combined(expr, terms, with_index, nleaves)
        states = [_state(t) for t in terms]
        acc = tuple(d for s in states for d in s[0])
        ident = tuple(v for s in states for v in s[1])
        outs_dt = tuple(term_dtype(t) for t in terms)
        spec = _k.ReduceSpec(
            op=op, acc_dtypes=tuple(d.str for d in acc), identity=ident, f=elem,
            with_index=with_index, acc_tuple=True, post=post,
            out_dtypes=tuple(d.str for d in outs_dt), out_tuple=True, commutative=True)
        prep = _PREPARED[key] = (spec, elem, op, acc, ident, states, outs_dt, with_index)
    return prep


def pass_functions(expr, terms, nleaves):
    """``(elem, op, post, acc_dtypes, identity, with_index)`` of a fused pass of ``terms``
    over ``expr`` of ``nleaves`` values: ``elem(*values[, index])`` maps an element to the
    accumulator tuple, ``op`` combines two, ``post(acc, count)`` finishes the terms'
    results (cached per arguments, as :func:`reduce_terms` uses them)."""
    spec, elem, op, acc, ident, _, _, with_index = _prepared(expr, tuple(terms), nleaves)
    return elem, op, spec.post, acc, ident, with_index


def reduce_terms(expr, leaves, terms, axes, keepdims):
    """Reduce the values of ``expr(*leaves)`` (a tuple, one per term of ``terms``) over
    ``axes`` (a tuple of axes, None for all) in one launch; returns one backend array per
    term.  ``leaves`` are backend arrays of one shape (broadcast views are fine) on a device
    with kernels, and their shape has no zero extent; at most 3 leaves along some axes."""
    prep = _prepared(expr, tuple(terms), len(leaves))
    spec, states, outs_dt = prep[0], prep[5], prep[6]
    x0 = leaves[0]
    ndim = x0.ndim
    arrays = [a.view(np.uint8) if a.dtype.kind == "b" else a for a in leaves]
    if axes is None or len(axes) == ndim:
        return list(_kl.full_reduce(spec, arrays, None, float(x0.size),
                                    (1,) * ndim if keepdims else ()))
    count = math.prod(x0.shape[d] for d in axes)
    f, comb, acc_, index, single = _axis_pass(expr, tuple(terms), len(leaves))
    r = _axis.axis_mapreduce(f, comb, tuple(arrays), axes, None, keepdims, acc_, index=index)
    return _finish((r,) if single else r, terms, states, outs_dt, count, array_module(x0))


def _axis_pass(expr, terms, nleaves):
    """``(element map, operator, accumulator dtype(s), index, single)`` of the pass of
    ``terms`` along axes: what :func:`reduce_terms` hands ``axis_mapreduce`` and so the key
    its launch is kept under (:func:`axis_launch`).  One scalar-state term (``single``) takes
    its own operator on a scalar accumulator, so the row and column kernels take their
    scalar paths (matvec's, for ``sum(A * v, axis=-1)``)."""
    _, elem, op, acc, ident, _, _, with_index = _prepared(expr, terms, nleaves)
    if len(terms) == 1 and terms[0].name in _SCALAR_TERMS:
        name = terms[0].name
        return _scalar_elem(expr, name, nleaves), _OPS[name], acc[0], False, True
    return elem, _operator(op, tuple(d.type(v) for d, v in zip(acc, ident))), acc, with_index, False


def _finish(r, terms, states, outs_dt, count, xp):
    """Each term's result from the accumulator components ``r`` of a pass along axes that
    reduced ``count`` elements into each output: its slice of the state, finished (the mean
    divided, the variance of the Welford triple, the index of a pair)."""
    outs = []
    pos = 0
    for t, (sacc, _), odt in zip(terms, states, outs_dt):
        if t.name == "mean":
            o = r[pos] / odt.type(count)
        elif t.name in ("var", "std"):
            with np.errstate(all="ignore"):
                o = r[pos + 2] / odt.type(max(count - t.correction, 0.0))
            if t.name == "std":
                o = xp.sqrt(o)
        elif t.name in ("argmax", "argmin"):
            o = r[pos + 1]
        else:
            o = r[pos]
        outs.append(o.astype(odt, copy=False))
        pos += len(sacc)
    return outs


def full_launch(expr, leaves, terms, keepdims):
    """The :class:`~forge_array.dispatch.reduce.Launch` of ``reduce_terms(expr, leaves,
    terms, None, keepdims)`` for leaves of these layouts (replay it on their addresses, bool
    leaves viewed as uint8 as here), or None (views the kernel takes another way)."""
    spec = _prepared(expr, tuple(terms), len(leaves))[0]
    arrays = [a.view(np.uint8) if a.dtype.kind == "b" else a for a in leaves]
    x0 = arrays[0]
    shape = (1,) * x0.ndim if keepdims else ()
    return _kl.plan(spec, x0 if len(arrays) == 1 else tuple(arrays), float(x0.size), shape)


#: terms whose state is one value of their own operator
_SCALAR_TERMS = ("sum", "prod", "max", "min", "mean", "any", "all")
_SCALAR_ELEMS = Cache("primitives.fused_reduce.SCALAR_ELEMS")


def _scalar_elem(expr, name, nleaves):
    """``elem(*values)``: the one value of ``expr`` a single ``name`` term reduces (as a
    bool for ``any`` / ``all``), cached per arguments."""
    key = (expr, name, nleaves)
    fn = _SCALAR_ELEMS.get(key)
    if fn is None:
        leaves = ", ".join(f"l{k}" for k in range(nleaves))
        value = "(_expr({0})[0] != 0)" if name in ("any", "all") else "_expr({0})[0]"
        src = f"def _elem({leaves}):\n    return {value.format(leaves)}\n"
        g = {"_expr": cuda.jit(device=True)(expr)}
        loc: dict = {}
        exec(compile(src, "<forge_array fused reduction>", "exec"), g, loc)
        fn = _SCALAR_ELEMS[key] = rebuilt_by(loc["_elem"], _scalar_elem, expr, name, nleaves)
    return fn


#: single terms whose result is the kernel's own output (no finishing step)
_DIRECT_TERMS = ("sum", "prod", "max", "min", "any", "all")


def axis_launch(expr, leaves, terms, axes, keepdims):
    """The replayable launch of ``reduce_terms(expr, leaves, terms, axes, keepdims)`` along
    ``axes`` as it just ran on leaves of these layouts (call it with the leaves, or with
    arrays at the same addresses: the unbroadcast leaves), or None (a launch that needs more
    than the operands' addresses).  One term whose result is the kernel's own output
    replays to that array; several terms, or a term with a finishing step (mean, var, std,
    arg*), replay to the tuple of the terms' results (:class:`TermsReplay`)."""
    if axes is None or len(axes) == leaves[0].ndim:
        return None
    arrays = tuple(a.view(np.uint8) if a.dtype.kind == "b" else a for a in leaves)
    prep = _prepared(expr, tuple(terms), len(leaves))
    states, outs_dt = prep[5], prep[6]
    f, comb, acc, index, single = _axis_pass(expr, tuple(terms), len(leaves))
    key = _dax.fast_key("amr", f, comb, arrays, axes, keepdims, acc, index)
    ent = _dax.FAST.get(key) if key is not None else None
    if ent is None:
        return None
    if single and terms[0].name in _DIRECT_TERMS:
        return ent if getattr(ent, "lean", False) else None
    x0 = leaves[0]
    count = math.prod(x0.shape[d] for d in axes)
    return TermsReplay(ent, tuple(terms), tuple(states), outs_dt, count, array_module(x0), single)


class TermsReplay:
    """A fused pass of several terms (or of one with a finishing step) along axes replayed:
    the pass's launch (:class:`~forge_array.dispatch.axis_reduce.Replay`, on the operands'
    addresses), then each term's finishing step; returns the tuple of the terms' results."""

    __slots__ = ("ent", "terms", "states", "outs_dt", "count", "xp", "single")

    def __init__(self, ent, terms, states, outs_dt, count, xp, single):
        self.ent, self.terms, self.states = ent, terms, states
        self.outs_dt, self.count, self.xp, self.single = outs_dt, count, xp, single

    def __call__(self, arrays):
        r = self.ent(arrays)
        return tuple(_finish((r,) if self.single else r, self.terms, self.states, self.outs_dt,
                             self.count, self.xp))


_OPERATORS = Cache("primitives.fused_reduce.OPERATORS")


def _operator(fn, ident):
    """The combined operator ``fn`` of a fused pass as an :class:`~forge_array.ops.Operator`
    with identity ``ident`` (cached per function)."""
    op = _OPERATORS.get(fn)
    if op is None:
        op = _OPERATORS[fn] = _ops.Operator(fn, "fused", identity=lambda d: ident,
                                            commutative=True, arity=len(ident))
    return op
