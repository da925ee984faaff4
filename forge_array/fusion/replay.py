"""Plans of fused functions: recorded at the first call of an input signature, replayed after.

A fused function is traced (run with deferred arrays) at the first call with a new
*signature*: the dtype, shape, strides, 16-byte phase and device of each array argument,
which arguments are the same array, the value of each Python scalar, string or None
(through tuples, lists and dicts), and the current stream.  While its outputs are
computed, a :class:`Recorder` notes each launch: the step that ran it and which *slots* it
read (an argument, a view taken of one, or the output of an earlier launch).  When the
plan depends on nothing but the signature, the next calls with that signature run the
recorded launches on their own arguments (:class:`Plan`) without running the function
again.

The plan is not recorded, and every call traces, when the function read values while it
ran (``float(x)``, ``if xp.any(...)``, a step that does not fuse), when a launch read an
array made inside the function or kept outside it (a global, a closure, a new array), when
a deferred result was kept outside the outputs, or when an argument's type has no
signature (a NumPy array, an object).  Python side effects of the function (printing,
appending to a list) happen at the calls that trace.

>>> import forge_array as xp
>>> x = xp.ones(3, device="cpu")
>>> key, arrays = signature((x, 2.0), {})
>>> len(arrays), key == signature((x, 2.0), {})[0], key == signature((x, 3.0), {})[0]
(1, True, False)
"""

from __future__ import annotations

import numpy as np

from .. import _devices as _dev
from .._array import Array
from ..runtime import STATS, layout_key, stream_key
from ..runtime.config import SIMULATE

__all__ = ["signature", "Recorder", "Plan", "MAX_PLANS"]

#: signatures a fused function keeps plans for (the oldest is dropped past this)
MAX_PLANS = 64


class _NoSignature(Exception):
    pass


_PLAIN = (type(None), bool, int, str, bytes, type(Ellipsis))


def signature(args, kwargs):
    """``(key, arrays)``: a hashable key of the call's arguments (None when an argument
    has no signature) and the distinct backend arrays of its array arguments, in order."""
    arrays = []
    index: dict = {}

    def key(v):
        if isinstance(v, Array):
            a = v._array
            k = index.get(id(a))
            if k is None:
                k = index[id(a)] = len(arrays)
                arrays.append(a)
            dev = v._device
            return (Array, layout_key(a), dev._kind, dev._index, k)
        t = type(v)
        if t in _PLAIN:
            return (t, v)
        if t is float:
            return (t, v.hex())
        if t is complex:
            return (t, v.real.hex(), v.imag.hex())
        if t is tuple or t is list:
            return (t, tuple(map(key, v)))
        if t is dict:
            return (t, tuple((k, key(x)) for k, x in v.items()))
        if isinstance(v, np.generic):
            return (t, v.tobytes())
        if isinstance(v, (np.dtype, _dev.Device)):
            return (t, v)
        if isinstance(v, tuple) and hasattr(v, "_fields"):  # a named tuple
            return (t, tuple(map(key, v)))
        raise _NoSignature

    try:
        k = (tuple(map(key, args)),
             tuple((n, key(v)) for n, v in kwargs.items()) if kwargs else ())
        hash(k)
    except (_NoSignature, TypeError):
        return None, arrays
    if arrays and (SIMULATE or any(a.__class__ is not np.ndarray for a in arrays)):
        # the stream too: a replayed reduction reuses the scratch of the stream (simulated:
        # the host thread) it was planned on
        k = (k, stream_key())
    return k, arrays


