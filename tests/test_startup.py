"""Startup: ``import forge_array`` without numba, the CPU device without numba, and first calls
that run on their fallback while the kernel layer loads and kernels build in the background."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from forge_array.runtime import background, lazy

_BLOCK_NUMBA = textwrap.dedent("""
    import sys
    class _Block:
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in ("numba", "llvmlite"):
                raise ImportError("numba must not load here: " + name)
    sys.meta_path.insert(0, _Block())
""")


def _run(code, *args, **env):
    full = dict(os.environ)
    for k in ("FORGE_ARRAY_SIMULATE", "NUMBA_ENABLE_CUDASIM", "FORGE_ARRAY_COMPILE"):
        full.pop(k, None)
    full.update(env)
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=full,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_import_and_cpu_device_load_no_numba():
    out = _run(_BLOCK_NUMBA + textwrap.dedent("""
        import forge_array as xp
        x = xp.asarray([3.0, 1.0, 2.0], device="cpu")
        A = xp.reshape(xp.arange(6.0, device="cpu"), (2, 3))
        r = [float(xp.sum(x)), float(xp.mean(x)), float(xp.std(x)), float(xp.max(x * 2 + 1)),
             int(xp.argmax(x)), float(xp.cumulative_sum(x)[-1]), float(xp.vecdot(x, x)),
             [float(v) for v in A @ x], [float(v) for v in xp.sum(A, axis=0)], bool(xp.all(x > 0)),
             float(xp.prod(x)), float(xp.var(x, correction=1)),
             float(xp.fuse(lambda a: xp.sum(a * a + 1))(x))]
        print(r)
        from forge_array.runtime import background
        print("numba" in sys.modules, "forge_array.primitives.reductions" in sys.modules,
              background.state("kernel layer"))   # the layer's load was never even queued
    """))
    vals, flags = out.strip().splitlines()
    assert flags == "False False None"
    x = np.array([3.0, 1.0, 2.0])
    A = np.arange(6.0).reshape(2, 3)
    assert eval(vals) == [6.0, 2.0, float(np.std(x)), 7.0, 0, 6.0, 14.0, list(A @ x),
                          list(A.sum(axis=0)), True, 6.0, float(np.var(x, ddof=1)), 17.0]


def test_generic_operator_on_cpu_loads_numba_only_then():
    out = _run(textwrap.dedent("""
        import sys
        import forge_array as xp
        before = "numba" in sys.modules
        x = xp.asarray([1.0, 2.0, 3.0], device="cpu")
        r = float(xp.reduce(lambda a, b: a + b, x))
        print(before, r)
    """))
    assert out.split() == ["False", "6.0"]


def test_lazy_module_rebinds_its_global():
    mod = type(sys)("_lazy_owner_for_test")
    sys.modules[mod.__name__] = mod
    try:
        mod.json_mod = lazy.module("json", mod.__name__, "json_mod")
        assert "first use" in repr(mod.json_mod)
        assert mod.json_mod.dumps(1) == "1"
        assert mod.json_mod is json       # the stand-in gave its place to the module
    finally:
        del sys.modules[mod.__name__]


def test_mode_switch_and_bad_mode():
    old = background.set_mode("sync")
    try:
        assert background.mode() == "sync"
        assert background.attempt(lambda a, b: a * b, 6, 7) == 42
        with pytest.raises(ValueError, match="background' or 'sync"):
            background.set_mode("later")
    finally:
        background.set_mode(old)
    env = dict(os.environ, FORGE_ARRAY_COMPILE="sometimes")
    env.pop("FORGE_ARRAY_SIMULATE", None)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    r = subprocess.run([sys.executable, "-c", "import forge_array.runtime.background as b; print(b.mode())"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.stdout.strip() == "background"
    assert "FORGE_ARRAY_COMPILE='sometimes' is not valid" in r.stderr


def test_failed_background_job_leaves_the_fallback_in_place():
    key = ("test job that fails", id(object()))

    def boom():
        raise RuntimeError("no compiler here")

    old = background.set_mode("background")
    interval = sys.getswitchinterval()
    try:
        assert not background.ready(key, boom)
        assert background.wait(30)
        assert sys.getswitchinterval() == interval     # restored once the queue is empty
        assert background.state(key) == "failed"
        assert isinstance(background.failures()[key], RuntimeError)
        assert not background.ready(key, boom)        # never retried, never raises
    finally:
        background.set_mode(old)


def _in_background_mode(script, where, sim, tmp_path, prebuilt=False):
    """The JSON ``script`` prints, run with FORGE_ARRAY_COMPILE=background in a fresh process
    on the simulator's CPU arrays or (``where == "gpu"``) on the GPU with an empty kernel
    cache in ``tmp_path`` and, unless ``prebuilt``, without the kernels shipped built (so
    that they build)."""
    if where == "gpu":
        if sim:
            pytest.skip("needs a GPU")
        env = {"FORGE_ARRAY_SIMULATE": "0", "FORGE_ARRAY_CACHE_DIR": str(tmp_path),
               "FORGE_ARRAY_PREBUILT": "1" if prebuilt else "0"}
        dev = "cuda:0"
    else:
        env = {"FORGE_ARRAY_SIMULATE": "1"}
        dev = "cpu"
    return json.loads(_run(script, dev, FORGE_ARRAY_COMPILE="background", **env))


_BACKGROUND = textwrap.dedent("""
    import json, sys
    import numpy as np
    import forge_array as xp
    from forge_array.runtime import STATS, background
    assert background.mode() == "background"
    dev = sys.argv[1]
    rng = np.random.default_rng(0)
    x = xp.asarray(rng.random(1000), device=dev)
    A = xp.asarray(rng.random((40, 25)), device=dev)
    v = xp.asarray(rng.random(25), device=dev)
    calls = {"sum": lambda: xp.sum(x), "argmax": lambda: xp.argmax(x),
             "cumulative_sum": lambda: xp.cumulative_sum(x), "matvec": lambda: A @ v,
             "std0": lambda: xp.std(A, axis=0)}
    out = {}
    for name, call in calls.items():
        rounds = []
        for _ in range(5):             # fallback (layer loading), fallback (kernels building), ours
            n0 = STATS["launches"]
            r = np.asarray(xp.asarray(call(), device="cpu")).tolist()
            rounds.append([STATS["launches"] - n0, r])
            background.wait(120)
        out[name] = rounds
    out["deferred"] = STATS["deferred"]
    out["failures"] = [repr(e) for e in background.failures().values()]
    print(json.dumps(out))
