"""Automatic fusion: element-wise steps and reductions of plain code deferred into one launch.

Outside :func:`~forge_array.fuse`, the namespace's element-wise steps and reductions on GPU
arrays may return a deferred array (:class:`~.expr.Deferred`) instead of computing at once;
whatever consumes it — a reduction, another element-wise step — then computes the whole
expression in one kernel.  No program can tell the difference from eager evaluation:

- **what is deferred**: an element-wise step (or a reduction) whose operands are pending
  expressions, or whose result has at least :data:`MIN_SIZE` elements, when every array it
  reads is *private* (:mod:`forge_array._ownership`: memory nothing but forge_array can
  write) and the expression stays within :data:`MAX_OPS` steps and :data:`MAX_LEAVES` arrays;
- **when it is settled**: the first time anything but another fusable step needs its
  values (any other namespace function, an export, ``float()``, printing...); all pending
  expressions of that device are computed together then, so sibling reductions
  (``mean(x)``, ``std(x)``, ``max(x)``) share one pass.  Everything pending is also
  computed before any write through forge_array (``x[k] = v``, in-place operators; an
  in-place operator on a pending array writes no memory: it becomes that array's
  expression) and before any export makes memory shared; more than :data:`MAX_PENDING` pending expressions
  computes them all;
- **what is computed eagerly after all**: an expression whose structure was compiled with
  :data:`~.codegen.MAX_CONSTANT_SETS` other sets of Python-scalar constants (a changing
  scalar would compile a kernel per value); a step on materialised arrays whose structure
  (operation, dtypes, constants, which operands are the same array) plain code computed
  alone, nothing fused into it or beside it, :data:`ALONE_LIMIT` times in a row: deferring
  it costs host time and saves no pass over memory (every :data:`PROBE_EVERY`-th such step
  is deferred again, and a consumer that fuses one makes the structure deferred again; an
  element-wise step on a reduction's result, ``isfinite(sum(X))``, is a launch of its own
  after the reduction's and does not count as fusing it);
- **what is never deferred**: steps reading shared memory (zero-copy imports of NumPy,
  CuPy, PyTorch or DLPack data, and anything exported), CPU arrays, dtypes or operations
  without a kernel form.

If a fused launch fails, its expressions are computed eagerly instead (the same values,
the same errors as plain code).  ``FORGE_ARRAY_FUSION=0`` turns all this off;
``forge_array.runtime.STATS["fused"]`` counts the expressions computed inside a consumer.

>>> import forge_array as xp
>>> from forge_array.fusion import auto
>>> isinstance(auto.enabled(), bool)
True
"""

from __future__ import annotations

import threading
import weakref

from .. import _routing
from ..runtime.config import SIMULATE
from ..runtime.flags import FLAGS, on_change, set_flags
from . import expr as _expr
from . import state as _state
from .expr import Const, Leaf, pending, pending_reductions

__all__ = ["enabled", "enable", "applies", "register", "settle_device", "settle_all",
           "compute_eagerly", "pending_count", "settle_only", "alone_eager", "MIN_SIZE", "MAX_OPS",
           "MAX_LEAVES", "MAX_PENDING", "ALONE_LIMIT", "PROBE_EVERY"]

#: elements below which a step on materialised arrays runs eagerly; a step on pending
#: operands is always deferred.  Deferral pays for expressions from ~3e6 elements, for a
#: step whose result a non-fusable operation uses and for sibling reductions of a
#: materialised array from ~2e7: ``python -m bench.fusion_host --break-even`` (04e2af8,
#: H200), float32 deferred / eager µs per call at 3e6: ``sum(x*y+1)`` 52.3 / 54.6,
#: ``flip(x+y)`` 37.9 / 28.0, ``mean, std, max`` 62.2 / 35.3; at 1e7: 67.9 / 127.9,
#: 60.2 / 61.2, 66.7 / 45.6; at 3e7: 105.1 / 341.9, 120.6 / 156.1, 87.6 / 110.5.
#: ``FORGE_ARRAY_FUSION_MIN_SIZE`` sets it (0: defer every step, as the conformance run
#: with fusion on does)
MIN_SIZE = FLAGS["fusion_min_size"].cell
#: most element-wise steps in one deferred expression
MAX_OPS = 32
#: most array reads in one deferred expression
MAX_LEAVES = 8
#: most pending expressions; one more computes them all
MAX_PENDING = 64

