"""Kernel builds in a process of their own, so that they never hold the user's interpreter.

A kernel build is CPU-bound Python (numba's typing and lowering) followed by LLVM and NVVM:
on a thread of the user's process it holds the GIL for most of a second, and every other
thread of the user (PyTorch and CuPy calls included) waits for it.  The background builds'
thread (:mod:`.background`) therefore hands each build to a build process, started when the
first build is queued (:func:`prestart`) with ``python -m forge_array.runtime.build_worker``,
reused for every later one and ended with the interpreter, and waits for it on a pipe without
holding the GIL.  The build process compiles the specialisation to PTX for the GPU's compute
capability into the disk cache (:func:`.compiler.build_to_disk`), where the user's process
then finds it and loads it through CuPy as any cached kernel.  numba is shown a device of
that compute capability, so the build process creates no CUDA context and takes no GPU
memory (where numba needs more of the device, it asks the driver from then on).

A build is sent as its kernel factory, constants and argument types, pickled by reference:
only specialisations whose functions are module-level functions of forge_array, NumPy, numba
or the standard library (or made by such a function, which then names itself and its
arguments: :func:`rebuilt_by`) go there: the standard operations; a user's operator is
built in the user's process as before.  Where the build process cannot start (no
``fork``/``exec``, a sandbox), builds run on the background thread as before, after one warning
(``FORGE_ARRAY_BUILD_PROCESS=0`` asks for that without the warning); where it dies
during a build, that build runs on the thread and the next one starts a new process (at most
:data:`MAX_RESTARTS` times; as many builds it fails other than with the operator's compile
error also keep builds on the thread).  In the simulator the build process "builds" by
making the simulated kernel (the same factory call), so that CI runs its whole life cycle.

>>> from forge_array.runtime import build_process
>>> sorted(build_process.stats())
['deaths', 'disabled', 'errors', 'jobs', 'pid', 'starts']
"""

from __future__ import annotations

import atexit
import io
import os
import pickle
import subprocess
import sys
import threading
import time
import types
import warnings

from . import config
from .counters import STATS
from .flags import FLAGS

__all__ = ["MAX_RESTARTS", "build", "prestart", "rebuilt_by", "shutdown", "stats"]

#: deaths of the build process after which builds stay on the background thread
MAX_RESTARTS = 3
#: seconds a fresh build process has to answer
START_TIMEOUT = 120.0
#: seconds one build may take before the build process is given up
BUILD_TIMEOUT = 900.0

_MODULES = ("forge_array", "numpy", "numba", "numba_cuda", "llvmlite")
_STDLIB = getattr(sys, "stdlib_module_names", ("math", "cmath", "operator", "builtins", "copyreg"))

_LOCK = threading.Lock()
_WORKER: list = []       # the running _Worker, at most one
#: why builds stay in this process after a failure to start the build process or its deaths
_DISABLED: list = []
#: ``[False]`` keeps builds in this process: the ``build_process`` flag's cell
#: (``FORGE_ARRAY_BUILD_PROCESS=0``)
_WANTED = FLAGS["build_process"].cell
_COUNTS = {"starts": 0, "deaths": 0, "errors": 0, "jobs": 0}
_CLOSING = [False]


class Abandoned(RuntimeError):
    """The interpreter is exiting: the build is dropped (the cache is not touched)."""


class _NotPortable(pickle.PicklingError):
    pass


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        # Python functions (pickled by name) only from modules the build process imports
        # as they are here; no class of the user's script.  A function or object made by a
        # factory of such a module says how to make it again (see :func:`rebuilt_by`)
        own = getattr(obj, "__dict__", None)
        if type(own) is dict and not isinstance(obj, type):
            recipe = own.get("__forge_rebuild__")
            if recipe is not None:
                return recipe
        if isinstance(obj, (types.FunctionType, types.MethodType)):
            mod = getattr(obj, "__module__", None) or ""
            top = mod.split(".")[0]
            if top not in _MODULES and top not in _STDLIB:
                raise _NotPortable(f"{mod}.{getattr(obj, '__qualname__', obj)}")
        elif isinstance(obj, type) and obj.__module__ == "__main__":
            raise _NotPortable(f"__main__.{obj.__qualname__}")
        return NotImplemented


