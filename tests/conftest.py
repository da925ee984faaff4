"""Test set-up: kernels run on the GPU when CuPy finds one, else in numba's CUDA simulator.

``FORGE_ARRAY_SIMULATE`` must be decided before anything imports numba.cuda, so this runs
first. Fixtures: ``bk`` (the backend module whose arrays our kernels take: cupy or numpy),
``sim`` (whether kernels are simulated) and ``offline_ptx`` (compile GPU code to PTX in a
subprocess without a GPU; skips when libNVVM/NVRTC are missing).
"""

import os
import subprocess
import sys
import textwrap


def _gpu_present() -> bool:
    if os.environ.get("FORGE_ARRAY_SIMULATE", "") not in ("",):
        return os.environ["FORGE_ARRAY_SIMULATE"] in ("0", "false", "no")
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


GPU = _gpu_present()
# tests check our kernels from the first call on (tests/test_startup.py covers background builds)
os.environ.setdefault("FORGE_ARRAY_COMPILE", "sync")
if not GPU:
    os.environ["FORGE_ARRAY_SIMULATE"] = "1"
    os.environ.setdefault("FORGE_ARRAY_DEVICE", "cpu")
# a simulated warp whose lanes a loaded 2-core machine leaves unscheduled for over 30 s (the
# default) is not deadlocked; a real deadlock still fails, after 120 s
os.environ.setdefault("FORGE_ARRAY_SIM_BARRIER_TIMEOUT", "120")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import forge_array.runtime as runtime  # noqa: E402  (decides the mode)

try:  # keep hypothesis quick in the simulator; the GPU run may raise the profile
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "sim", max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
    )
    settings.register_profile("gpu", max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    settings.load_profile(os.environ.get("FORGE_ARRAY_HYPOTHESIS_PROFILE", "sim" if runtime.SIMULATE else "gpu"))
except ImportError:  # pragma: no cover
    pass


@pytest.fixture(autouse=True)
def _no_structure_computed_alone():
    """Each test starts with no structure of plain code counted as computed alone (automatic
    fusion runs such steps eagerly: an earlier test's steps would decide this one's)."""
    from forge_array.fusion import auto, expr

    expr.ALONE.clear()
    auto._SKIPPED.clear()


@pytest.fixture(scope="session")
def sim() -> bool:
    return runtime.SIMULATE


@pytest.fixture(scope="session")
def bk():
    """The backend array module our kernels run on in this session."""
    if runtime.SIMULATE:
        return np
    cp = runtime.cupy()
    if cp is None:
        pytest.skip("no GPU and not simulating")
    return cp


def _cuda_home():
    for cand in (os.environ.get("CUDA_HOME"), "/usr/local/cuda", "/usr/local/cuda-13.0", "/usr/local/cuda-12.9"):
        if cand and os.path.exists(os.path.join(cand, "nvvm")) or (
            cand and os.path.exists(os.path.join(cand, "lib64", "libnvvm.so"))
        ):
            return cand
    return None


def _nvrtc_present() -> bool:
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        load_nvidia_dynamic_lib("nvrtc")
        return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def offline_ptx():
    """Run Python source in a fresh process without the simulator, where
    ``forge_array.runtime.compile_ptx_offline`` can compile GPU code to PTX; returns stdout.

    The source should print what the test checks (e.g. the PTX). Skips when the CUDA compiler
    libraries are not installed.
    """
    home = _cuda_home()
    if home is None or not _nvrtc_present():
        pytest.skip("libNVVM / NVRTC not available for offline PTX compilation")

    def run(source: str, timeout: float = 300) -> str:
        env = dict(os.environ)
        env.pop("NUMBA_ENABLE_CUDASIM", None)
        env["FORGE_ARRAY_SIMULATE"] = "0"
        env["CUDA_HOME"] = home
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        proc = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(source)],
            capture_output=True, text=True, env=env, timeout=timeout,
        )
        if proc.returncode != 0:
            raise AssertionError(f"offline PTX compile failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
        return proc.stdout

    return run


@pytest.fixture
def numpy_routes(monkeypatch):
    """Switch routing to our kernels off, so that namespace semantics are checked against
    NumPy alone (the kernels, simulated on a machine without a GPU, have their own tests)."""
    from forge_array.runtime import config

    monkeypatch.setattr(config, "KERNELS_ENABLED", False)


@pytest.fixture
def rowcol_params(monkeypatch):
    """``set(**params)``: override the row / column kernels' tuning parameters for this test,
    with fresh launch plans (the plan caches are cleared on entry and exit)."""
    from forge_array.dispatch import axis_reduce as dispatch_axis
    from forge_array.runtime import tuning

    def clear():
        tuning._CACHE.clear()
        dispatch_axis.PLANS.clear()
        dispatch_axis.FAST.clear()

    def set_params(**params):
        monkeypatch.setitem(tuning.OVERRIDES, "rowcol", {**tuning.OVERRIDES.get("rowcol", {}), **params})
        clear()

    yield set_params
    clear()


@pytest.fixture
def sm_count(monkeypatch):
    """``set(n)``: launch plans of this test see a device of ``n`` SMs (the rest of
    ``runtime.device_info()`` unchanged), so that launch-shape rules can be tested on any
    device."""

    def set_sms(n):
        info = dict(runtime.device_info(), sm_count=n)
        monkeypatch.setattr(runtime, "device_info", lambda *a, **k: info)

    return set_sms


#: runs of a test after the first that failed on a simulated warp-barrier deadlock
SIM_DEADLOCK_RETRIES = 2


def pytest_runtest_protocol(item, nextitem):
    """In the simulator, run a test again (up to :data:`SIM_DEADLOCK_RETRIES` times) when it
    failed on a simulated warp-barrier deadlock: the simulator runs a block's threads as
    Python threads, and a fault of the simulation that depends on their timing (numba's
    unguarded ``cuda.shared.array`` allocation was one: ``intrinsics/sim_threads.py``)
    should not fail a run on its first occurrence; a real deadlock fails every run, with
    the place of each lane of the warp in its message."""
    if not runtime.SIMULATE:
        return None
    from _pytest.runner import runtestprotocol

    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    for _ in range(SIM_DEADLOCK_RETRIES):
        if not any(r.failed and "deadlock in warp" in str(r.longrepr) for r in reports):
            break
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
    for r in reports:
        item.ihook.pytest_runtest_logreport(report=r)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


@pytest.fixture
def read_only_dir(tmp_path):
    """A cache directory nobody can write (as root, a path under a plain file stands for it)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    if os.access(ro, os.W_OK):
        blocker = tmp_path / "file"
        blocker.write_text("")
        ro = blocker / "kernels"
    return ro
