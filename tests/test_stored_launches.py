"""Launches stored on disk (``forge_array.runtime.stored``): the index files never crash a
process (damaged, merged by two processes, bounded, read-only), a launch's description names
every pointer it passes, and the keys a call looks up are the keys its primitive stores."""

from __future__ import annotations

import importlib
import json
import os
import types
import warnings

import numpy as np
import pytest
from numba import types as nt

from forge_array import _routing
from forge_array.runtime import config, kernel_files, kernel_types, launching, stored

red = importlib.import_module("forge_array.primitives.reductions")   # the module, not the function
dispatch_reduce = importlib.import_module("forge_array.dispatch.reduce")
dispatch_axis = importlib.import_module("forge_array.dispatch.axis_reduce")

DESC = {"key": "ab" + "0" * 62, "entry": "k", "fmt": "<QQq", "grid": 2, "block": 64, "shared": 0,
        "args": [["in", 0], ["out", 0], ["v", 7]], "outs": [[[], "<f4"]], "reshape": None}


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.setattr(kernel_files, "_WARNED", [])
    monkeypatch.setattr(stored, "environment", lambda device: f"env{device}" + "0" * 40)
    for name in ("_INDEX", "_NEW", "_LIVE"):
        monkeypatch.setattr(stored, name, {})
    return tmp_path / "kernels" / "launches"


def _fresh_process():
    stored._INDEX.clear()
    stored._LIVE.clear()


def test_save_flush_and_lookup_in_another_process(store):
    key = stored.full_key("sum", np.zeros(5, np.float32), None, False, None)
    assert stored.lookup(key, device=0) is None
    stored.save(key, DESC, device=0)
    assert stored.flush() == 1
    assert stored.flush() == 0                     # nothing new
    _fresh_process()
    ent = stored.lookup(key, device=0)
    assert isinstance(ent, stored.StoredLaunch)
    assert (ent.grid, ent.block, ent.args[-1]) == (2, 64, ("v", 7))
    assert stored.lookup(key, device=1) is None    # another device: another index
    assert [f for f in os.listdir(store) if f.endswith(".tmp")] == []


def test_keys_tell_layouts_and_argument_types_apart():
    x = np.zeros(8, np.float32)
    k = stored.full_key("var", x, None, False, 1)
    assert k != stored.full_key("var", x, None, False, 1.0)
    assert k != stored.full_key("var", x, None, False, True)
    assert k != stored.full_key("var", x[1:], None, False, 1)       # shape and 16-byte phase
    assert k != stored.full_key("var", x[::2], None, False, 1)      # strides
    assert k != stored.full_key("var", x.astype(np.float64), None, False, 1)
    assert k != stored.full_key("var", x, None, True, 1)
    assert stored.full_key("sum", x, np.dtype("float64"), False, None) != stored.full_key("sum", x, None, False, None)
    a, b = np.ones((2, 3)), np.ones((3, 2))
    assert stored.pair_key("matmul", a, np.ones(3)) != stored.pair_key("matmul", b, np.ones(2))


@pytest.mark.parametrize("damage", [b"", b"\x00" * 64, b"\xff\xfe not utf-8", b'{"format": 1, "launches": {"a"',
                                    b'{"format": 0, "launches": {}}', b"[1, 2]", b'{"format": 1, "launches": 3}'])
def test_damaged_index_is_removed_and_written_anew(store, damage):
    path = stored._index_path(stored.environment(0))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(damage)
    key = ("full", "sum", ("<f4", (3,), (4,), 0), None, False, None)
    assert stored.lookup(key, device=0) is None
    assert not os.path.exists(path)
    stored.save(key, DESC, device=0)
    stored.flush()
    _fresh_process()
    assert stored.lookup(key, device=0) is not None


def test_a_description_that_does_not_fit_its_format_is_not_run(store):
    bad = dict(DESC, args=[["in", 0]])              # three parameters in the format, one given
    stored.save(("k",), bad, device=0)
    stored.flush()
    _fresh_process()
    assert stored.lookup(("k",), device=0) is None
    stored.save(("j",), {"fmt": "<Q"}, device=0)    # fields missing
    stored.flush()
    _fresh_process()
    assert stored.lookup(("j",), device=0) is None