def rebuilt_by(obj, factory, *args):
    """Mark ``obj`` (a function or object that ``factory(*args)`` made: generated source, a
    closure) as made again in the build process by that call, so that a kernel taking it can
    be built there; ``factory`` is a module-level function of forge_array and ``args``
    pickle.  Returns ``obj``.

    >>> def make(k):
    ...     return lambda v: v * k
    >>> f = rebuilt_by(make(3), make, 3)
    >>> f.__forge_rebuild__[1]
    (3,)
    """
    obj.__forge_rebuild__ = (factory, args)
    return obj


def _dumps(obj) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def _command(job_fd: int, result_fd: int) -> list:
    return [sys.executable, "-m", "forge_array.runtime.build_worker", str(job_fd), str(result_fd)]


class _Worker:
    """One build process and its two pipes."""

    def __init__(self):
        from multiprocessing.connection import Connection  # noqa: PLC0415

        job_r, job_w = os.pipe()
        res_r, res_w = os.pipe()
        env = dict(os.environ, FORGE_ARRAY_COMPILE="sync", FORGE_ARRAY_CACHE_DIR=config.CACHE_DIR,
                   FORGE_ARRAY_SIMULATE="1" if config.SIMULATE else "0")
        if not config.SIMULATE:
            env.pop("NUMBA_ENABLE_CUDASIM", None)
        # the same forge_array as this process's, wherever that one came from
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        try:
            self.proc = subprocess.Popen(_command(job_r, res_w), pass_fds=(job_r, res_w), env=env,
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
        except BaseException:
            for fd in (job_w, res_r):
                os.close(fd)
            raise
        finally:
            os.close(job_r)
            os.close(res_w)
        self.jobs = Connection(job_w, readable=False)
        self.results = Connection(res_r, writable=False)
        self.served = 0
        self.ready = False

    def wait_ready(self) -> None:
        """Wait for the process's first answer (it has started Python and forge_array)."""
        if self.ready:
            return
        try:
            reply = self._receive(START_TIMEOUT)
        except BaseException:
            self.close()
            raise
        if reply[0] != "ready":
            self.close()
            raise OSError(f"the build process answered {reply[0]!r}")
        self.ready = True

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _receive(self, timeout):
        deadline = time.monotonic() + timeout
        while not self.results.poll(0.25):      # waits without the GIL
            if self.proc.poll() is not None:
                raise EOFError(f"the build process exited ({self.proc.returncode})")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the build process did not answer in {timeout:.0f} s")
        return pickle.loads(self.results.recv_bytes())

    def request(self, payload: bytes):
        self.jobs.send_bytes(payload)
        reply = self._receive(BUILD_TIMEOUT)
        self.served += 1
        return reply

    def close(self) -> None:
        """End the process at once (an idle one holds nothing; a busy one leaves nothing
        half-written: kernel files are written atomically)."""
        for c in (self.jobs, self.results):
            try:
                c.close()
            except OSError:
                pass
        try:
            self.proc.kill()
            self.proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            pass


def _disable(reason: str) -> None:
    if not _DISABLED:
        _DISABLED.append(reason)
        warnings.warn(f"forge_array: kernels are built on a thread of this process ({reason})",
                      RuntimeWarning, stacklevel=4)


def _worker():
    if _WORKER:
        w = _WORKER[0]
        if w.proc.poll() is None:
            return _ready(w)
        _lost(w, EOFError(f"the build process exited ({w.proc.returncode})"))
        if _DISABLED:
            return None
    try:
        w = _Worker()
    except Exception as exc:  # noqa: BLE001  (no process here: builds stay on the thread)
        _disable(f"the build process could not start: {exc}")
        return None
    _COUNTS["starts"] += 1
    _WORKER.append(w)
    return _ready(w)


def _ready(w):
    try:
        w.wait_ready()
    except Exception as exc:  # noqa: BLE001
        _WORKER.clear()
        _disable(f"the build process could not start: {exc}")
        return None
    return w


def prestart() -> None:
    """Start the build process now, without waiting for it (a build was just queued: the
    process loads numba while the jobs ahead of that build run)."""
    if _DISABLED or not _WANTED[0] or _CLOSING[0] or _WORKER or not _LOCK.acquire(blocking=False):
        return
    try:
        if not _WORKER:
            _WORKER.append(_Worker())
            _COUNTS["starts"] += 1
    except Exception:  # noqa: BLE001  (the build itself tries again, and warns)
        pass
    finally:
        _LOCK.release()


def _lost(w, exc) -> None:
    if _WORKER and _WORKER[0] is w:
        _WORKER.clear()
    w.close()
    _COUNTS["deaths"] += 1
    if _COUNTS["deaths"] >= MAX_RESTARTS:
        _disable(f"the build process died {_COUNTS['deaths']} times, last: {exc}")


def build(factory, factory_args: tuple, argtypes: tuple, launch_bounds, cc, key) -> bool:
    """Have the build process compile ``factory(*factory_args)`` for ``argtypes`` and compute
    capability ``cc`` into the disk cache under ``key`` (in the simulator, ``cc`` and ``key``
    are None and it makes the simulated kernel).  True when it did; False when the caller
    must build it itself: its functions cannot be sent, the process is not available, died,
    or reported an error (the caller's own build then raises it).  Raises :class:`Abandoned`
    once the interpreter is exiting."""
    if _CLOSING[0]:
        raise Abandoned("the interpreter is exiting")
    if _DISABLED or not _WANTED[0]:
        return False
    try:
        payload = _dumps(("build", factory, factory_args, argtypes, launch_bounds, cc, key, config.CACHE_DIR))
    except Exception:  # noqa: BLE001  (a user's function, an object without a pickled form)
        return False
    with _LOCK:
        w = _worker()
        if w is None:
            return False
        try:
            reply = w.request(payload)
        except (OSError, EOFError, TimeoutError, pickle.UnpicklingError) as exc:
            if _CLOSING[0]:
                raise Abandoned("the interpreter is exiting") from None
            _lost(w, exc)
            return False
    _COUNTS["jobs"] += 1
    if reply[0] == "done":
        STATS["process_builds"] += 1
        return True
    if reply[0] == "error" and not reply[2]:
        # not the operator's fault: the build process lacks something this one has
        _COUNTS["errors"] += 1
        if _COUNTS["errors"] >= MAX_RESTARTS:
            _disable(f"the build process failed {_COUNTS['errors']} builds, last: {reply[1][:300]}")
    return False


def stats() -> dict:
    """The build process's pid (None when none runs), the builds it answered, how many times
    one was started and died, the builds it failed for want of something (not a compile
    error of the operator), and why builds run in this process (None while they do not)."""
    w = _WORKER[0] if _WORKER else None
    disabled = _DISABLED[0] if _DISABLED else (None if _WANTED[0] else "FORGE_ARRAY_BUILD_PROCESS=0")
    return {"pid": w.pid if w is not None else None, "jobs": _COUNTS["jobs"], "starts": _COUNTS["starts"],
            "deaths": _COUNTS["deaths"], "errors": _COUNTS["errors"], "disabled": disabled}


@atexit.register
def shutdown() -> None:
    """End the build process.  At the interpreter's exit (this runs then) a build still
    waiting for it is abandoned; called before, the next build starts a new process."""
    _CLOSING[0] = True
    try:
        for w in list(_WORKER):
            w.close()
        _WORKER.clear()
    finally:
        # atexit runs after the main thread has stopped; a call from the program keeps going
        _CLOSING[0] = not threading.main_thread().is_alive()


def _after_fork_in_child() -> None:
    # the child shares the parent's pipes; it starts its own build process when it needs one
    for w in list(_WORKER):
        for c in (w.jobs, w.results):
            try:
                c.close()
            except OSError:
                pass
    _WORKER.clear()
    global _LOCK
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