""")


@pytest.mark.parametrize("where", ["simulator", "gpu"])
def test_first_calls_run_on_the_fallback_while_kernels_build(where, sim, tmp_path):
    """With FORGE_ARRAY_COMPILE=background and an empty kernel cache: the first call of each
    operation returns the fallback's result (NumPy in the simulator, CuPy on a GPU) while the
    layer loads / its kernels build off the thread, a later call launches our kernels, and
    the results agree."""
    out = _in_background_mode(_BACKGROUND, where, sim, tmp_path)
    assert out["failures"] == []
    assert out["deferred"] >= 4
    for name in ("sum", "argmax", "cumulative_sum", "matvec", "std0"):
        rounds = out[name]
        assert rounds[0][0] == 0, name                      # the first call ran on NumPy
        assert rounds[-1][0] >= 1, name                     # the last one on our kernels
        ref = np.asarray(rounds[0][1])
        for launches, r in rounds[1:]:
            np.testing.assert_allclose(np.asarray(r), ref, rtol=1e-12, err_msg=name)


def _shipped_kernels_in_use() -> bool:
    """Whether this install loads the package's shipped kernels, all or all but those of kernel
    modules changed or added since (the status line of ``python -m forge_array``)."""
    from forge_array.__main__ import _prebuilt_status

    return "; in use" in _prebuilt_status()


def test_shipped_kernels_run_once_the_layer_has_loaded(sim, tmp_path):
    """With the kernels shipped built and an empty cache, no standard call waits for a build:
    after the first (the kernel layer loading), each call launches our kernel, loaded from
    the package's archive, with the fallback's results."""
    if sim:
        pytest.skip("needs a GPU")
    if not _shipped_kernels_in_use():
        pytest.skip("the shipped kernels do not match this install")
    out = _in_background_mode(_BACKGROUND, "gpu", sim, tmp_path, prebuilt=True)
    assert out["failures"] == [] and out["deferred"] == 0
    for name in ("sum", "argmax", "cumulative_sum", "matvec", "std0"):
        rounds = out[name]
        assert all(launches >= 1 for launches, _ in rounds[1:]), name
        for _, r in rounds[1:]:
            np.testing.assert_allclose(np.asarray(r), np.asarray(rounds[0][1]), rtol=1e-12, err_msg=name)


def test_shipped_cubins_load_without_the_driver_compiling(sim, tmp_path):
    """On a device the shipped cubins run (sm_90), a standard call on an empty cache loads its
    kernel as machine code, beside the PTX in the disk cache, with the right result."""
    if sim:
        pytest.skip("needs a GPU")
    from forge_array.runtime import backend, prebuilt

    if not _shipped_kernels_in_use():
        pytest.skip("the shipped kernels do not match this install")
    cc = tuple(backend.device_info()["cc"])
    if not any(prebuilt.runs_cubin(t, cc) for t in prebuilt.CUBIN_TARGETS):
        pytest.skip("no shipped cubins for this GPU")
    out = json.loads(_run(textwrap.dedent("""
        import glob, json, os, sys
        import forge_array as xp
        from forge_array.runtime import STATS
        x = xp.arange(1000, dtype=xp.float32, device="cuda:0")
        r = [float(xp.sum(x)), float(xp.cumulative_sum(x)[-1]), int(xp.argmax(x))]
        cubins = glob.glob(os.path.join(os.environ["FORGE_ARRAY_CACHE_DIR"], "*", "*.cubin"))
        print(json.dumps({"r": r, "cubin_loads": STATS["cubin_loads"], "cubins": len(cubins),
                          "compiled": STATS["compiled"]}))
    """), FORGE_ARRAY_COMPILE="sync", FORGE_ARRAY_SIMULATE="0", FORGE_ARRAY_CACHE_DIR=str(tmp_path),
        FORGE_ARRAY_PREBUILT="1"))
    assert out["r"] == [499500.0, 499500.0, 999]
    assert out["compiled"] == 0 and out["cubin_loads"] >= 3 and out["cubins"] >= 3


_FUSED_BACKGROUND = textwrap.dedent("""
    import json, sys
    import numpy as np
    import forge_array as xp
    from forge_array.fusion import auto
    from forge_array.runtime import STATS, background
    assert background.mode() == "background"
    dev = sys.argv[1]
    if dev == "cpu":
        auto.enable(True, simulated_cpu=True)
    auto.MIN_SIZE[0] = 0
    rng = np.random.default_rng(0)
    x = xp.asarray(xp.asarray(rng.random(1000)), device=dev, copy=True)   # private arrays
    y = xp.asarray(xp.asarray(rng.random(1000)), device=dev, copy=True)
    A = xp.asarray(xp.asarray(rng.random((40, 25))), device=dev, copy=True)
    calls = {
        "fuse sum": xp.fuse(lambda a, b: xp.sum(a * b + 1)),
        "fuse stats": xp.fuse(lambda a, b: (xp.mean(a), xp.std(a), xp.max(a - b))),
        "fuse scan": xp.fuse(lambda a, b: xp.cumulative_sum(a * b)),
        "fuse columns": xp.fuse(lambda a, b: xp.sum((A - xp.mean(A, axis=0)) ** 2, axis=0)),
        "plain sum": lambda a, b: xp.sum(a * b + 2),
        "plain scan": lambda a, b: xp.cumulative_sum(a - b),
    }
    out = {}
    for name, call in calls.items():
        rounds = []
        for _ in range(8):   # plain code while the layer loads, eager while kernels build, fused
            f0 = STATS["fused"]
            r = call(x, y)
            r = [np.asarray(xp.asarray(v, device="cpu")).tolist()
                 for v in (r if isinstance(r, tuple) else (r,))]
            rounds.append([STATS["fused"] - f0, r])
            background.wait(120)
        out[name] = rounds
    out["failures"] = [repr(e) for e in background.failures().values()]
    print(json.dumps(out))
