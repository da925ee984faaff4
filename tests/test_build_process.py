"""The build process: background builds go to one process, started at the first build and
reused; a process that dies mid-build costs only that build's place (the call still gets its
kernel); no process falls back to the thread with one warning; sync mode and user operators
stay in the calling process; the interpreter's exit (or its death) leaves no process.  In
the simulator the build process makes the simulated kernel, so this runs in CI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

from forge_array import runtime
from forge_array.runtime import STATS, background, build_process, compiler, config, launching

_ITEMS = iter(range(3, 10_000))


def _spec():
    """A copy kernel specialisation no other test has built (a fresh ``items`` constant)."""
    from forge_array.kernels import copy as kcopy

    pt = runtime.ptr_t("float32")
    return kcopy.make_copy_scalar, (np.float32, next(_ITEMS)), (pt, pt, runtime.i64)


def _backend():
    """The array module our kernels run on here: NumPy in the simulator, CuPy on a GPU."""
    return np if runtime.SIMULATE else runtime.cupy()


def _check(kernel):
    m = _backend()
    x = m.arange(40, dtype=np.float32)
    y = m.zeros_like(x)
    runtime.launch(kernel, 2, 32, (runtime.buffer_of(x), runtime.buffer_of(y), x.size))
    assert (y == x).all()


def _background_build(spec):
    factory, args, argtypes = spec
    first = background.attempt(lambda: runtime.compile_kernel(factory, args, argtypes))
    assert first is background.PENDING
    assert background.wait(300)
    assert background.failures() == {} or all(k[0] != "kernel" for k in background.failures())
    k = background.attempt(lambda: runtime.compile_kernel(factory, args, argtypes))
    assert isinstance(k, launching.Kernel)
    return k


def _gone(pid, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/status") as f:
                if "\nState:\tZ" in f.read():
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """Background mode with no build process yet, fresh counters and an empty kernel cache
    (on a GPU machine other test processes share the disk cache); ends the process."""
    build_process.shutdown()
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build_process, "_DISABLED", [])
    monkeypatch.setattr(build_process, "_COUNTS", {"starts": 0, "deaths": 0, "errors": 0, "jobs": 0})
    old = background.set_mode("background")
    yield
    background.set_mode(old)
    build_process.shutdown()


def test_builds_go_to_one_process_that_is_reused(fresh):
    before = STATS["process_builds"]
    _check(_background_build(_spec()))
    pid = build_process.stats()["pid"]
    assert pid is not None and pid != os.getpid()
    _check(_background_build(_spec()))
    s = build_process.stats()
    assert (s["pid"], s["starts"], s["jobs"], s["deaths"]) == (pid, 1, 2, 0)
    assert STATS["process_builds"] == before + 2


def test_a_process_that_dies_mid_build_still_gives_the_kernel(fresh, monkeypatch):
    _background_build(_spec())             # a process is running
    first = build_process.stats()["pid"]
    original = build_process._Worker.request

    def crash_then_request(self, payload):
        os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(10)
        return original(self, payload)

    monkeypatch.setattr(build_process._Worker, "request", crash_then_request)
    _check(_background_build(_spec()))     # built on the thread instead
    assert build_process.stats()["deaths"] == 1
    assert _gone(first)
    monkeypatch.setattr(build_process._Worker, "request", original)
    _check(_background_build(_spec()))     # the next build starts a new process
    s = build_process.stats()
    assert s["starts"] == 2 and s["pid"] not in (None, first) and s["disabled"] is None


def test_a_process_that_cannot_build_is_given_up(fresh, monkeypatch):
    monkeypatch.setattr(build_process._Worker, "request", lambda self, p: ("error", "OSError: no libNVVM", False))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(build_process.MAX_RESTARTS + 1):
            _check(_background_build(_spec()))     # each built on the thread
    assert len([x for x in w if "built on a thread" in str(x.message)]) == 1
    s = build_process.stats()
    assert s["errors"] == build_process.MAX_RESTARTS and "no libNVVM" in s["disabled"]
    assert s["jobs"] == build_process.MAX_RESTARTS      # not asked again once given up


def test_no_process_falls_back_to_the_thread_with_one_warning(fresh, monkeypatch):
    monkeypatch.setattr(build_process, "_command", lambda r, w: ["/nonexistent/python-for-builds"])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        _check(_background_build(_spec()))
        _check(_background_build(_spec()))
    assert len([x for x in w if "built on a thread" in str(x.message)]) == 1
    s = build_process.stats()
    assert s["pid"] is None and s["jobs"] == 0 and "could not start" in s["disabled"]


def test_sync_mode_and_user_operators_stay_in_this_process(fresh):
    background.set_mode("sync")
    factory, args, argtypes = _spec()
    _check(runtime.compile_kernel(factory, args, argtypes))
    assert build_process.stats()["starts"] == 0
    pt = runtime.ptr_t("float32")
    assert not build_process.build(lambda a, b: a + b, (np.float32,), (pt,), None, None, None)
    assert build_process.stats()["starts"] == 0


_CHILD = textwrap.dedent("""
    import sys, time
    import numpy as np
    from forge_array import runtime
    from forge_array.runtime import build_process
    from forge_array.kernels import copy as kcopy
    pt = runtime.ptr_t("float32")
    assert build_process.build(kcopy.make_copy_scalar, (np.float32, 2), (pt, pt, runtime.i64), None, None, None)
    print(build_process.stats()["pid"], flush=True)
    if sys.argv[1] == "hang":
        time.sleep(600)
