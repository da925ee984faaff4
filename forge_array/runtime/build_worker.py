"""The build process of :mod:`.build_process`: ``python -m forge_array.runtime.build_worker
JOB_FD RESULT_FD``.

Reads pickled builds from the job pipe, compiles each into the disk cache with
:func:`.compiler.build_to_disk` (numba shown a device of the build's compute capability;
where that is not enough for numba, from then on the GPU itself, through the driver), links
its cubin for that capability beside it (CUDA's linker where it is nvJitLink, which touches
no GPU: the waiting process then loads machine code instead of compiling PTX at load) and answers ``("done", key)``,
``("mismatch", key)`` (its own key of the build differs from the sender's: another source
tree or settings) or ``("error", message, whether it is the
operator's compile error)`` on the result pipe.
Exits when the job pipe closes or the process that started it is gone; ignores the
terminal's interrupt (its parent decides when it ends).
"""

from __future__ import annotations

import functools
import os
import pickle
import signal
import sys
import threading
import time


def _watch_parent(parent: int) -> None:
    def watch():
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="forge_array-build-parent", daemon=True).start()


#: the kernel factories' modules, loaded before the heap is frozen (:func:`_settle_heap`)
KERNEL_MODULES = ("forge_array.kernels.reduce", "forge_array.kernels.scan", "forge_array.kernels.rowcol",
                  "forge_array.kernels.elementwise", "forge_array.kernels.copy", "forge_array.kernels.row_programs")


def _settle_heap() -> None:
    """Load the kernel factories, move everything loaded so far (numba, its CUDA target, the
    kernel modules: objects that live as long as this process) out of the garbage
    collector's sight with ``gc.freeze``, and collect the young generations less often: a
    build allocates hundreds of thousands of short-lived objects, and the collector's passes
    over them and over numba's tables cost a tenth to a fifth of a specialisation's build
    (``python -m bench.suite_compile --parts phases`` times a build).  Only this process,
    which runs nothing but builds, changes its collector."""
    import gc
    import importlib

    for name in KERNEL_MODULES:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()
    gc.set_threshold(20000, 50, 100)


def _compile_error(exc) -> bool:
    """Whether ``exc`` is numba's refusal of the kernel's code (the caller raises it too)."""
    return isinstance(exc, TypeError) and str(exc).startswith("cannot compile")


@functools.lru_cache(maxsize=1)
def _links_without_a_gpu() -> bool:
    """Whether CUDA's linker here is nvJitLink (a library: no device touched), which
    ``cuda.core``'s linker takes wherever nvJitLink 12.3 or later is installed, rather than
    the driver's, which would make this process a CUDA context on the user's GPU (and
    time-slice the GPU with the user's work): only then does this process link cubins."""
    try:
        from cuda.bindings import nvjitlink

        return tuple(nvjitlink.version()) >= (12, 3)
    except Exception:  # noqa: BLE001 - no nvJitLink: no cubins here
        return False


def _link_machine_code(key, cc) -> None:
    """Write the cubin of kernel file ``key`` (built for ``cc``) beside it, before the answer
    that the waiting process acts on: that process then loads machine code, well under a
    millisecond, where the driver would compile the PTX at load in that process's own thread
    (tens to hundreds of milliseconds, a second for a large fused kernel).  Where CUDA's
    linker is missing or refuses the PTX, the kernel file holds PTX alone, as before."""
    from forge_array.runtime import kernel_files, prebuilt

    if os.path.exists(kernel_files.cubin_path(key)):
        return
    if prebuilt.LINK[0] is prebuilt.link_cubin and not _links_without_a_gpu():
        return
    cached = kernel_files.read_cached(kernel_files.cache_path(key))
    if not cached or not cached[1]:
        return
    try:
        kernel_files.write_cubin(key, prebuilt.LINK[0](cached[1], cc))
    except Exception:  # noqa: BLE001 - the PTX still loads
        pass


def main(argv) -> int:
    from multiprocessing.connection import Connection

    jobs = Connection(int(argv[1]), writable=False)
    results = Connection(int(argv[2]), readable=False)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _watch_parent(os.getppid())
    results.send_bytes(pickle.dumps(("ready", os.getpid())))
    # numba colours the message of every error it builds, and typing raises hundreds that
    # it catches; read once, when numba loads
    os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")
    import numba.cuda  # noqa: F401  (numba's CUDA target while the first build is on its way)

    from forge_array.runtime import compiler, config

    _settle_heap()

    pretend = [True]

    def build(factory, factory_args, argtypes, launch_bounds, cc):
        try:
            return compiler.build_to_disk(factory, factory_args, argtypes, launch_bounds, cc, pretend[0])
        except Exception as exc:
            if not pretend[0] or config.SIMULATE or _compile_error(exc):
                raise
            # numba wanted more of the device than its compute capability: ask the driver
            pretend[0] = False
            return compiler.build_to_disk(factory, factory_args, argtypes, launch_bounds, cc, False)

    while True:
        try:
            data = jobs.recv_bytes()
        except (EOFError, OSError):
            return 0
        try:
            _, factory, factory_args, argtypes, launch_bounds, cc, key, cache_dir = pickle.loads(data)
            config.CACHE_DIR = cache_dir
            got = build(factory, factory_args, argtypes, launch_bounds, cc)
            if got is not None:
                _link_machine_code(got, cc)
            reply = ("done", got) if got == key else ("mismatch", got)
        except BaseException as exc:  # noqa: BLE001  (reported; the sender builds it itself)
            reply = ("error", f"{type(exc).__name__}: {exc}", _compile_error(exc))
        try:
            results.send_bytes(pickle.dumps(reply))
        except OSError:
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