""")


@pytest.mark.parametrize("where", ["simulator", "gpu"])
def test_fused_first_calls_run_eagerly_while_kernels_build(where, sim, tmp_path):
    """With FORGE_ARRAY_COMPILE=background and an empty kernel cache, a fused function's first
    calls and plain code's first settlements run eagerly (no fused expression) while the layer
    loads and their kernels build off the thread; later calls fuse, and every call gives the
    first call's values."""
    out = _in_background_mode(_FUSED_BACKGROUND, where, sim, tmp_path)
    assert out["failures"] == []
    for name in ("fuse sum", "fuse stats", "fuse scan", "fuse columns", "plain sum", "plain scan"):
        rounds = out[name]
        assert rounds[0][0] == 0, name                      # the first call fused nothing
        assert rounds[-1][0] >= 1, name                     # the last one fused its expressions
        ref = rounds[0][1]
        for fused, r in rounds[1:]:
            for got, want in zip(r, ref):
                np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12,
                                           err_msg=name)


def test_a_forked_child_builds_with_its_own_worker():
    out = _run(textwrap.dedent("""
        import os
        from forge_array.runtime import background
        background.set_mode("background")
        background.submit("parent job", lambda: None)
        assert background.wait(30)
        pid = os.fork()
        if pid == 0:
            background.submit("child job", lambda: None)
            ok = background.wait(30) and background.state("child job") == "done"
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """))
    assert out.strip() == "0"


