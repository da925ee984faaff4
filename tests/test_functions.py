"""User functions as the caches see them (``runtime.functions``): equal lambdas share compiled
kernels and plans, different closures or globals do not, and builtins (``max``, ``abs``,
``math.*``, the ``operator`` module) work wherever a Python function does, on the kernels'
backend (the simulator in CI) and the CPU device, against NumPy."""

import importlib
import math
import operator

import numpy as np
import pytest

import forge_array as xp
from forge_array import ops
from forge_array.primitives import accumulate
from forge_array.primitives.matvec import matvec, vecmat
from forge_array.runtime import STATS, functions

preduce = importlib.import_module("forge_array.primitives.reductions")
_SOURCE = "def scaled(v):\n    return v * SCALE\n"


def _module_function(scale):
    """``scaled`` defined in a module of its own whose global SCALE is ``scale``."""
    g = {"SCALE": scale}
    exec(compile(_SOURCE, "<scaled>", "exec"), g)
    return g["scaled"], g


def test_equal_lambdas_are_one_function_and_one_operator():
    fs = [functions.canonical(lambda v: v * 2 + 1) for _ in range(3)]
    assert fs[0] is fs[1] is fs[2]
    assert len({id(ops.as_operator(lambda a, b: a + b)) for _ in range(3)}) == 1


def test_closures_over_different_values_are_different_functions():
    def make(c):
        return lambda v: v + c

    assert functions.canonical(make(1)) is functions.canonical(make(1))
    assert functions.canonical(make(1)) is not functions.canonical(make(2))
    assert functions.canonical(make(1)) is not functions.canonical(make(1.0))  # int vs float constant
    assert functions.canonical(make(True)) is not functions.canonical(make(1))
    assert functions.canonical(make((1, 2))) is not functions.canonical(make((1.0, 2)))
    arr = np.zeros(3)
    g = make(arr)  # unhashable closure value: the function itself
    assert functions.canonical(g) is g


def test_globals_decide_the_function():
    f2, g2 = _module_function(2.0)
    f3, _ = _module_function(3.0)
    again2, _ = _module_function(2.0)
    assert functions.canonical(f2) is f2
    assert functions.canonical(f3) is f3
    assert functions.canonical(again2) is f2
    g2["SCALE"] = 3.0          # a rebound global: f2 now computes what f3 computes
    assert functions.canonical(f2) is f3
    assert functions.canonical(f2)(1.0) == 3.0


def test_a_rebound_global_reaches_the_kernels(bk):
    x = bk.asarray(np.arange(4.0))
    f, g = _module_function(2.0)
    assert float(preduce.mapreduce(f, ops.add, x)) == 12.0
    g["SCALE"] = 5.0
    assert float(preduce.mapreduce(f, ops.add, x)) == 30.0


def test_fingerprint_of_non_functions():
    assert functions.fingerprint(max) is None
    assert functions.fingerprint(ops.add) is None
    assert functions.canonical(ops.add) is ops.add


@pytest.mark.parametrize("dtype", ["float64", "int64"])
def test_new_lambda_per_call_reuses_the_compiled_kernel(bk, dtype):
    x = bk.asarray(np.arange(1, 40).astype(dtype))
    want = int((np.arange(1, 40) ** 2).sum())
    got = [int(preduce.mapreduce(lambda v: v * v, ops.add, x)) for _ in range(3)]
    assert got == [want] * 3
    before = dict(STATS)
    for _ in range(3):
        assert int(preduce.mapreduce(lambda v: v * v, ops.add, x)) == want
    assert STATS["compiled"] == before["compiled"]
    assert STATS["disk_hits"] == before["disk_hits"]


def test_different_closure_values_give_different_results(bk):
    x = bk.asarray(np.arange(10, dtype=np.int64))
    for c in (1, 2, 5):
        assert int(preduce.mapreduce(lambda v: v * c, ops.add, x)) == 45 * c


@pytest.mark.parametrize("builtin,named", [(max, ops.maximum), (min, ops.minimum), (operator.add, ops.add),
                                           (operator.mul, ops.multiply), (operator.and_, ops.bitwise_and),
                                           (operator.or_, ops.bitwise_or), (operator.xor, ops.bitwise_xor)])
def test_builtins_are_the_named_operators(builtin, named):
    assert ops.as_operator(builtin) is named


def _host(r):
    return np.asarray(r.get() if hasattr(r, "get") else r)


@pytest.mark.parametrize("n", [1, 33, 200])
def test_builtins_as_operators_and_maps(bk, n):
    rng = np.random.default_rng(n)
    h = rng.random(n) + 0.5
    hi = rng.integers(0, 1000, n).astype(np.int64)
    x, xi = bk.asarray(h), bk.asarray(hi)
    np.testing.assert_allclose(float(preduce.reduce(max, x)), h.max())
    np.testing.assert_allclose(float(preduce.reduce(operator.add, x)), h.sum(), rtol=1e-12)
    assert int(preduce.reduce(operator.or_, xi)) == int(np.bitwise_or.reduce(hi))
    assert int(preduce.reduce(operator.xor, xi)) == int(np.bitwise_xor.reduce(hi))
    np.testing.assert_allclose(float(preduce.mapreduce(math.sqrt, operator.add, x)), np.sqrt(h).sum(), rtol=1e-12)
    np.testing.assert_allclose(float(preduce.mapreduce(abs, min, x - 1.0)), np.abs(h - 1.0).min())
    np.testing.assert_allclose(float(preduce.mapreduce(math.hypot, max, x, x)), np.hypot(h, h).max())
    np.testing.assert_allclose(_host(accumulate(max, x)), np.maximum.accumulate(h))
    np.testing.assert_allclose(_host(accumulate(operator.add, x)), np.cumsum(h), rtol=1e-12)
    np.testing.assert_array_equal(_host(accumulate(operator.mul, xi % 3 + 1)), np.cumprod(hi % 3 + 1))
    A = bk.asarray(rng.random((5, n)))
    hA = _host(A)
    np.testing.assert_allclose(_host(matvec(A, x, f=operator.mul, op=max)), (hA * h).max(axis=1))
    np.testing.assert_allclose(_host(matvec(A, x, f=operator.add, op=min)), (hA + h).min(axis=1))
    np.testing.assert_allclose(_host(vecmat(bk.asarray(np.ones(5)), A, f=math.copysign, op=operator.add)),
                               np.copysign(1.0, hA).sum(axis=0), rtol=1e-12)


def test_builtins_through_the_namespace_on_the_cpu():
    h = np.array([3.0, -1.0, 4.0, 1.5])
    x = xp.asarray(h)
    assert float(xp.reduce(max, x)) == 4.0
    assert float(xp.mapreduce(abs, operator.add, x)) == np.abs(h).sum()
    np.testing.assert_array_equal(np.from_dlpack(xp.accumulate(min, x)), np.minimum.accumulate(h))
    A = xp.asarray(np.ones((2, 4)))
    np.testing.assert_array_equal(np.from_dlpack(xp.matvec(A, x, f=operator.mul, op=max)), [4.0, 4.0])


def test_uncallable_operators_still_raise():
    with pytest.raises(TypeError, match="callable"):
        ops.as_operator(3)
    with pytest.raises(TypeError, match="callable"):
        preduce.mapreduce(3, ops.add, np.ones(3))