def test_two_processes_merge_and_the_index_is_bounded(store, monkeypatch):
    stored.save(("a",), DESC, device=0)
    stored.flush()
    stored._INDEX.clear()                            # a second process that read the index before
    stored._INDEX[0] = {}
    stored.save(("b",), DESC, device=0)
    stored.flush()
    _fresh_process()
    assert stored.lookup(("a",), device=0) and stored.lookup(("b",), device=0)
    monkeypatch.setattr(stored, "MAX_ENTRIES", 3)
    for k in "cdef":
        stored.save((k,), DESC, device=0)
    assert list(stored._NEW[0]) == [repr((k,)) for k in "def"]   # bounded before the flush too
    stored.flush()
    with open(stored._index_path(stored.environment(0))) as f:
        kept = json.load(f)["launches"]
    assert sorted(kept) == sorted(repr((k,)) for k in "def")   # the newest


def test_unchanged_descriptions_are_not_written_again(store):
    stored.save(("a",), DESC, device=0)
    stored.flush()
    _fresh_process()
    stored.save(("a",), json.loads(json.dumps(DESC)), device=0)
    assert stored.flush() == 0


def test_read_only_cache_directory_warns_once(read_only_dir, monkeypatch, store):
    monkeypatch.setattr(config, "CACHE_DIR", str(read_only_dir))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        stored.save(("a",), DESC, device=0)
        stored.flush()
        stored.save(("b",), DESC, device=1)
        stored.flush()
    assert len([x for x in w if "not writable" in str(x.message)]) == 1


def test_stored_form_names_every_pointer():
    ptr = kernel_types.ptr_t
    argtypes = (ptr("float32"), kernel_types.i64, nt.Tuple((ptr("float32"), ptr("int32"))), kernel_types.f64,
                nt.complex64)
    k = launching.Kernel("k", argtypes, key="cd" + "1" * 62, entry="e", ptx="")
    pointers = {1000: ("in", 0), 2000: ("uninit", 0, 64), 3000: ("counter", 1, "uint32")}
    d = launching.stored_form(k, 4, 128, (1000, 5, (2000, 3000), 2.5, 1 + 2j), pointers)
    assert d["fmt"] == k._struct.format and (d["grid"], d["block"], d["shared"]) == (4, 128, 0)
    assert d["args"] == [["in", 0], ["v", 5], ["uninit", 0, 64], ["counter", 1, "uint32"], ["v", 2.5],
                         ["v", 1.0], ["v", 2.0]]
    assert launching.stored_form(k, 4, 128, (1001, 5, (2000, 3000), 2.5, 1j), pointers) is None  # unknown pointer
    assert launching.stored_form(launching.Kernel("k", argtypes, key=None, entry="e", ptx=""), 4, 128,
                                (1000, 5, (2000, 3000), 2.5, 1j), pointers) is None          # no disk key


def _while_the_layer_loads(monkeypatch, looked):
    """The routing seam as on a GPU while the kernel layer loads, its look-ups noted."""
    monkeypatch.setattr(config, "SIMULATE", False)
    monkeypatch.setattr(_routing, "_LAYER", [False])
    monkeypatch.setattr(_routing, "_PLANNING", [False])
    monkeypatch.setattr(_routing, "layer_ready", lambda: False)
    monkeypatch.setattr(_routing.background, "usable", lambda key: False)
    monkeypatch.setattr(_routing, "_prepare_later", lambda key, call, nbytes: None)
    monkeypatch.setattr(_routing, "kernels_available", lambda a: True)
    monkeypatch.setattr(stored, "lookup", lambda key, device=None: looked.append(key))


_CALLS = [  # routed function, its arguments after x, the primitive that stores, its arguments
    ("reduce_sum", ((0,), None, False), "sum", ((0,), None, False)),
    ("reduce_sum", ((0,), np.dtype("float64"), True), "sum", ((0,), np.dtype("float64"), True)),
    ("reduce_prod", ((0,), None, False), "prod", ((0,), None, False)),
    ("reduce_max", ((0,), False), "max", ((0,), False)),
    ("reduce_min", ((0,), True), "min", ((0,), True)),
    ("reduce_mean", ((0,), False), "mean", ((0,), False)),
    ("reduce_var", ((0,), 1, False), "var", ((0,), 1, False)),
    ("reduce_std", ((0,), 0.0, False), "std", ((0,), 0.0, False)),
    ("reduce_any", ((0,), False), "any", ((0,), False)),
    ("reduce_all", ((0,), False), "all", ((0,), False)),
    ("argmax", (None, False), "argmax", (None, False)),
    ("argmin", (None, True), "argmin", (None, True)),
]


