"""Operator linking (:mod:`forge_array.runtime.linking`): a specialisation that differs from
one built before only in its operators links the new operators into the stored skeleton of
that build.  The marking of operators runs anywhere; the builds compile PTX offline (libNVVM,
no GPU) in a fresh process and compare the linked PTX with numba's full build of the same
specialisation."""

from __future__ import annotations

import json
import types

import numpy as np

from forge_array import ops
from forge_array.kernels.reduce import ReduceSpec
from forge_array.runtime import linking
from forge_array.runtime.flags import flags


def _user(src):
    """A function defined outside forge_array, as a user's operator is."""
    g = {"__name__": "user_module"}
    exec(src, g)
    return g["f"]


def test_operators_become_slots_one_per_object():
    f, g = _user("def f(a, b):\n    return a + b\n"), _user("def f(a, b):\n    return a * b\n")
    spec = ReduceSpec(op=f, acc_dtypes=("<f4",), identity=None, f=g)
    found = []
    marked = linking.mark((spec, ("<f4",), 4, [f, 2]), found)
    assert found == [f, g]
    assert marked[0].op == linking.Slot(0) and marked[0].f == linking.Slot(1)
    assert isinstance(marked[0], ReduceSpec) and marked[0].acc_dtypes == ("<f4",)
    assert marked[1:3] == (("<f4",), 4) and marked[3] == [linking.Slot(0), 2]   # the same object, the same slot


def test_structure_without_operators_is_the_key():
    f, g = _user("def f(a, b):\n    return a + b\n"), _user("def f(a, b):\n    return max(a, b)\n")
    a, b = [], []
    ma = linking.mark((ReduceSpec(op=f, acc_dtypes=("<f4",), identity=None), 4), a)
    mb = linking.mark((ReduceSpec(op=g, acc_dtypes=("<f4",), identity=None), 4), b)
    mc = linking.mark((ReduceSpec(op=g, acc_dtypes=("<f8",), identity=None), 4), [])
    assert ma == mb and ma != mc


def test_kernel_layer_functions_and_other_values_stay():
    from forge_array.intrinsics import blocks

    values = (blocks.as_device, np.dtype("float32"), np.float32, 3, "vec", None)
    found = []
    assert linking.mark(values, found) == values and found == []
    assert linking.mark((ops.add.fn,), found) == (linking.Slot(0),)   # forge_array's operators link too
    assert isinstance(found[0], types.FunctionType)


_LINK_SRC = r"""
import json, re, sys
import numpy as np
from forge_array import ops
from forge_array.kernels import reduce as KR
from forge_array.runtime import STATS, compiler, compile_ptx_offline, kernel_files, linking
from forge_array.runtime.param_types import to_numba

def user(src):
    g = {"__name__": "user_module"}
    exec(src, g)
    return g["f"]

def norm(p):   # numba's per-process uids, unused environment globals, shared-memory names aside
    p = re.sub(r"B\d+v\d+", "Bv", p)
    p = re.sub(r"^//.*$", "", p, flags=re.M)
    p = re.sub(r"^\.common \.global .*NumbaEnv.*$\n", "", p, flags=re.M)
    names, seen = {}, {}
    for pre, name, size in re.findall(r"^(.*\.shared .*?)(_cudapy_smem_\d+)(\[\d+\]);$", p, flags=re.M):
        seen[pre + size] = seen.get(pre + size, 0) + 1
        names[name] = f"smem<{pre.strip()}{size}#{seen[pre + size]}>"
    p = re.sub(r"_cudapy_smem_\d+", lambda m: names.get(m.group(0), m.group(0)), p)
    lines = p.splitlines()
    decls = [l for l in lines if ".shared " in l and l.rstrip().endswith("];")]
    return "\n".join(sorted(decls) + [l for l in lines if l not in decls])

def spec(f, acc="<f8"):
    return KR.ReduceSpec(op=ops.as_operator(f).fn, acc_dtypes=(acc,), identity=None, struct=(0,), commutative=False)

def build(s, ind="<f4"):
    fa = (s, (ind,), "vec", 1, 4, 4, 128, ())
    at = to_numba(KR.kernel_argtypes(s, (ind,), "vec", 1))
    key = compiler.build_to_disk(KR.make_reduce_kernel, fa, tuple(at), None, (9, 0))
    return kernel_files.read_cached(kernel_files.cache_path(key))[1], fa, at

out = {}
a = user("def f(a, b):\n    return a + b * 0.5\n")
b = user("def f(a, b):\n    return max(a, b) + 1.0\n")
ptx_a, _, _ = build(spec(a))
out["after_first"] = (STATS["compiled"], STATS["linked"])
ptx_b, fa, at = build(spec(b))
out["after_second"] = (STATS["compiled"], STATS["linked"])
out["same_as_full"] = norm(ptx_b) == norm(compile_ptx_offline(KR.make_reduce_kernel, fa, at))
out["differs_from_first"] = norm(ptx_b) != norm(ptx_a)
# an operator that returns another type than the skeleton's (int): built in full
c = user("def f(a, b):\n    return 1 if a > b else 0\n")
ptx_c, fa, at = build(spec(c))
out["other_type"] = (STATS["compiled"], STATS["linked"])
out["other_type_full"] = norm(ptx_c) == norm(compile_ptx_offline(KR.make_reduce_kernel, fa, at))
# a damaged skeleton on the disk: a full build, never a failure
import glob, os
for p in glob.glob(os.path.join(os.environ["FORGE_ARRAY_CACHE_DIR"], "*", "*.skeleton")):
    open(p, "wb").write(b"not a skeleton")
linking._SKELETONS.clear()
d = user("def f(a, b):\n    return a * 0.25 + b\n")
ptx_d, fa, at = build(spec(d))
out["damaged"] = (STATS["compiled"], STATS["linked"])
out["damaged_full"] = norm(ptx_d) == norm(compile_ptx_offline(KR.make_reduce_kernel, fa, at))
# with the flag off: full builds
compiler.FLAGS["link"].cell[0] = False
e = user("def f(a, b):\n    return a - b\n")
build(spec(e))
out["flag_off"] = (STATS["compiled"], STATS["linked"])
print(json.dumps(out))
"""


