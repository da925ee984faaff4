"""Kernels built off the calling thread, while the call runs on its fallback.

A standard operation on a GPU array has a correct fallback (CuPy's function), so its first
call need not wait for numba to load (about a second) or for a kernel to compile (0.3 to 4 s):
with ``FORGE_ARRAY_COMPILE=background`` (the default on a GPU) the routing seam runs such a
call through [`attempt`][]; a kernel that is neither in memory nor in the disk cache is
then queued for a worker thread and the call runs on its fallback, and the calls after the
build use our kernel.  Loading the kernel layer itself (numba, the kernel modules) is one
more such job ([`ready`][]).  Results are the same either way.

``FORGE_ARRAY_COMPILE=sync`` (the default in the simulator) builds in the calling thread,
as benchmarks and tests want; [`set_mode`][] switches at run time and [`wait`][] waits
for the queued builds.  Generic operators (a user's function) have no fallback: they are
always built in the calling thread.

Examples:
    >>> from forge_array.runtime import background
    >>> background.mode() in ("background", "sync")
    True
    >>> background.wait()   # nothing queued: returns at once
    True
"""

from __future__ import annotations

import atexit
import collections
import os
import sys
import threading

from . import config
from .counters import STATS
from .flags import FLAGS, set_flags

__all__ = ["PENDING", "Pending", "attempt", "deferring", "failures", "finished", "mode", "on_worker_thread", "ready",
           "set_mode", "state", "submit", "usable", "wait", "wait_for"]

_MODES = ("background", "sync")


#: ``["background" | "sync"]``: the ``compile`` flag's cell (``FORGE_ARRAY_COMPILE``)
_MODE = FLAGS["compile"].cell


def mode() -> str:
    """``"background"`` or ``"sync"`` (see the module's docstring)."""
    return _MODE[0]


def set_mode(value: str) -> str:
    """Switch between ``"background"`` and ``"sync"``; returns the previous mode.

    Examples:
        >>> old = set_mode("sync"); set_mode(old) == "sync"
        True
    """
    if value not in _MODES:
        raise ValueError(f"compile mode must be 'background' or 'sync', got {value!r}")
    return set_flags(compile=value)["compile"]


class Pending(Exception):  # noqa: N818  (a state, not an error of the caller)
    """Raised inside [`attempt`][] where a kernel is being built in the background; the
    caller then runs its fallback."""


_LOCAL = threading.local()


def deferring() -> bool:
    """Whether this thread is inside [`attempt`][] in background mode: a kernel that must
    be built now is queued ([`submit`][]) and [`Pending`][] raised instead."""
    return getattr(_LOCAL, "depth", 0) > 0


#: what [`attempt`][] returns when the call must run on its fallback
PENDING = object()


def attempt(fn, *args):
    """``fn(*args)``, or `PENDING` when it needed a kernel that is now being built in
    the background (background mode only; in sync mode this is just ``fn(*args)``).

    Examples:
        >>> attempt(lambda a: a + 1, 1)
        2
    """
    if _MODE[0] != "background":
        return fn(*args)
    _LOCAL.depth = getattr(_LOCAL, "depth", 0) + 1
    try:
        return fn(*args)
    except Pending:
        STATS["deferred"] += 1
        return PENDING
    finally:
        _LOCAL.depth -= 1


# ----------------------------------------------------------------------------- the worker

_COND = threading.Condition()
_QUEUE: collections.deque = collections.deque()
_STATE: dict = {}        # job key -> "queued" | "done" | "failed"
_ERRORS: dict = {}       # job key -> the exception a failed job raised
_WORKER: list = []
_BUSY = [0]
_STOP = [False]
_FINISHED = 0            # jobs finished (built or failed) so far


def finished() -> int:
    """How many background jobs have finished (built or failed) so far: a call that ran on
    its fallback because a kernel was being built needs not try our kernels again before this
    changes (what it waits for cannot have arrived).

    Examples:
        >>> finished() >= 0
        True
    """
    return _FINISHED


def submit(key, job) -> None:
    """Queue ``job()`` (no arguments) under ``key`` unless a job of that key was queued
    before.  The worker runs it with the device of the submitting thread current."""
    with _COND:
        if key in _STATE:
            return
        _STATE[key] = "queued"
        _QUEUE.append((key, job, _device()))
        if not _WORKER:
            t = threading.Thread(target=_work, name="forge_array-compile", daemon=True)
            _WORKER.append(t)
            t.start()
        _COND.notify_all()


def state(key):
    """``"queued"``, ``"done"``, ``"failed"`` or None (never submitted) of job ``key``."""
    return _STATE.get(key)