_AXIS_CALLS = [(routed, args, prim, pargs, 2) for routed, args, prim, pargs in [
    ("reduce_sum", ((0,), None, False), "sum", ((0,), None, False)),
    ("reduce_sum", ((1,), np.dtype("float64"), True), "sum", ((1,), np.dtype("float64"), True)),
    ("reduce_max", ((1,), False), "max", ((1,), False)),
    ("reduce_all", ((0,), True), "all", ((0,), True)),
]]


@pytest.mark.parametrize("routed, args, prim, pargs, ndim", [c + (1,) for c in _CALLS] + _AXIS_CALLS)
def test_a_call_looks_up_the_key_its_primitive_stores(monkeypatch, sim, routed, args, prim, pargs, ndim):
    if not sim:
        pytest.skip("NumPy arrays reach the kernels in the simulator only")
    x = np.linspace(0.5, 3.0, 33 * 4, dtype=np.float32)
    x = x[:33] if ndim == 1 else x.reshape(12, 11)
    saved, looked = [], []
    # the primitive's side, as on a GPU: the launch is described and stored
    monkeypatch.setattr(red.named, "SIMULATE", False)
    monkeypatch.setattr(dispatch_reduce, "STORES", True)
    monkeypatch.setattr(dispatch_reduce, "stored_form", lambda p, a: {"d": 1})
    monkeypatch.setattr(dispatch_axis.Replay, "stored_form", lambda self, arrays, operands: {"d": 1})
    monkeypatch.setattr(stored, "save", lambda key, desc, device=None: saved.append(key))
    dispatch_reduce.HOT.clear()
    dispatch_axis.FAST.clear()
    getattr(red, prim)(x, *pargs)
    # the routed call's side while the kernel layer loads
    _while_the_layer_loads(monkeypatch, looked)
    getattr(_routing, routed)(x, *args)
    assert saved and looked == saved[-1:]


def test_calls_of_more_than_one_launch_look_nothing_up(monkeypatch, sim):
    if not sim:
        pytest.skip("NumPy arrays reach the kernels in the simulator only")
    looked = []
    _while_the_layer_loads(monkeypatch, looked)
    m = np.ones((3, 4), np.float32)
    _routing.reduce_mean(m, (0,), False)     # mean along an axis: two steps, not one launch
    _routing.argmax(m, 1, False)
    assert looked == []


def test_a_stored_launch_that_fails_is_dropped_with_one_warning(store, monkeypatch):
    def broken(operands):
        raise RuntimeError("CUDA_ERROR_INVALID_VALUE")

    monkeypatch.setattr(stored, "_current_device", lambda: 0)
    monkeypatch.setattr(stored, "_DROPPED", [])
    monkeypatch.setattr(stored, "lookup", lambda key, device=None: stored._LIVE.get((0, key), broken))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert _routing._stored(("a",), (np.ones(3),)) is None
        assert _routing._stored(("b",), (np.ones(3),)) is None
    assert len([x for x in w if "stored launch failed" in str(x.message)]) == 1
    assert stored._LIVE[(0, ("a",))] is None and stored._LIVE[(0, ("b",))] is None


@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
@pytest.mark.parametrize("include_initial", [False, True])
def test_a_scan_looks_up_the_key_its_primitive_stores(monkeypatch, sim, name, include_initial):
    if not sim:
        pytest.skip("NumPy arrays reach the kernels in the simulator only")
    pscan = importlib.import_module("forge_array.primitives.scan")
    pplan = importlib.import_module("forge_array.dispatch.scan.plan")
    preplay = importlib.import_module("forge_array.dispatch.scan.replay")
    x = np.linspace(0.5, 1.5, 100, dtype=np.float32)
    saved, looked = [], []
    monkeypatch.setattr(preplay, "STORES", True)
    monkeypatch.setattr(pplan._Plan, "stored_form", lambda self, a, o: {"d": 1})
    monkeypatch.setattr(stored, "save", lambda key, desc, device=None: saved.append(key))
    preplay.fast_plans().clear()
    getattr(pscan, name)(x, axis=0, dtype=np.dtype("float32"), include_initial=include_initial)
    _while_the_layer_loads(monkeypatch, looked)
    getattr(_routing, name)(x, 0, np.dtype("float32"), include_initial)
    assert saved and looked == saved[-1:]


