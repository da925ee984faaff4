"""``forge_array.cupy.patch()`` under any caller: the backend module itself is patched
(NumPy in the simulator, CuPy on a GPU) and every patched function and method is called
the way Dask calls them (empty arrays, 0-d arrays, meta arrays of shape (0,) * ndim,
``keepdims``, ``out=``, every dtype), checked against the originals. Every fallback inside
forge_array must reach the original functions (:mod:`forge_array.runtime.originals`),
never the patched names, or these calls recurse.
"""

import warnings

import numpy as np
import pytest

import forge_array as xp
from forge_array._dropin import FUNCTIONS, METHODS, DropIn
from forge_array.runtime import array_module, originals

DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "uint32", "uint64", "float16",
          "float32", "float64", "complex64", "complex128"]
REDUCTIONS = ["sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin", "any",
              "all", "nansum", "nanmax", "nanmin"]
SHAPES = [(), (0,), (0, 0), (3, 0), (0, 4), (1,), (5,), (2, 3), (2, 0, 3)]


def _module(bk):
    """The real module behind the backend (the pristine namespace wraps it)."""
    return getattr(bk, "__wrapped__", bk)


@pytest.fixture
def patched(bk):
    mod = _module(bk)
    d = DropIn(mod)
    rep = d.patch(mod)
    try:
        yield mod, d, rep
    finally:
        d.unpatch(mod)
    for name in FUNCTIONS:
        if hasattr(mod, name):
            assert getattr(mod, name) is originals.function(mod, name).__wrapped__, name


def _host(x):
    return x.get() if hasattr(x, "get") else np.asarray(x)


class _Raised:
    """The exception a call raised: equal to another of the same type, shown with its message."""

    def __init__(self, exc):
        self.type, self.text = type(exc), f"{type(exc).__name__}: {exc}"

    def __eq__(self, other):
        return isinstance(other, _Raised) and self.type is other.type

    def __repr__(self):
        return self.text