def test_a_new_operator_links_into_the_skeleton_of_the_first(offline_ptx, tmp_path, monkeypatch):
    monkeypatch.setenv("FORGE_ARRAY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("FORGE_ARRAY_LINK", raising=False)
    r = json.loads(offline_ptx(_LINK_SRC).strip().splitlines()[-1])
    assert r["after_first"] == [1, 0]          # the first: numba's full build (and a skeleton)
    assert r["after_second"] == [2, 1]         # the second: linked
    assert r["same_as_full"] and r["differs_from_first"]
    assert r["other_type"] == [3, 1] and r["other_type_full"]
    assert r["damaged"] == [4, 1] and r["damaged_full"]
    assert r["flag_off"] == [5, 1]


def test_the_flag_is_set_at_run_time():
    from forge_array.runtime.flags import FLAGS

    assert FLAGS["link"].cell[0] in (True, False)
    with flags(link=False):
        assert FLAGS["link"].cell[0] is False


_OPTIONS_SRC = r"""
import json
from numba import cuda
from forge_array.runtime import linking

def user(src):
    g = {"__name__": "user_module"}
    exec(src, g)
    return g["f"]

f = user("def f(a, b):\n    return a + b\n")
fast = cuda.jit(device=True, fastmath=True)(user("def f(a, b):\n    return a * b\n"))
plain = cuda.jit(device=True)(user("def f(a, b):\n    return a - b\n"))
out = {"plain_fn": list(linking.mark((f,), [])[0]),
       "fast": [list(s) if isinstance(s, tuple) else s for s in linking.mark((fast,), [])[0]],
       "default_dispatcher": list(linking.mark((plain,), [])[0]),
       "fast_options": [list(p) for p in linking.code_options(fast)]}
print(json.dumps(out))
"""


def test_a_device_function_with_its_own_options_gets_a_slot_of_its_own(tmp_path):
    """An operator given as ``cuda.jit(device=True, fastmath=True)`` never shares a skeleton
    with plain operators (which compile with ``cuda.jit(device=True)``'s defaults)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["FORGE_ARRAY_CACHE_DIR"] = str(tmp_path)
    r = subprocess.run([sys.executable, "-c", _OPTIONS_SRC], capture_output=True, text=True, env=env,
                       timeout=120, check=True)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["plain_fn"] == ["forge-slot", 0]
    assert out["default_dispatcher"] == ["forge-slot", 0]        # numba's defaults: the plain slot
    assert out["fast"][:2] == ["forge-slot", 0] and len(out["fast"]) == 3
    assert ["fastmath", True] in out["fast_options"]


_FASTMATH_SRC = _LINK_SRC.split("out = {}")[0] + r"""
from numba import cuda
out = {}
fast = cuda.jit(device=True, fastmath=True)(user("def f(a, b):\n    return a + b * 0.5\n"))
build(spec(fast))
out["fast_first"] = (STATS["compiled"], STATS["linked"])
p = user("def f(a, b):\n    return max(a, b) + 1.0\n")
ptx_p, fa, at = build(spec(p))
out["plain_after_fast"] = (STATS["compiled"], STATS["linked"])
out["plain_same_as_full"] = norm(ptx_p) == norm(compile_ptx_offline(KR.make_reduce_kernel, fa, at))
q = user("def f(a, b):\n    return a * 0.25 + b\n")
ptx_q, fa, at = build(spec(q))
out["plain_links_to_plain"] = (STATS["compiled"], STATS["linked"])
out["plain_linked_same_as_full"] = norm(ptx_q) == norm(compile_ptx_offline(KR.make_reduce_kernel, fa, at))
fast2 = cuda.jit(device=True, fastmath=True)(user("def f(a, b):\n    return a - b\n"))
build(spec(fast2))
out["fast_links_to_fast"] = (STATS["compiled"], STATS["linked"])
print(json.dumps(out))
"""


def test_plain_operators_never_link_with_a_fastmath_operators_options(offline_ptx, tmp_path, monkeypatch):
    monkeypatch.setenv("FORGE_ARRAY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("FORGE_ARRAY_LINK", raising=False)
    r = json.loads(offline_ptx(_FASTMATH_SRC).strip().splitlines()[-1])
    assert r["fast_first"] == [1, 0]
    assert r["plain_after_fast"] == [2, 0] and r["plain_same_as_full"]   # its own skeleton, in full
    assert r["plain_links_to_plain"] == [3, 1] and r["plain_linked_same_as_full"]
    assert r["fast_links_to_fast"] == [4, 2]