""")


def _child_env(same_mode=False):
    """A simulated child process (its build needs no GPU), or with ``same_mode`` one in this
    process's mode (simulated or on the GPU), as the build process is."""
    return dict(os.environ, FORGE_ARRAY_SIMULATE="1" if runtime.SIMULATE or not same_mode else "0")


def test_interpreter_exit_leaves_no_process():
    r = subprocess.run([sys.executable, "-c", _CHILD, "exit"], capture_output=True, text=True, env=_child_env(),
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert _gone(int(r.stdout.split()[0]))


def test_a_killed_interpreter_leaves_no_process():
    p = subprocess.Popen([sys.executable, "-c", _CHILD, "hang"], stdout=subprocess.PIPE, text=True,
                         env=_child_env())
    try:
        pid = int(p.stdout.readline())
        assert not _gone(pid, 0.5)
        p.kill()
        p.wait(30)
        assert _gone(pid)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_the_build_process_writes_ptx_the_caller_finds(offline_ptx, tmp_path):
    out = offline_ptx(f"""
        import numpy as np
        from forge_array import runtime
        from forge_array.runtime import build_process, compiler, config, kernel_files
        from forge_array.kernels import copy as kcopy
        config.CACHE_DIR = {str(tmp_path)!r}
        pt = runtime.ptr_t("float32")
        spec = (kcopy.make_copy_scalar, (np.float32, 4), (pt, pt, runtime.i64), None)
        key = compiler._key(*spec, (9, 0))
        print(build_process.build(*spec, (9, 0), key))
        entry, ptx = kernel_files.read_cached(kernel_files.cache_path(key))
        print(entry in ptx, ".target sm_90" in ptx)
    """)
    assert out.split() == ["True", "True", "True"]


def _record_specs(monkeypatch):
    """The specialisations compiled from now on (``compile_kernel``'s arguments), through
    every reference the layers hold to it."""
    specs = []
    original = compiler.compile_kernel

    def record(factory, factory_args, argtypes, *, launch_bounds=None):
        specs.append((factory, factory_args, tuple(argtypes), launch_bounds))
        return original(factory, factory_args, argtypes, launch_bounds=launch_bounds)

    monkeypatch.setattr(compiler, "compile_kernel", record)
    monkeypatch.setattr(runtime, "compile_kernel", record)
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("forge_array.") and callable(getattr(mod, "compile_kernel", None)):
            monkeypatch.setattr(mod, "compile_kernel", record)
    return specs


def _keys_match_in_a_fresh_process(specs, tmp_path):
    """Every specialisation of ``specs`` pickles as the build process receives it and keys
    there (a fresh process, this one's mode) as here."""
    payloads = [build_process._dumps(s) for s in specs]
    keys = [compiler._key(*s, (9, 0)) for s in specs]
    assert payloads and None not in keys
    path = tmp_path / "specs.pkl"
    path.write_bytes(__import__("pickle").dumps((payloads, keys)))
    code = textwrap.dedent(f"""
        import pickle
        from forge_array.runtime import compiler
        payloads, keys = pickle.loads(open({str(path)!r}, "rb").read())
        print(sum(compiler._key(*pickle.loads(p), (9, 0)) != k for p, k in zip(payloads, keys)))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=_child_env(same_mode=True), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["0"]


def test_a_fresh_process_finds_the_same_keys(monkeypatch, tmp_path):
    """The build process keys what it compiles itself: the specialisations the standard
    operations send must fingerprint alike in a fresh process (no state of this one in them)."""
    import forge_array as xp

    specs = _record_specs(monkeypatch)
    rng = np.random.default_rng(1)
    m = _backend()
    x = xp.asarray(m.asarray(rng.random(1237, dtype=np.float32)))       # sizes no other test's plans hold
    A = xp.asarray(m.asarray(rng.random((23, 19), dtype=np.float32)))
    v = xp.asarray(m.asarray(rng.random(19, dtype=np.float32)))
    for call in (lambda: xp.sum(x), lambda: xp.cumulative_sum(x), lambda: xp.argmax(x), lambda: xp.std(x),
                 lambda: xp.sum(A, axis=0), lambda: A @ v):
        call()
    _keys_match_in_a_fresh_process(specs, tmp_path)


def test_fused_kernels_go_to_the_build_process_with_the_same_keys(monkeypatch, tmp_path):
    """The kernels of fused expressions (generated functions: a fused element map, a fused
    pass's combined operator and finishing step, a row program's steps) are sent to the
    build process as the calls that make them again, and fingerprint alike there."""
    import forge_array as xp

    specs = _record_specs(monkeypatch)
    old = xp.set_flags(fusion_min_size=0)
    try:
        rng = np.random.default_rng(2)
        m = _backend()
        X = xp.asarray(m.asarray(rng.random((61, 7), dtype=np.float32)), copy=True)   # private: deferred
        y = xp.asarray(m.asarray(rng.random(1231, dtype=np.float32)), copy=True)
        mu = xp.mean(X, axis=0)
        for r in (xp.sum((X - mu) ** 2, axis=0), xp.sum(y * y + 1), xp.sum(X * X, axis=1),
                  xp.max(xp.where(xp.isnan(X), -xp.inf, X), axis=0)):
            r._array  # noqa: B018 - computes the deferred result
        xp.fuse(lambda a: (xp.mean(a * a), xp.std(a), xp.argmax(a + 1)))(y)
    finally:
        xp.set_flags(**old)
    fused = [s for s in specs if "<forge_array" in repr([getattr(f, "__code__", None) for f in _functions(s[1])])]
    assert fused, "no kernel of a generated function was built"
    _keys_match_in_a_fresh_process(fused, tmp_path)


def _functions(obj):
    """The Python functions inside a specialisation's constants (tuples, specs, operators)."""
    import types

    if isinstance(obj, types.FunctionType):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            yield from _functions(o)
    elif hasattr(obj, "_fields"):  # a named tuple of constants (a reduction's spec)
        for o in obj:
            yield from _functions(o)


def test_the_build_process_links_a_cubin_beside_what_it_builds(monkeypatch, tmp_path):
    """After a build the build process links the kernel's cubin for the build's compute
    capability beside the kernel file (the user's process then loads machine code); a linker
    that refuses leaves the PTX alone, and a cubin already there is kept."""
    from forge_array.runtime import build_worker, kernel_files, prebuilt

    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path))
    calls = []

    def link(ptx, cc):
        calls.append((ptx, tuple(cc)))
        if "refuse" in ptx:
            raise RuntimeError("ERROR_INTERNAL")
        return b"cubin of " + ptx.encode()

    monkeypatch.setattr(prebuilt, "LINK", [link])
    for key, ptx in (("a1" * 32, "// kernel one"), ("b2" * 32, "// refuse")):
        kernel_files.write_cached(kernel_files.cache_path(key), "entry", ptx)
        build_worker._link_machine_code(key, (9, 0))
    assert calls == [("// kernel one", (9, 0)), ("// refuse", (9, 0))]
    with open(kernel_files.cubin_path("a1" * 32), "rb") as f:
        assert f.read() == b"cubin of // kernel one"
    assert not os.path.exists(kernel_files.cubin_path("b2" * 32))
    build_worker._link_machine_code("a1" * 32, (9, 0))   # linked before: not again
    assert len(calls) == 2


def test_the_build_process_links_only_through_nvjitlink(monkeypatch, tmp_path):
    """CUDA's own linker is used in the build process only where it is nvJitLink: the
    driver's linker would make that process a CUDA context on the user's GPU."""
    from forge_array.runtime import build_worker, kernel_files, prebuilt

    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path))
    calls = []

    def link_cubin(ptx, cc):
        calls.append(cc)
        return b"cubin"

    monkeypatch.setattr(prebuilt, "link_cubin", link_cubin)
    monkeypatch.setattr(prebuilt, "LINK", [link_cubin])
    key = "c3" * 32
    kernel_files.write_cached(kernel_files.cache_path(key), "entry", "// kernel")
    monkeypatch.setattr(build_worker, "_links_without_a_gpu", lambda: False)
    build_worker._link_machine_code(key, (9, 0))
    assert calls == [] and not os.path.exists(kernel_files.cubin_path(key))
    monkeypatch.setattr(build_worker, "_links_without_a_gpu", lambda: True)
    build_worker._link_machine_code(key, (9, 0))
    assert calls == [(9, 0)] and os.path.exists(kernel_files.cubin_path(key))