def test_calls_while_the_layer_loads_are_prepared_once_each_and_bounded(monkeypatch):
    queued = []
    monkeypatch.setattr(_routing, "_PREPARED", [0])
    monkeypatch.setattr(_routing, "MAX_PREPARED", 3)
    monkeypatch.setattr(_routing, "layer_ready", lambda: queued.append("layer") or False)
    monkeypatch.setattr(_routing.background, "state", lambda key: "queued" if key in [q for q in queued] else None)
    monkeypatch.setattr(_routing.background, "submit", lambda key, job: queued.append(key))
    _routing._prepare_later("big", lambda: None, _routing.PREPARE_MAX_BYTES + 1)   # too large to run twice
    for k in ["a", "a", "b", "c", "d"]:
        _routing._prepare_later(k, lambda: None, 4000)
    assert queued == ["layer", ("prepare", "a"), "layer", ("prepare", "b"), "layer", ("prepare", "c")]


def test_a_launch_error_other_than_a_missing_context_is_raised_as_it_was():
    err = RuntimeError("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")
    with pytest.raises(RuntimeError) as info:
        kernel_files.relaunch(err, 1, 1, 32, 0, 0, 0, 0)
    assert info.value is err


def test_a_launch_whose_kernel_file_is_gone_falls_back_without_looking_again(store, monkeypatch):
    loads = []
    monkeypatch.setattr(kernel_files, "load_function", lambda key, entry, ptx=None: loads.append(key))
    monkeypatch.setattr(stored, "_current_device", lambda: 0)

    class _Cupy:   # the current device and stream, as CuPy answers them
        class cuda:  # noqa: N801
            class runtime:  # noqa: N801
                getDevice = staticmethod(lambda: 0)

    monkeypatch.setattr(stored.backend, "cupy", lambda: _Cupy)
    ent = stored.StoredLaunch(DESC)
    assert ent((np.ones(3),)) is None and ent((np.ones(3),)) is None
    assert loads == [DESC["key"]]


def _layer_loading_without_stored_launches(monkeypatch, compiles):
    """The routing seam while the kernel layer loads with no stored launch, CuPy's fallback
    compiling (``compiles``) or not; returns (waits, prepared calls, whether loaded)."""
    _while_the_layer_loads(monkeypatch, [])
    waited, prepared, loaded = [], [], []
    monkeypatch.setattr(_routing, "layer_ready", lambda: bool(loaded))
    monkeypatch.setattr(_routing, "_fallback_compiles", lambda: compiles)

    def wait_for(key, timeout):
        waited.append((key, timeout))
        loaded.append(True)
        return True

    monkeypatch.setattr(_routing.background, "wait_for", wait_for)
    monkeypatch.setattr(_routing, "_prepare_later", lambda key, call, nbytes: prepared.append(key))
    monkeypatch.setattr(_routing, "_shipped", lambda call: _routing._PENDING)   # no kernel shipped either
    # NumPy arrays stand in for CuPy's: a 1-D scan in its own dtype runs from CUB
    monkeypatch.setattr(_routing, "_cub_scannable", lambda x, dtype: x.ndim == 1 and dtype == x.dtype)
    monkeypatch.setattr(_routing, "_cub_scan", lambda x, name: None)   # then NumPy's own scan
    monkeypatch.setattr(_routing, "_red", types.SimpleNamespace(sum=lambda x, *a: "ours", mean=lambda x, *a: "ours"))
    monkeypatch.setattr(_routing, "_scan", types.SimpleNamespace(cumulative_sum=lambda x, **kw: "ours"))
    monkeypatch.setattr(_routing, "_mv", types.SimpleNamespace(route_matmul=lambda a, b: np.ones(2, np.float32)))
    monkeypatch.setattr(_routing, "_xp", lambda a: np)
    return waited, prepared, loaded


_FIRST_CALLS = [   # calls CuPy compiles a kernel for
    ("sum of a view", lambda x: _routing._ours(x[::2], "sum", (0,), None, False), "ours"),
    ("sum along axis 0", lambda x: _routing._ours(x.reshape(2, 4), "sum", (0,), None, False), "ours"),
    ("mean", lambda x: _routing._ours(x, "mean", (0,), False), "ours"),
    ("cumulative_sum along axis 0", lambda x: _routing.cumulative_sum(x.reshape(2, 4), 0, np.dtype("float32"),
                                                                      False), "ours"),
]