#: times in a row a one-step expression of one structure on materialised arrays is computed
#: by itself after which such steps run eagerly (0: never).  A step deferred and then
#: computed alone costs 6-11 µs more host time than the eager step and saves nothing:
#: ``FORGE_ARRAY_FUSION_ALONE=0 python -m bench.host_overhead --clock cpu --only "plain X - m
#: alone,plain column sums alone,X - m,column sums"`` (simulator branch, f80ab6f) 13.12 /
#: 9.71 µs against 2.37 / 3.34 eager; learnt, 3.70 / 4.99.  scikit-learn's fits meet such
#: steps at every call (the column means of ``X``, ``X - mean`` handed to an SVD).
#: ``FORGE_ARRAY_FUSION_ALONE`` sets it (the conformance run with fusion on sets 0, so that
#: every step stays deferred)
ALONE_LIMIT = FLAGS["fusion_alone"].cell
#: of the steps of a structure that runs eagerly, every PROBE_EVERY-th is deferred again
PROBE_EVERY = 32
#: structure running eagerly -> its steps since the last deferred one
_SKIPPED = _expr.SKIPPED

#: [on, also on CPU arrays when the kernels are simulated (tests)] (``FORGE_ARRAY_FUSION``)
_STATE = _state.AUTO
_PENDING: list = []
_LOCK = threading.RLock()
_TLS = threading.local()


def enabled():
    """Whether automatic fusion is on (the ``fusion`` flag: ``FORGE_ARRAY_FUSION``,
    ``set_flags(fusion=...)`` or :func:`enable`)."""
    return _STATE[0]


def enable(on=True, simulated_cpu=False):
    """Turn automatic fusion on or off for the process; ``simulated_cpu`` also defers steps on
    CPU arrays when the kernels run in numba's simulator (how the tests exercise it).
    Everything pending is computed first.  Returns the previous ``(on, simulated_cpu)``."""
    settle_all()
    old = (_STATE[0], _STATE[1])
    set_flags(fusion=bool(on))
    _STATE[1] = bool(simulated_cpu) and SIMULATE
    _state.sync_switch()
    return old


@on_change("fusion")
def _switched(old, new):
    settle_all()
    _STATE[0] = new
    _state.sync_switch()


def applies(device, explicit=False):
    """Whether steps on ``device`` may be deferred in this thread now (``explicit``: asked
    for by the code, as :func:`.build.deferring_all` does, whether automatic fusion is on
    or not)."""
    if not explicit and not (_STATE[0] if device._kind == "cuda" else _STATE[1]):
        return False
    # in background compile mode, not before the kernel layer has loaded off the thread (a
    # deferred step needs it, and two threads importing it at once could deadlock)
    if not (_routing._LAYER[0] or _routing.layer_ready()):
        return False
    return not (_EAGER[0] and getattr(_TLS, "eager", False))


#: threads computing a failed launch's expressions eagerly now (their steps are not deferred)
_EAGER = [0]


def alone_eager(sig):
    """Whether a one-step expression of structure ``sig`` on materialised arrays runs eagerly
    rather than deferred: when plain code computed :data:`ALONE_LIMIT` of them alone in a
    row, but for every :data:`PROBE_EVERY`-th.

    >>> alone_eager(-1)     # a structure never computed alone
    False
    """
    n = _expr.ALONE.get(sig)
    if n is None or n < ALONE_LIMIT[0] or not ALONE_LIMIT[0]:
        return False
    k = _SKIPPED.get(sig, 0) + 1
    if k >= PROBE_EVERY:
        _SKIPPED[sig] = 0
        return False
    _SKIPPED[sig] = k
    return True


def _note_alone(nodes):
    """Count a settlement of a one-step expression for its structure when it was computed
    alone: the settlement's only expression, or a one-step reduction that no other pending
    reduction of the settlement reads beside it (element-wise steps on its result are a
    launch of their own after the reduction's, ``isfinite(sum(X))``: they save it no pass
    over memory).  Any other one-step expression settled beside others (sibling reductions
    sharing a pass, steps of one shape written by one launch) keeps deferring."""
    alone = _expr.ALONE
    if len(nodes) == 1:
        n = nodes[0]
        if n.ops == 1:
            alone[n.sig] = alone.get(n.sig, 0) + 1
            return
    if not any(_one_step_reduction(n) or any(map(_one_step_reduction, n.args)) for n in nodes):
        if alone:   # nothing to count: the walk below would find no candidate
            for n in nodes:
                if n.ops == 1:
                    alone.pop(n.sig, None)
        return
    reductions = pending_reductions(nodes)
    reads: dict = {}
    for r in reductions:
        for b in r.leaves:
            reads[id(b)] = reads.get(id(b), 0) + 1
    for r in reductions:
        if r.ops == 1 and all(reads[id(b)] == 1 for b in r.leaves):
            alone[r.sig] = alone.get(r.sig, 0) + 1
        elif alone:
            alone.pop(r.sig, None)
    if alone:
        for n in nodes:
            if n.ops == 1 and n.op != "reduce":
                alone.pop(n.sig, None)


def _one_step_reduction(e):
    return type(e) is _expr.Node and e.op == "reduce" and e.ops == 1 and e.value is None


