"""``python -m forge_array``: usage, refused arguments, what ``warmup`` reports, and
``xp.fuse(...).explain`` on arrays that are not fused."""

import os
import subprocess
import sys

import pytest

import forge_array as xp
from forge_array import __main__ as cli
from forge_array import _warmup, runtime


def _env(**kw):
    env = dict(os.environ, **kw)
    return env


def _run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "forge_array", *args], capture_output=True,
                          text=True, timeout=300, env=env or os.environ)


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["warmup", "--help"], ["check", "--help"],
                                  ["prebuild", "--help"]])
def test_help_prints_usage_and_exits_0(argv, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m forge_array")
    if argv[0] == "warmup":
        assert "--dtypes" in out and "--pairs" not in out
    elif argv[0] == "check":
        assert "NumPy" in out
    elif argv[0] == "prebuild":
        assert "--jobs" in out and "baseline compute capability" in out and "--extend" in out
    else:
        assert "warmup" in out and "check" in out


@pytest.mark.parametrize("argv", [["--bogus"], ["bogus"], ["warmup", "--nope"],
                                  ["check", "extra"], ["warmup", "--jobs", "x"]])
def test_unknown_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_prebuild_without_a_gpu_exits_2(capsys):
    if not runtime.SIMULATE and runtime.kernels_status().startswith("kernels: active"):
        pytest.skip("a GPU is here: prebuild would build")
    assert cli.main(["prebuild"]) == 2
    assert "prebuild: needs a GPU" in capsys.readouterr().err
    assert cli.main(["prebuild", "--extend", "--work", "/nonexistent/forge-prebuild"]) == 2
    assert "prebuild: needs a GPU" in capsys.readouterr().err


def test_the_command_line_in_a_process():
    r = _run("--help")
    assert r.returncode == 0 and "{check,warmup,prebuild}" in r.stdout
    r = _run("--definitely-not-an-option")
    assert r.returncode == 2 and "unrecognized arguments" in r.stderr


def test_warmup_refuses_bad_names_with_exit_2(capsys):
    assert cli.main(["warmup", "--ops", "median", "--device", "cpu"]) == 2
    assert "unknown operations" in capsys.readouterr().err
    assert cli.main(["warmup", "--device", "gpu"]) == 2
    assert "unknown device 'gpu'" in capsys.readouterr().err
    assert cli.main(["warmup", "--sizes", "a,b"]) == 2


def test_warmup_without_a_gpu_says_there_is_nothing_to_build():
    if any(d.is_cuda for d in xp.__array_namespace_info__().devices()):
        pytest.skip("a GPU is present")
    env = {k: v for k, v in os.environ.items()
           if k not in ("FORGE_ARRAY_SIMULATE", "NUMBA_ENABLE_CUDASIM", "FORGE_ARRAY_DEVICE")}
    r = _run("warmup", env=env)
    assert r.returncode == 0, r.stderr
    assert "no GPU here" in r.stdout and "nothing to build for the GPU" in r.stdout
    assert "NumPy" in r.stdout and "nothing was compiled or stored" in r.stdout
    assert r.stderr == ""     # no progress lines: nothing ran


def test_nothing_to_build_on_the_cpu(monkeypatch):
    from forge_array.runtime import config

    monkeypatch.setattr(config, "SIMULATE", False)
    note = _warmup.nothing_to_build("cpu")
    assert note is not None and "NumPy" in note
    r = _warmup.warmup(ops=("sum",), device="cpu")
    assert r["calls"] == 0 and r["note"] == note
    assert _warmup.report(r) == f"warmup: {note}."
    monkeypatch.setattr(config, "KERNELS_ENABLED", False)
    assert "FORGE_ARRAY_KERNELS=0" in _warmup.nothing_to_build("cpu")


def test_warmup_reports_the_kernels_it_built(capsys, monkeypatch):
    from forge_array.runtime import config

    if not config.SIMULATE:
        pytest.skip("runs the simulated kernels on the CPU device")
    rc = cli.main(["warmup", "--ops", "sum", "--dtypes", "float64", "--sizes", "9",
                   "--shape", "3,4", "--device", "cpu", "--jobs", "1"])
    assert rc == 0
    out = capsys.readouterr().out
    assert out.startswith("warmup: 3 calls (0 skipped) on cpu")
    assert "simulator" in out and "nothing was written" in out
    # a GPU's report names the kernels and the cache directory
    monkeypatch.setattr(config, "SIMULATE", False)
    text = _warmup.report({"calls": 4, "skipped": 0, "seconds": 1.0, "compiled": 3,
                           "disk_hits": 1, "kernels": {"reduce": 2, "row_scan": 1},
                           "device": "cuda:0"})
    assert "on cuda:0" in text and "compiled: reduce x2, row_scan x1" in text
    assert f"cache: {config.CACHE_DIR}" in text


def test_explain_on_arrays_that_are_not_fused_says_why(monkeypatch):
    from forge_array.fusion import trace
    from forge_array.runtime import config

    @xp.fuse
    def f(x, y):
        return xp.sum(x * y + 1)

    x = xp.ones(8, device="cpu")
    monkeypatch.setattr(trace, "kernels_available", lambda a: False)   # as without a GPU
    monkeypatch.setattr(config, "KERNELS_ENABLED", True)
    for _ in range(2):        # before and after a call
        text = f.explain(x, x)
        assert text.startswith("0 launches\n  not fused: the array arguments are CPU (NumPy)")
        assert "runs eagerly" in text and "made inside the function" not in text
        assert float(f(x, x)) == 16.0
    monkeypatch.setattr(config, "KERNELS_ENABLED", False)
    assert "FORGE_ARRAY_KERNELS=0" in f.explain(x, x)