@pytest.mark.parametrize("name, call, ours", _FIRST_CALLS, ids=[c[0] for c in _FIRST_CALLS])
def test_a_call_without_a_stored_launch_waits_for_the_layer_where_the_fallback_would_compile(
        monkeypatch, name, call, ours):
    waited, prepared, loaded = _layer_loading_without_stored_launches(monkeypatch, compiles=True)
    assert call(np.arange(8, dtype=np.float32)) == ours
    assert waited == [("kernel layer", _routing.LAYER_WAIT_S)] and prepared == [] and loaded


@pytest.mark.parametrize("name, call, ours", _FIRST_CALLS, ids=[c[0] for c in _FIRST_CALLS])
def test_a_call_without_a_stored_launch_runs_on_a_quick_fallback_and_is_prepared(monkeypatch, name, call, ours):
    waited, prepared, loaded = _layer_loading_without_stored_launches(monkeypatch, compiles=False)
    assert repr(call(np.arange(8, dtype=np.float32))) != repr(ours)   # the fallback's result
    assert waited == [] and len(prepared) == 1 and not loaded


_BUILT_IN_CALLS = [   # calls CuPy runs from CUB and cuBLAS, built into it
    ("sum", lambda x: _routing._ours(x, "sum", (0,), None, False)),
    ("max along the last axis", lambda x: _routing._ours(x.reshape(2, 4), "max", (1,), False)),
    ("cumulative_sum", lambda x: _routing.cumulative_sum(x, 0, np.dtype("float32"), False)),
    ("matmul", lambda x: _routing.matmul(x.reshape(2, 4), x[:4])),
]


@pytest.mark.parametrize("name, call", _BUILT_IN_CALLS, ids=[c[0] for c in _BUILT_IN_CALLS])
def test_a_call_cupy_runs_from_its_built_in_kernels_does_not_wait(monkeypatch, name, call):
    waited, prepared, loaded = _layer_loading_without_stored_launches(monkeypatch, compiles=True)
    assert repr(call(np.arange(8, dtype=np.float32))) != repr("ours")
    assert waited == [] and len(prepared) == 1 and not loaded


_SHIPPED_CALLS = [   # the reductions, products and scans that plan without numba
    ("sum", lambda x: _routing._ours(x, "sum", (0,), None, False), "ours"),
    ("mean", lambda x: _routing._ours(x, "mean", (0,), False), "ours"),
    ("sum along axis 0", lambda x: _routing._ours(x.reshape(2, 4), "sum", (0,), None, False), "ours"),
    ("matmul", lambda x: _routing.matmul(x.reshape(2, 4), x[:4]), "ours"),
    ("cumulative_sum", lambda x: _routing.cumulative_sum(x, 0, np.dtype("float32"), False), "ours"),
    ("cumulative_sum along axis 0", lambda x: _routing.cumulative_sum(x.reshape(2, 4), 0, np.dtype("float32"),
                                                                      False), "ours"),
    ("vecdot", lambda x: _routing.vecdot(x.reshape(2, 4), x[:4], -1), "ours"),
    ("tensordot", lambda x: _routing.tensordot(x.reshape(2, 4), x[:4], ((1,), (0,))), "ours"),
]


def _shipped_primitives(monkeypatch):
    """The primitives as stand-ins that note whether they ran inside ``shipped_only``."""
    from forge_array.runtime import factories

    inside = []

    def primitive(*a, **kw):
        inside.append(getattr(factories._TLS, "shipped_only", False))
        return "ours"

    monkeypatch.setattr(_routing, "_shipped", _SHIPPED)
    monkeypatch.setattr(_routing, "_red", types.SimpleNamespace(sum=primitive, mean=primitive))
    monkeypatch.setattr(_routing, "_mv", types.SimpleNamespace(route_matmul=primitive, route_vecdot=primitive,
                                                               route_tensordot=primitive))
    monkeypatch.setattr(_routing, "_scan", types.SimpleNamespace(cumulative_sum=primitive))
    monkeypatch.setattr(_routing, "_out", lambda x, r, dtype: r)
    return inside


@pytest.mark.parametrize("planning", [False, True], ids=["planning modules loading", "planning modules loaded"])
@pytest.mark.parametrize("name, call, ours", _SHIPPED_CALLS, ids=[c[0] for c in _SHIPPED_CALLS])
def test_a_call_whose_kernels_ship_runs_them_and_leaves_numba_unloaded(monkeypatch, name, call, ours, planning):
    """No stored launch, the kernels in the shipped archive: the call runs ours with the
    kernel modules unloaded (inside ``shipped_only``), neither waiting, nor prepared later,
    nor queueing the layer's load (numba)."""
    waited, prepared, loaded = _layer_loading_without_stored_launches(monkeypatch, compiles=True)
    asked = []
    monkeypatch.setattr(_routing, "layer_ready", lambda: asked.append(1) or False)
    monkeypatch.setattr(_routing, "_PLANNING", [planning])
    inside = _shipped_primitives(monkeypatch)
    assert call(np.arange(8, dtype=np.float32)) == ours
    assert inside == [True] and waited == [] and prepared == [] and asked == [] and not loaded