def _call(f, *args, **kw):
    """(result, None) or (None, what it raised) with warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return f(*args, **kw), None
        except RecursionError:
            raise
        except RuntimeError as exc:
            if "deadlock in warp" in str(exc):   # the simulator's, on a loaded machine: conftest reruns
                raise
            return None, _Raised(exc)
        except Exception as exc:  # noqa: BLE001 - the type is compared
            return None, _Raised(exc)


def _same(got, ref):
    (g, ge), (r, re) = got, ref
    assert ge == re, (ge, re)
    if re is None:
        g, r = _host(g), _host(r)
        assert g.shape == r.shape and g.dtype == r.dtype, (g.shape, r.shape, g.dtype, r.dtype)
        if r.dtype.kind in "fc":
            np.testing.assert_allclose(g.astype(r.dtype), r, rtol=1e-3, atol=1e-3, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, r)


def _data(bk, shape, dt):
    rng = np.random.default_rng(len(shape) * 31 + sum(shape))
    a = rng.random(shape) * 4 - 1
    return bk.asarray(a.astype(dt) if np.dtype(dt).kind != "b" else a > 0)


@pytest.mark.parametrize("dt", DTYPES)
def test_every_reduction_on_empty_and_0d_arrays(patched, bk, dt):
    mod, d, _ = patched
    for shape in SHAPES:
        a = _data(bk, shape, dt)
        axes = [None] + list(range(len(shape)))
        for name in REDUCTIONS:
            if np.dtype(dt).kind == "c" and name in ("nanmax", "nanmin", "argmax", "argmin"):
                continue
            orig = originals.function(mod, name)
            for axis in axes:
                for keepdims in (False, True):
                    kw = {"axis": axis}
                    if name not in ("argmax", "argmin") or keepdims:
                        kw["keepdims"] = keepdims
                    _same(_call(getattr(mod, name), a, **kw), _call(orig, a, **kw))


@pytest.mark.parametrize("dt", ["int32", "float32", "float64", "bool"])
def test_scans_and_products_on_empty_and_0d_arrays(patched, bk, dt):
    mod, d, _ = patched
    for shape in SHAPES:
        a = _data(bk, shape, dt)
        for name in ("cumsum", "cumprod"):
            for axis in [None] + list(range(len(shape))):
                _same(_call(getattr(mod, name), a, axis=axis),
                      _call(originals.function(mod, name), a, axis=axis))
    for sa, sb in [((0,), (0,)), ((0, 3), (3,)), ((3, 0), (0,)), ((0,), (0, 4)), ((2, 3), (3,)),
                   ((3,), (3, 2)), ((4,), (4,))]:
        a, b = _data(bk, sa, dt), _data(bk, sb, dt)
        for name in ("dot", "matmul", "inner", "vdot"):
            # NumPy's result is the reference: CuPy's dot of empty integer operands raises
            # ZeroDivisionError
            got = _call(getattr(mod, name), a, b)
            ref = _call(getattr(np, name), _host(a), _host(b))
            if ref[1] is None and got[1] is None:
                got = (_host(got[0]), None)
                ref = (np.asarray(ref[0]).astype(got[0].dtype), None)
            _same(got, ref)


def test_dask_meta_calls(patched, bk):
    """What dask.array's reductions call on their meta arrays: empty arrays of the chunk's
    ndim, with keepdims and dtype arguments."""
    mod, d, _ = patched
    for dt in ("float32", "float64", "int32", "uint8"):
        meta = bk.empty((0, 0), dtype=dt)
        for name, kw in [("sum", {"axis": 0, "keepdims": True}), ("sum", {"axis": (0, 1)}),
                         ("mean", {"axis": 0, "keepdims": True}), ("mean", {"axis": 1}),
                         ("var", {"axis": 0, "keepdims": True, "ddof": 1}),
                         ("std", {"axis": 0, "keepdims": True}), ("max", {"axis": 0, "keepdims": True}),
                         ("prod", {"axis": 0, "dtype": "float64"}), ("cumsum", {"axis": 0}),
                         ("argmax", {"axis": 0}), ("nansum", {"axis": 1, "keepdims": True}),
                         ("any", {"axis": 0}), ("all", {"axis": None, "keepdims": True})]:
            _same(_call(getattr(mod, name), meta, **kw), _call(originals.function(mod, name), meta, **kw))


def test_out_arguments_under_patch(patched, bk):
    mod, d, _ = patched
    a = _data(bk, (4, 5), "float32")
    for name in ("sum", "prod", "max", "min", "mean", "var", "std", "nansum", "nanmax", "nanmin"):
        out = bk.zeros(5, dtype="float32")
        ref = originals.function(mod, name)(a, axis=0)
        r = getattr(mod, name)(a, axis=0, out=out)
        assert r is out
        np.testing.assert_allclose(_host(out), _host(ref), rtol=1e-5)
    out = bk.zeros(5, dtype="int64")
    assert mod.argmax(a, axis=0, out=out) is out
    np.testing.assert_array_equal(_host(out), _host(originals.function(mod, "argmax")(a, axis=0)))
    out = bk.zeros((4, 5), dtype="float32")
    assert mod.cumsum(a, axis=1, out=out) is out
    np.testing.assert_allclose(_host(out), np.cumsum(_host(a), axis=1), rtol=1e-5)


def test_methods_under_patch(patched, bk):
    mod, d, rep = patched
    a = _data(bk, (0, 3), "float32")
    b = _data(bk, (), "float64")
    for name in METHODS:
        if name in rep["methods"]:
            for x in (a, b):
                args = (x,) if name == "dot" else ()
                _same(_call(getattr(x, name), *args), _call(originals.method(mod, name), x, *args))


def test_namespace_and_primitives_under_patch(patched, bk):
    """The Array API namespace routes to the primitives, whose fallbacks (empty arrays, 0-d
    arrays, dtypes the kernels do not take) call the originals."""
    mod, d, _ = patched
    dev = "cpu" if mod is np else "cuda:0"
    x = xp.asarray(np.zeros((0, 3), dtype=np.float32), device=dev)
    assert xp.sum(x, axis=0).shape == (3,)
    assert xp.mean(xp.asarray(np.ones(4, dtype=np.float32), device=dev)) == 1.0
    z = xp.asarray(np.float64(2.5), device=dev)
    assert float(xp.max(z)) == 2.5 and float(xp.cumulative_sum(xp.reshape(z, (1,)))[0]) == 2.5
    c = xp.asarray(np.arange(6, dtype=np.complex64).reshape(2, 3), device=dev)
    assert complex(xp.sum(c)) == 15.0 and xp.prod(c, axis=0).shape == (3,)
    e = xp.asarray(np.zeros((0, 2), dtype=np.float64), device=dev)
    assert xp.var(e, axis=1).shape == (0,) and xp.cumulative_prod(e, axis=0).shape == (0, 2)


def test_array_module_is_pristine(patched, bk):
    mod, d, _ = patched
    ns = array_module(bk.zeros(2))
    assert getattr(mod, "sum") is d.sum
    assert ns.sum is originals.function(mod, "sum") and ns.sum is not d.sum
    assert ns.empty is mod.empty


class _MethodArray(np.ndarray):
    """An array type whose methods can be patched, like ``cupy.ndarray``'s."""


def test_originals_that_call_patched_methods():
    """CuPy's ``cupy.sum`` is ``a.sum(...)``: an original that calls a patched method. NumPy
    does the same for an ndarray subclass; the fallbacks must not loop through it."""
    import types

    fake = types.ModuleType("fake_cupy")
    fake.ndarray = _MethodArray
    for name in FUNCTIONS:
        if hasattr(np, name):
            setattr(fake, name, getattr(np, name))
    d = DropIn(fake)
    rep = d.patch(fake)
    try:
        assert "sum" in rep["methods"] and not rep["failed"]
        for shape, axis in [((0, 3), 0), ((3, 0), 1), ((0,), None), ((2, 0, 2), (0, 2))]:
            x = np.zeros(shape, dtype=np.float32).view(_MethodArray)
            for name in ("sum", "prod", "mean", "any", "all", "cumsum"):
                kw = {"axis": axis} if name != "cumsum" or not isinstance(axis, tuple) else {}
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    got = getattr(x, name)(**kw)
                    ref = originals.method(fake, name)(x.view(np.ndarray), **kw)
                np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))
    finally:
        d.unpatch(fake)
    assert "sum" not in _MethodArray.__dict__
