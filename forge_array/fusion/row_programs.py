"""Row programs: a settlement whose reductions all run along the last axis of one shape,
with the element-wise steps that use their results, as one launch that reads each row once
(:mod:`forge_array.kernels.row_programs`).

Row softmax ``e = exp(x - max(x, axis=-1, keepdims=True)); e / sum(e, axis=-1,
keepdims=True)`` is the model: two rounds of reductions (the maximum, then the sum of the
exponentials that use it) and one output of the input's shape.  A settlement takes this
path when

- every pending reduction it needs reduces the last axis of inputs of one shape ``S``
  (at least 2-D, rows of :data:`~forge_array.kernels.row_programs.MAX_ROW` elements at most and
  at least the tuning's ``min_row``);
- every other wanted node has shape ``S`` (a *full* output), or one value per row (shape
  ``S[:-1] + (1,)``, or ``S[:-1]`` when it reads no array but the reductions' results);
- there is something to gain: a full output, or a reduction that uses another's result;
- every leaf broadcasts to ``S`` with its leading dimensions collapsing into one stride.

Otherwise :func:`.evaluate.settle` computes the reductions in rounds of launches and the
outputs in a map launch, as before.
"""

from __future__ import annotations

import math

from ..dispatch import rows as _rows
from ..primitives import fused_reduce as _fr
from ..runtime import element_strides
from .codegen import function_of, linearize
from .expr import Node

__all__ = ["row_program", "describe"]


class _Result:
    """The stand-in of pending reduction number ``index`` in a row program's expressions."""

    __slots__ = ("dtype", "index")

    def __init__(self, dtype, index):
        self.dtype = dtype
        self.index = index


def _rounds_of(reds):
    """Round of each pending reduction: 0 when its input uses no pending reduction, else one
    more than the latest it uses."""
    rnd: dict = {}
    memo: dict = {}

    def deepest(e):
        if not isinstance(e, Node) or e.value is not None:
            return -1
        k = id(e)
        if k in memo:
            return memo[k]
        if e.op == "reduce":
            r = rnd[k]
        else:
            r = max((deepest(a) for a in e.args), default=-1)
        memo[k] = r
        return r

    for r in reds:  # operands before users
        rnd[id(r)] = deepest(r.args[0]) + 1
    return rnd


def _row_strides(a, S):
    """Element strides ``(s0, s1)`` of backend array ``a`` broadcast to ``S`` viewed as
    ``(rows, S[-1])``, or None when its leading dimensions do not collapse into one."""
    sh = a.shape
    st = element_strides(a)
    off = len(S) - len(sh)
    full = [0] * len(S)
    for d in range(len(sh)):
        full[off + d] = 0 if sh[d] == 1 else st[d]
    s0 = 0
    inner = 0
    for d in range(len(S) - 2, -1, -1):
        if S[d] == 1:
            continue
        if inner == 0:
            s0, inner = full[d], S[d]
        elif full[d] != s0 * inner:
            return None
        else:
            inner *= S[d]
    return s0, full[-1]


def _program(roots, stops, slot_of, leaves):
    """(program, leaf map) of ``roots`` with pending reductions read from ``stops``; new
    arrays are appended to ``leaves`` (``slot_of`` maps their ids to positions)."""
    program, local = linearize(roots, stops)
    fmap = []
    for a in local:
        if isinstance(a, _Result):
            fmap.append(-a.index - 1)
        else:
            k = slot_of.get(id(a))
            if k is None:
                k = slot_of[id(a)] = len(leaves)
                leaves.append(a)
            fmap.append(k)
    return program, tuple(fmap)


def _reads_arrays(e, stops):
    """Whether expression ``e`` reads an array of at least one dimension (not through a
    pending reduction in ``stops``)."""
    if id(e) in stops:
        return False
    if isinstance(e, Node) and e.value is None:
        return any(_reads_arrays(a, stops) for a in e.args)
    return len(getattr(e, "shape", ())) > 0


def row_program(nodes, reds):
    """The row program of a settlement of ``nodes`` (pending, one device) whose pending
    reductions are ``reds`` (operands before users), or None when it does not apply (see
    the module docstring).  Returns ``(key, make_step, leaves, targets, fused)``:
    ``make_step()`` compiles the launch, a function of ``leaves`` returning the values of
    ``targets`` (nodes, in order); ``key`` identifies the program (the leaves' layouts
    aside) and ``fused`` counts the expressions it computes in place."""
    if not reds:
        return None
    S = reds[0].args[0].shape
    if len(S) < 2:
        return None
    last = len(S) - 1
    for r in reds:
        if r.args[0].shape != S or r.extra[1] != (last,):
            return None
    p = S[-1]
    if not _rows.fits(math.prod(S[:-1]), p):
        return None
    stops = {id(r): _Result(r.dtype, m) for m, r in enumerate(reds)}
    full, rows = [], []
    for nd in nodes:
        if nd.op == "reduce":
            continue
        if nd.shape == S:
            full.append(nd)
        elif nd.shape == S[:-1] + (1,) or (nd.shape == S[:-1] and not _reads_arrays(nd, stops)):
            rows.append(nd)
        else:
            return None
    rnd = _rounds_of(reds)
    nrounds = 1 + max(rnd.values())
    if not full and nrounds < 2:
        return None
    slot_of: dict = {}
    leaves: list = []
    rounds = []
    key = []
    for k in range(nrounds):
        group = [r for r in reds if rnd[id(r)] == k]
        terms = tuple(r.extra[0] for r in group)
        program, fmap = _program([r.args[0] for r in group], stops, slot_of, leaves)
        elem, op, post, acc, ident, with_index = _fr.pass_functions(function_of(program), terms,
                                                                    len(fmap))
        red_ids = tuple(stops[id(r)].index for r in group)
        rounds.append((elem, op, post, ident, tuple(d.str for d in acc), fmap, red_ids,
                       with_index))
        key.append((program, terms, fmap, red_ids))
    outs = row_outs = None
    if full:
        program, fmap = _program(full, stops, slot_of, leaves)
        outs = (function_of(program), fmap, tuple(nd.dtype.str for nd in full))
        key.append((program, fmap))
    nrow_leaves = len(leaves)  # leaves read along the row; row outputs' leaves come after
    if rows:
        program, fmap = _program(rows, stops, slot_of, leaves)
        row_outs = (function_of(program), fmap, tuple(nd.dtype.str for nd in rows))
        key.append(("rows", program, fmap))
    shape = _rows.shape_of(p, nrow_leaves, len(leaves))
    if shape is None:
        return None
    strides = [_row_strides(a, S) for a in leaves]
    if any(st is None for st in strides):
        return None
    block, items = shape

    def make_step():
        return _rows.plan(rounds, outs, row_outs, leaves, reds, rows, S, block, items, strides)

    fused = len(full) + len(rows) + sum(
        1 for r in reds if isinstance(r.args[0], Node) and r.args[0].value is None)
    return ("rows", tuple(key), S), make_step, leaves, full + rows + list(reds), fused


def describe(reds):
    """What the row program of ``reds`` reduces, round by round, as text."""
    rnd = _rounds_of(reds)
    rounds = [", ".join(r.extra[0].name for r in reds if rnd[id(r)] == k)
              for k in range(1 + max(rnd.values()))]
    return f"{', then '.join(rounds)} along the last axis of {reds[0].args[0].shape}"