def register(d):
    """Track the deferred array ``d`` until it is computed (see the module docstring)."""
    with _LOCK:
        _PENDING.append(weakref.ref(d))
        if len(_PENDING) > MAX_PENDING:
            _PENDING[:] = [r for r in _PENDING if _alive(r)]
            if len(_PENDING) > MAX_PENDING:
                settle_all()


def _alive(ref):
    d = ref()
    return d is not None and pending(d) is not None


def pending_count():
    """How many deferred arrays are waiting to be computed."""
    with _LOCK:
        return sum(1 for r in _PENDING if _alive(r))


def settle_device(device):
    """Compute every pending expression on ``device`` (in as few launches as possible)."""
    if _PENDING:
        _settle(device)


def settle_all():
    """Compute every pending expression of the process."""
    if _PENDING:
        _settle(None)


def settle_only(arrays):
    """Compute the pending ones among ``arrays`` (deferred arrays, or tuples of them), those
    of one device together, and nothing else: other pending expressions stay deferred.  For
    a layer that needs a few small results now while the expressions they consume are still
    referenced (a sharded reduction's per-block partials, read while its caller still holds
    the element-wise block they reduce): settling the whole device would also write that
    element-wise block to memory."""
    groups: dict = {}

    def collect(a):
        if type(a) is tuple or type(a) is list:
            for b in a:
                collect(b)
            return
        node = pending(a)
        if node is not None:
            groups.setdefault(a._device, []).append(node)

    collect(arrays)
    for nodes in groups.values():
        _compute(nodes)


def _settle(device):
    with _LOCK:
        groups: dict = {}
        keep = []
        for ref in _PENDING:
            d = ref()
            if d is None:
                continue
            node = d._node
            if node.value is not None:
                continue
            dev = d._device
            if device is None or dev is device or dev == device:
                g = groups.get(dev)
                if g is None:
                    groups[dev] = [node]
                else:
                    g.append(node)
            else:
                keep.append(ref)
        _PENDING[:] = keep
        for nodes in groups.values():
            if ALONE_LIMIT[0]:
                _note_alone(nodes)
            _compute(nodes)


def _compute(nodes):
    plain = _expr.PLAIN
    try:
        if _expr.REPLAYED[0](nodes):  # the launches of an earlier settlement, replayed
            return
        plain.on = True
        _expr.SETTLE[0](nodes)
    except Exception:  # a launch that failed, or constants that vary: plain code's values,
        for n in nodes:  # or plain code's error
            if n.value is None:
                compute_eagerly(n)
    finally:
        plain.on = False


#: The namespace module (``forge_array``), registered by the package as it loads (it sits
#: above this module): :func:`compute_eagerly` computes with its eager functions.
NAMESPACE = [None]


def compute_eagerly(node):
    """Compute ``node`` and what it uses with the namespace's eager functions; each pending
    step on the way keeps its value, so that another expression using it (``mask`` in
    ``min(where(mask, inf, x))`` and ``all(mask)``) does not compute it again."""
    xp = NAMESPACE[0]
    device = node.device
    memo: dict = {}

    def value(e):
        if isinstance(e, Const):
            return e.value
        if isinstance(e, Leaf):
            return xp.Array._new(e.array, device)
        if e.value is not None:
            return xp.Array._new(e.value, device)
        r = memo.get(id(e))
        if r is not None:
            return r
        args = [value(a) for a in e.args]
        op = e.op
        if op == "reduce":
            term, axis, keepdims = e.extra
            name = term.name
            if name in ("argmax", "argmin"):
                r = getattr(xp, name)(args[0], axis=None if axis is None else axis[0],
                                      keepdims=keepdims)
            elif name in ("var", "std"):
                r = getattr(xp, name)(args[0], axis=axis, correction=term.correction,
                                      keepdims=keepdims)
            elif name in ("sum", "prod"):
                r = getattr(xp, name)(args[0], axis=axis, dtype=term.dtype, keepdims=keepdims)
            else:
                r = getattr(xp, name)(args[0], axis=axis, keepdims=keepdims)
        elif op == "astype":
            r = xp.astype(args[0], e.dtype)
        elif op == "clip":
            r = xp.clip(args[0], *e.extra)
        else:
            r = getattr(xp, op)(*args)
        memo[id(e)] = r
        if e is not node:  # a step another pending expression may share: computed once
            e.value = r._array
            e.args = ()
        return r

    _TLS.eager = True
    with _LOCK:
        _EAGER[0] += 1
    try:
        v = value(node)._array
    finally:
        _TLS.eager = False
        with _LOCK:
            _EAGER[0] -= 1
    node.value = v
    node.args = ()
    _expr.EPOCH[0] += 1


_expr.SETTLE_DEVICE[0] = settle_device
