"""Settlements of plain code met again: their launches recorded by the signatures of the
expressions settled, and replayed without walking them.

Plain code under automatic fusion builds its expressions anew at every call; settling them
walks them, plans and launches (:mod:`.evaluate`).  A settlement outside a fused call is
*noted*: each launch it makes, the callable that replays it, and where the launch reads
from — the settlement's leaves (:attr:`~.expr.Node.leaves`, slots ``0..``) or the outputs
of an earlier launch of the same settlement.  When every launch read such slots and every
expression's value is one of their outputs, the launches become a :class:`Plan` kept under
the key of the expressions (:func:`find`): their signatures (:attr:`~.expr.Node.sig`), where each
one's leaves sit among the settlement's, the leaves' layouts and the stream.  A later
settlement of expressions with that key runs the plan on its own leaves.

A launch that read an earlier launch's output is replayed by its recorded callable only
when that output has the layout it had when recorded (the callable may be planned for
it); otherwise the plan gives up before any value is set and the settlement walks its
expressions (the launches already made wrote only fresh arrays).
"""

from __future__ import annotations

import threading

from ..runtime import STATS, layout_key, stream_key
from ..runtime.caches import Cache
from .expr import EPOCH, position

__all__ = ["leaves_of", "find", "Note", "Plan", "keep", "begin", "end", "note", "MAX_PLANS"]

#: settlements kept (the oldest is dropped past this)
MAX_PLANS = 1024
_PLANS = Cache("fusion.resettle.PLANS", MAX_PLANS, evict="oldest")
_TLS = threading.local()


def leaves_of(roots):
    """(distinct leaves of the expressions ``roots``, in order; where each root's leaves sit
    among them, or None for one root)."""
    if len(roots) == 1:
        return roots[0].leaves, None
    leaves: list = []
    where = tuple(tuple([position(leaves, a) for a in r.leaves]) for r in roots)
    return leaves, where


def find(roots):
    """``(key, leaves, plan)`` of settling the expressions ``roots`` (see the module
    docstring; ``plan`` None when none is kept), or None when the settlement cannot be
    noted: one is being noted in this thread already (a settlement inside it adds its
    launches there), an operand of a root was computed since the root was built (its
    signature no longer describes it), or the roots read no array."""
    if getattr(_TLS, "note", None) is not None:
        return None
    epoch = EPOCH[0]
    if len(roots) == 1:
        r = roots[0]
        leaves = r.leaves
        if r.epoch != epoch or not leaves:
            return None
        key = (r.sig, None, tuple(map(layout_key, leaves)), stream_key())
    else:
        for r in roots:
            if r.epoch != epoch:
                return None
        leaves, where = leaves_of(roots)
        if not leaves:
            return None
        key = (tuple(r.sig for r in roots), where, tuple(map(layout_key, leaves)), stream_key())
    return key, leaves, _PLANS.get(key)


class Plan:
    """Recorded launches: ``steps`` of ``(replay, ins, inter, fused)`` — the callable, the
    slots it reads, the layouts of those that are earlier outputs, the expressions it
    computes inside a consumer — and ``slots``, where each root's value lands."""

    __slots__ = ("steps", "slots", "nleaves", "order")

    def __init__(self, steps, slots, nleaves):
        self.steps = steps
        self.slots = slots
        self.nleaves = nleaves
        self.order = tuple(range(nleaves))

    def run(self, leaves):
        """The roots' values computed on ``leaves``, or None when an intermediate output's
        layout is not the recorded one (nothing is set then)."""
        n = self.nleaves
        steps = self.steps
        if len(steps) == 1:  # one launch reading the leaves in order (most settlements)
            replay, ins, inter, f = steps[0]
            if ins == self.order:
                outs = replay(*leaves)
                STATS["fused"] += f
                return [outs[s - n] for s in self.slots]
        env = list(leaves)
        fused = 0
        for replay, ins, inter, f in steps:
            args = [env[i] for i in ins]
            if inter and tuple(layout_key(a) for a, i in zip(args, ins) if i >= n) != inter:
                return None
            env.extend(replay(*args))
            fused += f
        STATS["fused"] += fused
        return [env[s] for s in self.slots]


class Note:
    """The launches of one settlement as it runs (see the module docstring)."""

    __slots__ = ("slot", "arrays", "steps", "nleaves", "ok")

    def __init__(self, leaves):
        self.slot = {id(a): k for k, a in enumerate(leaves)}
        self.arrays = list(leaves)  # every slot's array stays alive: ids are not reused
        self.steps = []
        self.nleaves = len(leaves)
        self.ok = True

    def add(self, replay, leaves, outs, fused):
        if not self.ok:
            return
        ins = []
        inter = []
        for a in leaves:
            s = self.slot.get(id(a))
            if s is None:  # read something that is neither a leaf nor an earlier output
                self.ok = False
                return
            ins.append(s)
            if s >= self.nleaves:
                inter.append(layout_key(a))
        self.steps.append((replay, tuple(ins), tuple(inter), fused))
        for o in outs:
            self.slot[id(o)] = len(self.arrays)
            self.arrays.append(o)

    def plan(self, roots):
        """The :class:`Plan` of the settlement of ``roots`` (all computed now), or None."""
        if not self.ok or not self.steps:
            return None
        slots = []
        for r in roots:
            s = self.slot.get(id(r.value))
            if s is None or s < self.nleaves:
                return None
            slots.append(s)
        return Plan(tuple(self.steps), tuple(slots), self.nleaves)


def keep(key, plan):
    """Keep ``plan`` under ``key`` (dropping the oldest past :data:`MAX_PLANS`)."""
    _PLANS[key] = plan


def begin(leaves):
    """Start noting this thread's settlement of expressions over ``leaves``."""
    n = _TLS.note = Note(leaves)
    return n


def end():
    _TLS.note = None


def note(replay, leaves, outs, fused):
    """Tell the settlement being noted in this thread about a launch: ``replay(*leaves)``
    makes it again and returned ``outs``, computing ``fused`` expressions."""
    n = getattr(_TLS, "note", None)
    if n is not None:
        n.add(replay, leaves, outs, fused)
