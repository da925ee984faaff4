"""Fused element-wise steps give eager's bits on special values: signed zeros, infinities,
NaN, subnormals and the extremes, through every fusable function, under ``xp.fuse``."""

import numpy as np
import pytest

import forge_array as xp
from forge_array.fusion.fusible import BINARY, UNARY
from forge_array.runtime import SIMULATE

DEVICE = "cpu" if SIMULATE else "cuda:0"  # the simulator fuses CPU arrays


def _specials(dt):
    f = np.finfo(dt)
    return np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, f.smallest_subnormal,
                     -f.smallest_subnormal, f.smallest_normal, f.smallest_normal / 2,
                     f.max, -f.max, 0.5, 2.0, 3.0], dtype=dt)


def _bits(a):
    a = np.atleast_1d(np.asarray(a))
    if a.dtype.kind == "f":
        nan = np.isnan(a)
        a = a.view(np.uint32 if a.dtype.itemsize == 4 else np.uint64).copy()
        a[nan] = 0  # which NaN payload comes out is left open
    return a


def _pairs(dt, device):
    v = _specials(dt)
    return (xp.asarray(np.repeat(v, len(v)), device=device),
            xp.asarray(np.tile(v, len(v)), device=device))


_ARITH = [n for n in BINARY if not n.startswith(("bitwise", "logical"))]
_UNARY = [n for n in UNARY if not n.startswith(("bitwise", "logical"))]

_CASES = {
    **{n: (lambda n: lambda a, b: getattr(xp, n)(a, b))(n) for n in _ARITH},
    **{n: (lambda n: lambda a, b: getattr(xp, n)(a))(n) for n in _UNARY},
    "where(a > 0, a, -0.0)": lambda a, b: xp.where(a > 0, a, -0.0),
    "where(a > b, a, b)": lambda a, b: xp.where(a > b, a, b),
    "clip(a, 0, 1)": lambda a, b: xp.clip(a, 0.0, 1.0),
    "clip(a, -1, -0.0)": lambda a, b: xp.clip(a, -1.0, -0.0),
    "astype bool": lambda a, b: xp.astype(a, xp.bool),
    "astype float64": lambda a, b: xp.astype(a, xp.float64),
    "astype float32": lambda a, b: xp.astype(a, xp.float32),
    "a / a": lambda a, b: a / a,
    "atan2(a, -0.0)": lambda a, b: xp.atan2(a, -0.0),
    "a * b + 1": lambda a, b: a * b + 1.0,
    "sum(a * b)": lambda a, b: xp.sum(a * b),
    "max(-a)": lambda a, b: xp.max(-a),
    "a ** 0.5": lambda a, b: a ** 0.5,
    "a ** 2": lambda a, b: a ** 2,
    "sign(a) * a": lambda a, b: xp.sign(a) * a,
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", sorted(_CASES))
def test_fused_special_values_equal_eager(case, dtype):
    fn = _CASES[case]
    a, b = _pairs(np.dtype(dtype), DEVICE)
    with np.errstate(all="ignore"):
        eager = fn(a, b)
        fused = xp.fuse(lambda a, b: fn(a, b))(a, b)
    e = np.asarray(eager.to_device("cpu"))
    f = np.asarray(fused.to_device("cpu"))
    assert e.dtype == f.dtype
    bad = np.nonzero(_bits(e) != _bits(f))[0]
    x1 = np.asarray(a.to_device("cpu")).ravel()
    x2 = np.asarray(b.to_device("cpu")).ravel()
    shown = [(x1[i % x1.size], x2[i % x2.size], np.atleast_1d(e)[i], np.atleast_1d(f)[i])
             for i in bad[:5]]
    assert not len(bad), f"{case} {dtype}: (a, b, eager, fused) {shown}"


_SUB = float(np.finfo(np.float32).smallest_subnormal)

#: CuPy's eager results on float32 subnormals, measured on an H100 (its kernels are compiled
#: with -ftz=true): what the fused kernels compute on the GPU
_GPU_EAGER = {
    "a / a": (lambda a: a / a, _SUB, np.nan),
    "astype bool": (lambda a: xp.astype(a, xp.bool), _SUB, False),
    "astype float64": (lambda a: xp.astype(a, xp.float64), _SUB, 0.0),
    "where(a > 0, a, -0.0)": (lambda a: xp.where(a > 0, a, -0.0), _SUB, -0.0),
    "clip(a, 0, 1)": (lambda a: xp.clip(a, 0.0, 1.0), -_SUB, -_SUB),
    "log": (lambda a: xp.log(a), _SUB, -np.inf),
    "abs": (lambda a: xp.abs(a), _SUB, 0.0),
    "negative": (lambda a: -a, _SUB, -0.0),
    "a * 1 + 0": (lambda a: a * 1.0 + 0.0, _SUB, 0.0),
    "copysign": (lambda a: xp.copysign(a, -1.0), _SUB, -_SUB),
    "exp(where)": (lambda a: xp.exp(xp.where(a > 1, a, a)) - 1, _SUB, 0.0),
}


@pytest.mark.parametrize("case", sorted(_GPU_EAGER))
def test_gpu_flush_rule_of_float32_subnormals(case, monkeypatch):
    """The code generator's GPU rule, run in the simulator: float32 arithmetic flushes
    subnormal operands and results, moves and selections keep them."""
    from forge_array.fusion import codegen

    if not SIMULATE:
        pytest.skip("the GPU run checks the rule against CuPy itself")
    monkeypatch.setattr(codegen, "_FLUSH_F32", True)
    monkeypatch.setattr(codegen, "_FUNCTIONS", {})
    fn, x, want = _GPU_EAGER[case]
    a = xp.asarray(np.array([x], dtype=np.float32), device=DEVICE)
    with np.errstate(all="ignore"):
        got = np.asarray(xp.fuse(fn)(a).to_device("cpu"))[0]
    assert _bits(got) == _bits(np.asarray(want, dtype=got.dtype)), (case, got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", sorted(_CASES))
def test_plain_code_special_values_equal_eager(case, dtype, monkeypatch):
    """The same cases in plain code under automatic fusion (every size deferred)."""
    from forge_array.fusion import auto, codegen

    monkeypatch.setattr(codegen, "MAX_CONSTANT_SETS", 1 << 30)
    fn = _CASES[case]
    a, b = _pairs(np.dtype(dtype), DEVICE)
    a, b = xp.asarray(a, copy=True), xp.asarray(b, copy=True)  # only forge_array writes them
    size = auto.MIN_SIZE[0]
    with np.errstate(all="ignore"):
        old = auto.enable(False)
        try:
            e = np.asarray(fn(a, b).to_device("cpu"))
        finally:
            auto.enable(*old)
        old = auto.enable(True, simulated_cpu=True)
        auto.MIN_SIZE[0] = 0
        try:
            f = np.asarray(fn(a, b).to_device("cpu"))
        finally:
            auto.MIN_SIZE[0] = size
            auto.enable(*old)
    assert e.dtype == f.dtype
    bad = np.nonzero(_bits(e) != _bits(f))[0]
    assert not len(bad), f"{case} {dtype}: {len(bad)} values differ"
