"""The fusion layer's switches and this thread's trace, read by every module of the layer
(this module imports none of them).

- :data:`AUTO`: whether automatic fusion is on ``[on, also on CPU arrays when the kernels are
  simulated]`` (set by :func:`.auto.enable`);
- :data:`ACTIVE`: how many threads trace a fused call or defer every step now;
- :data:`ON`: nonzero when a namespace call should ask a builder (a thread traces, or
  automatic fusion is on), read first so that plain code pays one global look-up when it is
  off; :func:`sync_switch` recomputes it;
- this thread's :class:`~.build.Trace` (:func:`current`, :func:`begin_trace`,
  :func:`end_trace`, :func:`untraced`) and whether it defers every step (:func:`defer_all`).

>>> from forge_array.fusion import state
>>> state.current() is None, state.tracing()
(True, False)
"""

from __future__ import annotations

import contextlib
import threading

from ..runtime.flags import FLAGS

__all__ = ["AUTO", "ACTIVE", "ON", "sync_switch", "current", "tracing", "begin_trace",
           "end_trace", "untraced", "defer_all", "set_defer_all"]

#: [automatic fusion on (the ``fusion`` flag, kept equal to it by :mod:`.auto`), also on CPU
#: arrays when the kernels are simulated (tests)]
AUTO = [FLAGS["fusion"].cell[0], False]
#: number of threads tracing a fused call, or deferring every step, now
ACTIVE = [0]
#: nonzero when a namespace call should ask a builder
ON = [0]
_TLS = threading.local()


def sync_switch():
    """Recompute :data:`ON` (after a trace starts or ends, or automatic fusion is switched)."""
    ON[0] = ACTIVE[0] + (1 if AUTO[0] or AUTO[1] else 0)


def current():
    """This thread's trace, or None."""
    return getattr(_TLS, "trace", None)


def tracing():
    """Whether this thread is tracing a fused call."""
    return getattr(_TLS, "trace", None) is not None


def begin_trace(trace):
    """Make ``trace`` this thread's trace."""
    _TLS.trace = trace
    ACTIVE[0] += 1
    sync_switch()


def end_trace():
    """End this thread's trace."""
    ACTIVE[0] -= 1
    _TLS.trace = None
    sync_switch()


@contextlib.contextmanager
def untraced():
    """This thread's trace (if any) set aside: the namespace computes eagerly meanwhile."""
    trace = getattr(_TLS, "trace", None)
    _TLS.trace = None
    try:
        yield
    finally:
        _TLS.trace = trace


def defer_all():
    """Whether plain code in this thread defers every fusable step now."""
    return getattr(_TLS, "defer_all", False)


def set_defer_all(on):
    """Set :func:`defer_all` for this thread (counted in :data:`ACTIVE`); returns the
    previous setting."""
    prev = getattr(_TLS, "defer_all", False)
    _TLS.defer_all = bool(on)
    ACTIVE[0] += (1 if on else 0) - (1 if prev else 0)
    sync_switch()
    return prev


sync_switch()