_STORED = textwrap.dedent("""
    import json, sys
    import numpy as np
    import forge_array as xp
    from forge_array import _routing
    from forge_array.runtime import STATS, background
    if sys.argv[2] in ("hold", "plan"):   # the kernel layer never loads (numba stays unloaded)
        _routing.layer_ready = lambda: False
    if sys.argv[2] == "hold":   # nor its planning modules: calls run stored launches or fall back
        _routing._load_planning = lambda: None
    import cupy as cp
    dev = sys.argv[1]
    rng = np.random.default_rng(0)
    def arr(h):   # arrays CuPy shares: their reductions are not deferred (automatic fusion)
        return xp.asarray(cp.asarray(h))
    x = arr(rng.random(1000, dtype=np.float32))
    x64 = arr(rng.random(333))
    b = arr(rng.random(1000) > 0.5)
    i = arr(rng.integers(-50, 50, 1000, dtype=np.int32))
    A = arr(rng.random((40, 25), dtype=np.float32))
    v = arr(rng.random(25, dtype=np.float32))
    w = arr(rng.random(40, dtype=np.float32))
    B = arr(rng.random((40, 25)) > 0.5)
    ones = arr(np.ones(2 * 10**5 + 3))
    calls = {"sum": lambda: xp.sum(x), "sum f64": lambda: xp.sum(x64), "sum int32": lambda: xp.sum(i),
             "sum as float64": lambda: xp.sum(x, dtype=xp.float64), "prod": lambda: xp.prod(x[:40]),
             "max": lambda: xp.max(x), "min keepdims": lambda: xp.min(x, keepdims=True),
             "mean": lambda: xp.mean(x), "var": lambda: xp.var(x64, correction=1), "std": lambda: xp.std(x),
             "any": lambda: xp.any(b), "all": lambda: xp.all(i), "argmax": lambda: xp.argmax(x),
             "argmin": lambda: xp.argmin(x64), "A @ v": lambda: A @ v, "w @ A": lambda: w @ A,
             "sum(A, axis=0)": lambda: xp.sum(A, axis=0),
             "max(A, axis=1) keepdims": lambda: xp.max(A, axis=1, keepdims=True),
             "any(axis=0)": lambda: xp.any(B, axis=0), "cumulative_sum": lambda: xp.cumulative_sum(x),
             "cumulative_sum again": lambda: xp.cumulative_sum(x),   # the stored tile state's next epoch
             "cumulative_prod with the initial": lambda: xp.cumulative_prod(x64[:50], include_initial=True),
             "cumulative_sum of a large array": lambda: xp.cumulative_sum(ones)}
    out = {}
    for name, call in calls.items():
        n0, s0, f0 = STATS["launches"], STATS["stored_launches"], STATS["numba_free_kernels"]
        r = call()
        out[name] = [STATS["launches"] - n0, STATS["stored_launches"] - s0,
                     np.asarray(xp.asarray(r, device="cpu")).tolist(), STATS["numba_free_kernels"] - f0]
    out["numba"] = "numba" in sys.modules
    background.wait(300)   # the calls prepared while the layer loaded (background mode)
    print(json.dumps(out))
""")