def test_once_the_planning_modules_load_the_shipped_kernels_come_before_stored_launches(monkeypatch):
    """With the planning modules loaded a call plans (and so replays its plan next time)
    rather than running a stored launch; a stored launch still takes a call whose kernels
    are not shipped."""
    looked = []
    _while_the_layer_loads(monkeypatch, looked)
    monkeypatch.setattr(_routing, "_PLANNING", [True])
    inside = _shipped_primitives(monkeypatch)
    x = np.arange(8, dtype=np.float32)
    assert _routing._ours(x, "sum", (0,), None, False) == "ours"
    assert inside == [True] and looked == []
    monkeypatch.setattr(_routing, "_shipped", lambda call: _routing._PENDING)
    monkeypatch.setattr(_routing, "_stored_full", lambda x, name, args: "stored")
    assert _routing._ours(x, "sum", (0,), None, False) == "stored"


def test_a_call_that_would_load_a_kernel_module_stops_before_it(monkeypatch):
    """Inside ``shipped_only`` a kernel module's import through a stand-in raises Pending
    (its call takes the fallback's steps) and numba stays unloaded."""
    from forge_array.runtime import background, factories, lazy

    stand_in = lazy.module("forge_array.kernels.copy")
    monkeypatch.delitem(__import__("sys").modules, "forge_array.kernels.copy", raising=False)
    with factories.shipped_only():
        with pytest.raises(background.Pending):
            stand_in.make_copy_scalar
        assert lazy.module("json").dumps(1) == "1"   # other modules load as before
    assert _routing._shipped(lambda: stand_in.make_copy_scalar) is _routing._PENDING
    assert "forge_array.kernels.copy" not in __import__("sys").modules


_SHIPPED = _routing._shipped


def test_the_scan_cupy_runs_from_cub_compiles_nothing():
    """The backend's 1-D scan in the array's own dtype: CuPy's CUB scan of a copy of the
    memory (CuPy's cumsum would first compile its astype kernel)."""
    assert not _routing._cub_scannable(np.arange(4.0), np.dtype("float64"))   # NumPy's own cumsum
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("no GPU")
    except Exception:  # noqa: BLE001
        pytest.skip("no GPU")
    for dt in ("float32", "int64", "float64"):
        x = (cp.arange(1000) % 5 + 1).astype(dt)
        assert _routing._cub_scannable(x, np.dtype(dt))
        assert not _routing._cub_scannable(x, np.dtype("float64" if dt != "float64" else "float32"))
        assert not _routing._cub_scannable(x[::2], np.dtype(dt))
        for name in ("cumsum", "cumprod"):
            r = _routing._backend_scan(x[:20], name, 0 if name == "cumsum" else 1, 0, np.dtype(dt), False)
            np.testing.assert_allclose(cp.asnumpy(r), getattr(np, name)(cp.asnumpy(x[:20])), rtol=1e-6)
        assert cp.asnumpy(x)[:3].tolist() == [1, 2, 3]   # the input untouched


def test_the_fallback_compiles_where_cupys_kernel_cache_is_empty(monkeypatch, tmp_path):
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path / "cupy"))
    for content, compiles in [(None, True), ("", True), ("kernel.cubin", False)]:
        monkeypatch.setattr(_routing, "_FALLBACK_COMPILES", [])
        if content is not None:
            (tmp_path / "cupy").mkdir(exist_ok=True)
            if content:
                (tmp_path / "cupy" / content).write_bytes(b"\0")
        assert _routing._fallback_compiles() is compiles
        assert _routing._fallback_compiles() is compiles   # decided once


def test_wait_for_a_background_job():
    import threading

    from forge_array.runtime import background

    assert background.wait_for(("never queued", object()), 5.0) is False   # at once
    gate = threading.Event()
    key = ("test job", object())
    background.submit(key, gate.wait)
    assert background.wait_for(key, 0.05) is False   # still running
    gate.set()
    assert background.wait_for(key, 10.0) is True and background.state(key) == "done"