class Recorder:
    """Notes the launches of one fused call: ``add(step, leaves, outputs, fused)`` for each
    (``step(*leaves)`` returned ``outputs`` and computed ``fused`` expressions), ``view``
    for each view of an argument the function took, ``fail(reason)`` when the plan cannot be
    replayed.  ``device``: the device of the launches being added."""

    def __init__(self, arrays):
        self.slot = {id(a): k for k, a in enumerate(arrays)}
        self.keep = list(arrays)  # every slot's array stays alive: ids are not reused
        self.steps = []
        self.reason = None
        self.device = None

    def fail(self, reason):
        if self.reason is None:
            self.reason = reason

    def _outputs(self, outs):
        first = len(self.keep)
        for k, o in enumerate(outs):
            self.slot[id(o)] = first + k
            self.keep.append(o)

    def add(self, step, leaves, outs, fused):
        ins = []
        for a in leaves:
            s = self.slot.get(id(a))
            if s is None:
                self.fail("a launch reads an array made inside the function or kept outside it")
                return
            ins.append(s)
        self.steps.append((step, tuple(ins), len(outs), fused, self.device))
        self._outputs(outs)

    def view(self, source, view_of, view):
        s = self.slot.get(id(source))
        if s is not None:
            self.steps.append((_ViewStep(view_of), (s,), 1, 0, None))
            self._outputs((view,))

    def plan(self, out, nargs):
        """The :class:`Plan` of this call returning ``out`` (its arrays computed), or None
        (then ``reason`` says why)."""
        if self.reason is not None:
            return None
        try:
            template = self._template(out)
        except _NoSignature:
            self.fail("an output is an array made inside the function")
            return None
        return Plan(self._live(template, nargs), template)

    def _template(self, out):
        if isinstance(out, Array):
            s = self.slot.get(id(out._array))
            if s is None:
                raise _NoSignature
            return (_SLOT, s, out._device)
        t = type(out)
        if t is tuple or t is list:
            return (_SEQ, t, tuple(map(self._template, out)))
        if isinstance(out, tuple) and hasattr(out, "_fields"):
            return (_NAMED, t, tuple(map(self._template, out)))
        if t is dict:
            return (_DICT, tuple((k, self._template(v)) for k, v in out.items()))
        return (_CONST, out)

    def _live(self, template, nargs):
        """The steps the outputs need, renumbered."""
        need = set()

        def mark(tp):
            if tp[0] == _SLOT:
                need.add(tp[1])
            elif tp[0] in (_SEQ, _NAMED):
                for t in tp[2]:
                    mark(t)
            elif tp[0] == _DICT:
                for _, t in tp[1]:
                    mark(t)

        mark(template)
        first = [0] * len(self.steps)
        pos = nargs
        for i, (_, _, nout, _, _) in enumerate(self.steps):
            first[i] = pos
            pos += nout
        keep = [False] * len(self.steps)
        for i in range(len(self.steps) - 1, -1, -1):
            step, ins, nout, fused, _ = self.steps[i]
            if fused or any(first[i] + k in need for k in range(nout)):
                keep[i] = True
                need.update(ins)
        # slots keep their numbers: a dropped step leaves None in its places
        return tuple(s if k else (None, (), s[2], 0, None) for s, k in zip(self.steps, keep))


_SLOT, _SEQ, _NAMED, _DICT, _CONST = range(5)


class _ViewStep:
    __slots__ = ("view_of",)

    def __init__(self, view_of):
        self.view_of = view_of

    def __call__(self, a):
        return (self.view_of(a),)


class Plan:
    """The recorded launches of a fused call; ``run(arrays)`` replays them on the backend
    arrays of a call with the same signature and returns its outputs."""

    __slots__ = ("steps", "template", "device")

    def __init__(self, steps, template):
        self.steps = steps
        self.template = template
        devs = {s[4] for s in steps if s[4] is not None}
        self.device = devs.pop() if len(devs) == 1 else None

    def run(self, arrays):
        env = list(arrays)
        if self.device is not None:
            with _dev.on(self.device):
                self._steps(env, False)
        else:
            self._steps(env, True)
        return _build(self.template, env)

    def _steps(self, env, switch):
        for step, ins, nout, fused, dev in self.steps:
            if step is None:
                env.extend([None] * nout)
            elif switch and dev is not None:
                with _dev.on(dev):
                    outs = step(*[env[i] for i in ins])
                env.extend(outs)
            else:
                env.extend(step(*[env[i] for i in ins]))
            if fused:
                STATS["fused"] += fused


def _build(tp, env):
    kind = tp[0]
    if kind == _SLOT:
        return Array._new(env[tp[1]], tp[2])
    if kind == _SEQ:
        return tp[1](_build(t, env) for t in tp[2])
    if kind == _NAMED:
        return tp[1](*(_build(t, env) for t in tp[2]))
    if kind == _DICT:
        return {k: _build(t, env) for k, t in tp[1]}
    return tp[1]