@pytest.mark.parametrize("first_mode", ["sync", "background"])
def test_a_later_process_runs_the_stored_launches_without_numba(sim, tmp_path, first_mode):
    """A process fills the kernel cache and stores its launches (in background mode, the
    calls that ran on CuPy while the layer loaded are prepared behind it); a later one, whose
    kernel layer is held from loading, runs each call from its stored launch (one launch, no
    numba imported) and gets the first process's results (bit for bit after a sync-mode first
    process, whose calls all ran ours; in background mode a call may have run on CuPy while
    a prepared call launched ours on the worker, so the launch count cannot tell)."""
    if sim:
        pytest.skip("needs a GPU")
    env = {"FORGE_ARRAY_SIMULATE": "0", "FORGE_ARRAY_CACHE_DIR": str(tmp_path)}
    first = json.loads(_run(_STORED, "cuda:0", "load", FORGE_ARRAY_COMPILE=first_mode, **env))
    later = json.loads(_run(_STORED, "cuda:0", "hold", FORGE_ARRAY_COMPILE="background", **env))
    assert later.pop("numba") is False
    first.pop("numba")
    for name, (launches, from_store, value, _) in later.items():
        assert (launches, from_store) == (1, 1), name
        if first_mode == "sync":   # the first process ran our kernels too
            assert first[name][0] >= 1 and value == first[name][2], name
        else:
            np.testing.assert_allclose(np.asarray(value, dtype=float), np.asarray(first[name][2], dtype=float),
                                       rtol=1e-5, err_msg=name)


def test_a_process_with_the_planning_modules_loaded_runs_the_cached_kernels_without_numba(sim, tmp_path):
    """A process fills the kernel cache (and the factories' fingerprints); a later one whose
    numba-free planning modules loaded at its first GPU but whose kernel layer (numba) is held
    from loading plans every call and finds its kernels without numba: the cached kernels,
    or for the few the disk holds no fingerprint of, the stored launch; at least one launch
    each, the first process's results (a float scan's look-back may fold its tiles in another
    order)."""
    if sim:
        pytest.skip("needs a GPU")
    env = {"FORGE_ARRAY_SIMULATE": "0", "FORGE_ARRAY_CACHE_DIR": str(tmp_path)}
    first = json.loads(_run(_STORED, "cuda:0", "load", FORGE_ARRAY_COMPILE="sync", **env))
    later = json.loads(_run(_STORED, "cuda:0", "plan", FORGE_ARRAY_COMPILE="background", **env))
    assert later.pop("numba") is False
    first.pop("numba")
    for name, (launches, from_store, value, found) in later.items():
        assert launches >= 1, name
        np.testing.assert_allclose(np.asarray(value, dtype=float), np.asarray(first[name][2], dtype=float),
                                   rtol=1e-6, err_msg=name)
    assert sum(v[3] for v in later.values()) > 0
