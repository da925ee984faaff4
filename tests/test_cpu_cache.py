"""numba's CPU compilations on disk: a second process compiles nothing for the same operators,
a changed operator (same name, other body or closure value) is compiled anew, damaged files
are compiled over, and functions that cannot be fingerprinted still work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from forge_array.runtime import STATS, config, cpu_cache

_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import forge_array as xp
    from forge_array import ops
    variant = sys.argv[1]
    scale = 2.0 if variant == "a" else 3.0
    if variant == "a":
        def comb(a, b):
            return a + b
    else:
        def comb(a, b):
            return a + 2 * b
    x = xp.asarray(np.arange(1.0, 9.0), device="cpu")
    k = xp.asarray(np.arange(8), device="cpu")
    A = xp.reshape(xp.asarray(np.arange(12.0), device="cpu"), (3, 4))
    v = xp.asarray(np.arange(4.0), device="cpu")
    out = {
        "reduce": float(xp.reduce(comb, x)),
        "mapreduce": float(xp.mapreduce(lambda a: a * scale, ops.add, x)),
        "accumulate": [float(t) for t in xp.accumulate(lambda p, q: (p[0] + q[0], max(p[1], q[1])), (x, k))[0]],
        "minplus": [float(t) for t in xp.matvec(A, v, f=lambda a, b: a + b, op=ops.minimum)],
        "axis": [float(t) for t in xp.reduce(lambda a, b: a * b, A, axis=1)],
    }
    from forge_array.runtime import STATS
    out["compiled"] = STATS["cpu_compiled"]
    out["hits"] = STATS["cpu_disk_hits"]
    out["cuda"] = "numba.cuda" in sys.modules
    print(json.dumps(out))
""")


def _run(variant, cache):
    env = dict(os.environ)
    for k in ("FORGE_ARRAY_SIMULATE", "NUMBA_ENABLE_CUDASIM", "FORGE_ARRAY_COMPILE"):
        env.pop(k, None)
    env["FORGE_ARRAY_CACHE_DIR"] = str(cache)
    r = subprocess.run([sys.executable, "-c", _SCRIPT, variant], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _expected(variant):
    x = np.arange(1.0, 9.0)
    A = np.arange(12.0).reshape(3, 4)
    v = np.arange(4.0)
    scale = 2.0 if variant == "a" else 3.0
    acc = x[0]
    for t in x[1:]:
        acc = acc + t if variant == "a" else acc + 2 * t
    return {"reduce": acc, "mapreduce": float((x * scale).sum()), "accumulate": list(np.cumsum(x)),
            "minplus": list((A + v).min(axis=1)), "axis": list(A.prod(axis=1))}


def test_second_process_compiles_nothing_and_a_changed_operator_is_compiled(tmp_path):
    first = _run("a", tmp_path)
    second = _run("a", tmp_path)
    changed = _run("b", tmp_path)
    for got, variant in ((first, "a"), (second, "a"), (changed, "b")):
        for name, want in _expected(variant).items():
            assert got[name] == pytest.approx(want), (variant, name)
    assert first["compiled"] > 0 and first["hits"] == 0
    assert second["compiled"] == 0 and second["hits"] == first["compiled"]
    # the changed body (reduce) and closure value (mapreduce) compile anew; the rest is shared
    assert 0 < changed["compiled"] < first["compiled"]
    assert not first["cuda"] and not second["cuda"]    # the CPU device never loads numba.cuda


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path / "kernels"))
    return tmp_path / "kernels"


def _add(a, b):
    return a + b


def test_a_fresh_dispatcher_loads_what_another_compiled(cache_dir):
    before = dict(STATS)
    f = cpu_cache.cached_njit(_add, ("test", _add))
    assert f(2.0, 3.0) == 5.0
    assert STATS["cpu_compiled"] == before["cpu_compiled"] + 1
    g = cpu_cache.cached_njit(_add, ("test", _add))          # as a later process would
    assert g(2.0, 3.0) == 5.0
    assert STATS["cpu_disk_hits"] == before["cpu_disk_hits"] + 1
    assert STATS["cpu_compiled"] == before["cpu_compiled"] + 1
    h = cpu_cache.cached_njit(_add, ("test", _add, "other constant"))   # another key
    assert h(2.0, 3.0) == 5.0
    assert STATS["cpu_compiled"] == before["cpu_compiled"] + 2


def test_damaged_files_are_compiled_over(cache_dir):
    f = cpu_cache.cached_njit(_add, ("damage", _add))
    assert f(1, 2) == 3
    files = [os.path.join(d, n) for d, _, ns in os.walk(cache_dir) for n in ns]
    assert files
    for p in files:
        with open(p, "wb") as fh:
            fh.write(b"\0garbage")
    before = STATS["cpu_compiled"]
    g = cpu_cache.cached_njit(_add, ("damage", _add))
    assert g(1, 2) == 3
    assert STATS["cpu_compiled"] == before + 1
    hits = STATS["cpu_disk_hits"]
    assert cpu_cache.cached_njit(_add, ("damage", _add))(1, 2) == 3   # written anew
    assert STATS["cpu_disk_hits"] == hits + 1


def test_result_types_are_stored_and_a_damaged_file_is_computed_again(cache_dir):
    from numba import types

    from forge_array.runtime.compiler import _RESULT_TYPES, result_type

    def mul(a, b):
        return a * b

    assert str(result_type(mul, (types.int32, types.int32))) == "int64"
    _RESULT_TYPES.clear()
    hits = STATS["cpu_disk_hits"]
    assert str(result_type(mul, (types.int32, types.int32))) == "int64"
    assert STATS["cpu_disk_hits"] == hits + 1
    for d, _, ns in os.walk(cache_dir):
        for n in ns:
            if n.endswith(".type"):
                with open(os.path.join(d, n), "wb") as fh:
                    fh.write(b"bad\nworse")
    _RESULT_TYPES.clear()
    assert str(result_type(mul, (types.int32, types.int32))) == "int64"


def test_unfingerprintable_closure_compiles_in_memory(cache_dir):
    class Opaque:
        pass

    o = Opaque()
    before = STATS["cpu_uncached"]
    f = cpu_cache.cached_njit(_add, ("opaque", o))
    assert f(1, 2) == 3
    assert STATS["cpu_uncached"] == before + 1
    assert not os.path.exists(cache_dir / "cpu")


def test_axis_input_limit_matches_the_kernels():
    from forge_array.kernels import rowcol
    from forge_array.primitives import axis_reduce

    assert axis_reduce.mapreduce._MAX_INPUTS == rowcol.MAX_INPUTS
