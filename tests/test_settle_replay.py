"""Plain code met again: an expression settled alone replays the launch of an earlier
expression of the same signature (structure, dtypes, constants, which leaves are the same
array) over leaves of the same layouts, without walking it; anything that differs takes
the full settlement.  Constants key programs by their bits (signed zeros, NaN)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_auto_fusion import _launches, _np, _private, fusion_on  # noqa: F401 - fixture

import forge_array as xp
from forge_array.fusion import codegen, evaluate
from forge_array.fusion.expr import EPOCH, Const, Leaf, Node
from forge_array.runtime import STATS


def _rng(seed):
    return np.random.default_rng(seed)


@pytest.fixture
def walks(monkeypatch):
    """``arm()`` starts counting the settlements that walk their expressions (the full
    path); the list it returns holds one entry per walk."""
    seen = []
    full = evaluate._settle_nodes

    def walk(nodes, rec):
        seen.append(len(nodes))
        return full(nodes, rec)

    def arm():
        monkeypatch.setattr(evaluate, "_settle_nodes", walk)
        return seen

    return arm


@pytest.mark.parametrize("n", [1, 31, 33, 300])
def test_same_expression_on_new_arrays_replays_its_launch(walks, n):
    rng = _rng(n)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    float(xp.sum(_private(a) * _private(b) + 1))          # planned and remembered
    c, d = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    x, y = _private(c), _private(d)
    seen = walks()
    fused0 = STATS["fused"]
    r, launches = _launches(lambda: float(xp.sum(x * y + 1)))
    assert launches == 1 and STATS["fused"] - fused0 == 1 and seen == []
    np.testing.assert_allclose(r, np.sum(c.astype(np.float64) * d + 1), rtol=1e-5)


def test_element_wise_chain_replays_with_its_values(walks):
    rng = _rng(2)
    a, b = rng.random(40), rng.random(40)
    np.testing.assert_array_equal(_np(xp.flip(2 * _private(a) - _private(b))), np.flip(2 * a - b))
    c, d = rng.random(40), rng.random(40)
    x, y = _private(c), _private(d)
    seen = walks()
    r = _np(xp.flip(2 * x - y))
    np.testing.assert_array_equal(r, np.flip(2 * c - d))
    assert seen == []


@pytest.mark.parametrize("expr, ref", [
    (lambda x, y: xp.sum(x * x + 1), lambda a, b: np.sum(a * a + 1)),
    (lambda x, y: xp.sum(x * y + 2), lambda a, b: np.sum(a * b + 2)),
    (lambda x, y: xp.sum(y * x + 1), lambda a, b: np.sum(b * a + 1)),
    (lambda x, y: xp.sum(x * y - 1), lambda a, b: np.sum(a * b - 1)),
    (lambda x, y: xp.max(x * y + 1), lambda a, b: np.max(a * b + 1)),
    (lambda x, y: xp.sum(xp.astype(x * y, xp.float32) + 1), lambda a, b: np.sum(a * b + 1)),
])
def test_expressions_that_differ_from_a_remembered_one_are_not_served_by_it(expr, ref):
    rng = _rng(3)
    a, b = rng.random(65), rng.random(65)
    x, y = _private(a), _private(b)
    float(xp.sum(x * y + 1))
    np.testing.assert_allclose(float(expr(x, y)), ref(a, b), rtol=1e-5)


def test_layouts_and_dtypes_that_differ_are_not_served():
    rng = _rng(4)
    a = rng.random(64)
    float(xp.sum(_private(a) * _private(a[::-1].copy()) + 1))
    for u, v in [(a[::2], a[1::2]), (a[::-1], a), (a.astype(np.float32), a.astype(np.float32)),
                 (a[:63], a[1:])]:
        np.testing.assert_allclose(float(xp.sum(_private(u) * _private(v) + 1)),
                                   np.sum(u.astype(np.float64) * v + 1), rtol=1e-5)
    # views with other strides, taken of private arrays
    x = _private(a)
    np.testing.assert_allclose(float(xp.sum(x[::-2] * x[::2] + 1)),
                               np.sum(a[::-2] * a[::2] + 1), rtol=1e-12)


def test_shared_subexpressions_and_aliased_leaves():
    rng = _rng(5)
    a, b = rng.random(50), rng.random(50)
    x, y = _private(a), _private(b)
    t = x * y
    np.testing.assert_allclose(float(xp.sum(t + t)), np.sum(2 * a * b), rtol=1e-12)
    np.testing.assert_allclose(float(xp.sum(x * y + y * x)), np.sum(2 * a * b), rtol=1e-12)
    np.testing.assert_allclose(float(xp.sum(x * y + x * x)), np.sum(a * b + a * a), rtol=1e-12)
    np.testing.assert_allclose(float(xp.sum(y * y + x * y)), np.sum(b * b + a * b), rtol=1e-12)


def test_an_operand_computed_after_the_node_was_built_takes_the_full_path(walks):
    rng = _rng(6)
    a, b = rng.random(70), rng.random(70)
    x, y = _private(a), _private(b)
    float(xp.sum(x * y + 1))   # remembered

    def f(x, y):
        t = x * y
        u = t + 1
        float(xp.sum(t))       # computes inside the trace: u's operand structure is stale
        return xp.sum(u)

    ref = f(x, y)
    seen = walks()
    e0 = EPOCH[0]
    got = xp.fuse(f)(x, y)
    assert EPOCH[0] > e0 and seen     # the sum of u is walked again
    np.testing.assert_allclose(float(got), float(ref), rtol=1e-12)
    np.testing.assert_allclose(float(got), np.sum(a * b + 1), rtol=1e-12)


def test_constants_key_programs_by_their_bits():
    x = _private(np.arange(1.0, 6.0))
    for c in (0.0, -0.0, 0.0, -0.0):
        r = _np(xp.flip(x * c + c))
        assert (np.signbit(r) == (math.copysign(1.0, c) < 0)).all(), (c, r)
    assert float(xp.max(x * -0.0 + -0.0)) == 0.0
    assert math.copysign(1.0, float(xp.max(x * -0.0 + -0.0))) == -1.0
    # clip bounds too
    z = _private(np.array([-1.0, -0.0, 0.0, 1.0]))
    for lo in (0.0, -0.0):
        np.testing.assert_array_equal(np.signbit(_np(xp.flip(xp.clip(z * 1.0, lo, 2.0)))),
                                      np.signbit(np.flip(np.clip([-1.0, -0.0, 0.0, 1.0],
                                                                 lo, 2.0))))


def test_a_nan_constant_is_one_program():
    x = _private(np.arange(4.0))
    _np(xp.flip(x + float("nan")))
    n0 = len(codegen._FUNCTIONS)
    for _ in range(3):
        r = _np(xp.flip(x + float("nan")))
        assert np.isnan(r).all()
    assert len(codegen._FUNCTIONS) == n0


def test_signature_numbers_structure_not_objects():
    f64 = np.dtype("float64")
    a, b = np.zeros(3), np.ones(3)

    def build(p, q, c):
        return Node("add", (Node("multiply", (Leaf(p), Leaf(q)), f64, (3,), f64),
                            Const(c, f64)), f64, (3,), f64)

    assert build(a, b, 1.0).sig == build(b, a, 1.0).sig
    assert build(a, b, 1.0).leaves == [a, b]
    assert build(a, a, 1.0).sig != build(a, b, 1.0).sig
    assert build(a, a, 1.0).leaves == [a]
    assert build(a, b, 1.0).sig != build(a, b, 2.0).sig
    assert build(a, b, 0.0).sig != build(a, b, -0.0).sig
    assert build(a, b, float("nan")).sig == build(a, b, float("nan")).sig


def test_settlements_of_several_launches_replay_them(walks):
    rng = _rng(7)
    a = rng.random(90)
    p = _private(a)
    for _ in range(2):                        # noted: two launches (remembered by the second
        float(xp.sum((p - xp.mean(p)) ** 2))  # call at the latest, whatever ran before)
    b = rng.random(90)
    x = _private(b)
    seen = walks()
    r, launches = _launches(lambda: float(xp.sum((x - xp.mean(x)) ** 2)))
    assert seen == [] and launches == 2
    np.testing.assert_allclose(r, np.sum((b - b.mean()) ** 2), rtol=1e-12)


def test_reductions_along_an_axis_replay(walks):
    rng = _rng(8)
    A, v = rng.random((37, 20)), rng.random(20)
    _np(xp.sum(_private(A) * _private(v)[None, :], axis=1))
    B, w = rng.random((37, 20)), rng.random(20)
    X, y = _private(B), _private(w)
    seen = walks()
    r = _np(xp.sum(X * y[None, :], axis=1))
    assert seen == []
    np.testing.assert_allclose(r, np.sum(B * w[None, :], axis=1), rtol=1e-12)


def test_a_plan_gives_up_when_an_intermediate_layout_changed():
    from forge_array.fusion import resettle

    calls = []

    def first(a):
        calls.append("first")
        return (a + 1,)

    def second(a, t):
        calls.append("second")
        return (a * t,)

    a = np.arange(4.0)
    note = resettle.Note([a])
    t = a + 1
    note.add(first, [a], (t,), 1)
    note.add(second, [a, t], (a * t,), 1)
    root = Node("add", (Leaf(a), Const(1.0, np.dtype("float64"))), np.dtype("float64"), (4,))
    root.value = note.arrays[-1]
    plan = note.plan([root])
    assert plan is not None and len(plan.steps) == 2
    (v,) = plan.run([np.arange(4.0)])
    np.testing.assert_array_equal(v, np.arange(4.0) * (np.arange(4.0) + 1))

    def other(a):  # an intermediate of another layout: the second step is not replayed
        calls.append("other")
        return (np.ones(8)[::2],)

    stale = resettle.Plan(((other, (0,), (), 1), plan.steps[1]), plan.slots, 1)
    calls.clear()
    fused0 = STATS["fused"]
    assert stale.run([np.arange(4.0)]) is None
    assert calls == ["other"] and STATS["fused"] == fused0


def test_a_launch_reading_an_array_outside_the_settlement_is_not_noted():
    from forge_array.fusion import resettle

    a, stranger = np.arange(3.0), np.ones(3)
    note = resettle.Note([a])
    note.add(lambda u, w: (u + w,), [a, stranger], (a + stranger,), 1)
    root = Node("add", (Leaf(a), Leaf(stranger)), np.dtype("float64"), (3,))
    root.value = a + stranger
    assert note.plan([root]) is None


@pytest.fixture
def general_passes(monkeypatch):
    """``arm()`` starts counting the fused reductions computed by the general path
    (``reduce_terms``) rather than a replayed launch."""
    from forge_array.primitives import fused_reduce

    seen = []
    full = fused_reduce.reduce_terms

    def counted(*args, **kwargs):
        seen.append(1)
        return full(*args, **kwargs)

    def arm():
        monkeypatch.setattr(fused_reduce, "reduce_terms", counted)
        return seen

    return arm


@pytest.mark.parametrize("shape", [(33, 5), (64, 20)])
def test_sibling_reductions_along_an_axis_replay_their_launch(walks, general_passes, shape):
    # nanmin as scikit-learn writes it: min and all of one mask along axis 0 in one pass
    # (several terms), then any() of the bool result (a bool leaf of a full reduction)
    rng = _rng(7)
    a = rng.random(shape).astype(np.float32)
    a[3, 1] = np.nan

    def nanmin(x):
        mask = xp.isnan(x)
        r = xp.min(xp.where(mask, xp.asarray(np.inf, dtype=xp.float32, device=x.device), x), axis=0)
        m = xp.all(mask, axis=0)
        return _np(r), bool(xp.any(m)), _np(m)

    want = (np.min(np.where(np.isnan(a), np.inf, a), axis=0), False, np.all(np.isnan(a), axis=0))
    for _ in range(2):                          # planned, then replayed by the noted plan
        got = nanmin(_private(a))
    seen, general = walks(), general_passes()
    b = a[::-1].copy()
    got = nanmin(_private(b))
    assert seen == [] and general == []
    np.testing.assert_array_equal(got[0], np.min(np.where(np.isnan(b), np.inf, b), axis=0))
    assert got[1] == want[1]
    np.testing.assert_array_equal(got[2], want[2])


@pytest.mark.parametrize("name", ["mean", "std", "var", "argmax"])
def test_a_reduction_with_a_finishing_step_along_an_axis_replays_its_launch(walks, general_passes,
                                                                           name):
    rng = _rng(8)
    a, b = rng.random((40, 6)), rng.random((40, 6))
    fn, ref = getattr(xp, name), getattr(np, name)
    for _ in range(2):
        _np(fn(_private(a) * 2.0 + 1.0, axis=0))
    seen, general = walks(), general_passes()
    got = _np(fn(_private(b) * 2.0 + 1.0, axis=0))
    assert seen == [] and general == []
    np.testing.assert_allclose(got, ref(b * 2.0 + 1.0, axis=0), rtol=1e-12)