def failures() -> dict:
    """The exceptions of the background jobs that failed, by job key (the calls went on
    running on their fallbacks; a call in sync mode builds again and raises)."""
    return dict(_ERRORS)


def ready(key, job) -> bool:
    """Whether one-time job ``key`` (e.g. importing the kernel layer) has run: in sync
    mode it runs now, in this thread; in background mode it is queued (once) and this
    returns False until the worker has run it."""
    s = _STATE.get(key)
    if s == "done":
        return True
    if _MODE[0] != "background":
        job()
        with _COND:
            _STATE[key] = "done"
        return True
    if s is None:
        submit(key, job)
    return False


def usable(key) -> bool:
    """Whether what one-time job ``key`` provides may be used in this thread now without
    waiting for it: it has run, or the mode is sync (the user builds it on the spot)."""
    return _MODE[0] != "background" or _STATE.get(key) == "done"


def wait_for(key, timeout: float | None = None) -> bool:
    """Wait until job ``key`` has finished (run or failed); False when ``timeout`` seconds
    passed first, or at once when no job of that key was queued.

    Examples:
        >>> wait_for("never queued", 1.0)
        False
    """
    with _COND:
        if key not in _STATE:
            return False
        return _COND.wait_for(lambda: _STATE.get(key) != "queued", timeout)


def wait(timeout: float | None = None) -> bool:
    """Wait until every queued build has finished; False when ``timeout`` seconds passed
    first."""
    with _COND:
        return _COND.wait_for(lambda: not _QUEUE and not _BUSY[0], timeout)


def _device():
    if config.SIMULATE:
        return None
    from .backend import current_device  # noqa: PLC0415

    try:
        return current_device()
    except Exception:  # no CuPy / no device: the job will find out itself
        return None


#: the interpreter's thread switch interval while a build runs, in seconds.  A build is
#: mostly CPU-bound Python (numba's typing and lowering); the calling thread's work is many
#: short CUDA and file calls that each release the GIL, and with Python's default 5 ms it may
#: wait that long to get the GIL back after each.  ``python -m bench.suite_startup`` on the
#: H200, two runs differing only by this setting: the empty-cache script took 9.04 s with
#: the default interval and 6.89 s with this one (medians of 3 processes; CuPy 1.29 and
#: 1.44 s in the same runs).  The previous interval is restored when the queue is empty.
SWITCH_INTERVAL = 1e-4

_SAVED_INTERVAL: list = []


def on_worker_thread() -> bool:
    """Whether this thread is the background builds' thread (its kernel builds go to the
    build process, see :mod:`.build_process`)."""
    return getattr(_LOCAL, "worker", False)


def _work() -> None:
    global _FINISHED
    _LOCAL.worker = True
    while True:
        with _COND:
            _COND.wait_for(lambda: _QUEUE or _STOP[0])
            if _STOP[0]:
                return
            key, job, dev = _QUEUE.popleft()
            _BUSY[0] += 1
            if not _SAVED_INTERVAL:
                _SAVED_INTERVAL.append(sys.getswitchinterval())
                sys.setswitchinterval(min(SWITCH_INTERVAL, _SAVED_INTERVAL[0]))
        ok = True
        try:
            if dev is not None:
                from .backend import cupy  # noqa: PLC0415

                cupy().cuda.runtime.setDevice(dev)
            job()
        except BaseException as exc:  # noqa: BLE001  (the caller's fallback already ran)
            ok = False
            _ERRORS[key] = exc
        with _COND:
            _BUSY[0] -= 1
            _STATE[key] = "done" if ok else "failed"
            _FINISHED += 1
            if not _QUEUE and _SAVED_INTERVAL:
                sys.setswitchinterval(_SAVED_INTERVAL.pop())
            _COND.notify_all()


def _after_fork_in_child() -> None:
    # the worker thread does not exist in a forked child: start afresh (queued jobs of the
    # parent are dropped; the child's calls queue their own)
    global _COND
    _COND = threading.Condition()
    _QUEUE.clear()
    _WORKER.clear()
    _BUSY[0] = 0
    for key, s in list(_STATE.items()):
        if s == "queued":
            del _STATE[key]
    if _SAVED_INTERVAL:
        sys.setswitchinterval(_SAVED_INTERVAL.pop())


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _stop() -> None:
    # queued builds are dropped at exit; one in progress is abandoned with the daemon thread
    # (cache files are written atomically, so an abandoned write leaves no damaged file)
    with _COND:
        _STOP[0] = True
        _QUEUE.clear()
        if _SAVED_INTERVAL:
            sys.setswitchinterval(_SAVED_INTERVAL.pop())
        _COND.notify_all()
