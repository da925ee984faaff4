"""The flags table: every process-wide setting read from the environment in one place, and
changed at run time through set_flags / flags / reset_flags."""

import os
import subprocess
import sys

import numpy as np
import pytest

import forge_array as xp
from forge_array._devices import default_device
from forge_array.fusion import auto
from forge_array.runtime import background, flags, tuning


def test_every_flag_has_its_environment_variable_and_a_value():
    got = xp.get_flags()
    assert set(got) == set(flags.FLAGS)
    for name, f in flags.FLAGS.items():
        assert f.env.startswith("FORGE_ARRAY_"), name
        assert got[name] == f.cell[0]
        assert f.doc


def test_set_returns_previous_and_context_manager_restores():
    before = xp.get_flags()
    old = xp.set_flags(fusion_min_size=7, fusion_alone=0)
    try:
        assert old == {"fusion_min_size": before["fusion_min_size"], "fusion_alone": before["fusion_alone"]}
        assert auto.MIN_SIZE[0] == 7 and auto.ALONE_LIMIT[0] == 0   # the cells modules read
    finally:
        xp.set_flags(**old)
    with xp.flags(fusion_min_size=3) as now:
        assert now["fusion_min_size"] == 3 == auto.MIN_SIZE[0]
    assert xp.get_flags() == before


def test_context_manager_restores_after_an_error():
    before = xp.get_flags()
    with pytest.raises(RuntimeError), xp.flags(fusion_alone=9):
        raise RuntimeError("inside")
    assert xp.get_flags() == before


def test_strict_flag_is_the_promotion_switch():
    i = xp.asarray(np.array([1, 2]), device="cpu")
    f = xp.asarray(np.array([0.5, 0.5], dtype=np.float32), device="cpu")
    with xp.flags(strict=True):
        assert xp.is_strict()
        with pytest.raises(TypeError):
            i + f
    assert not xp.is_strict()
    assert (i + f).dtype == xp.float64
    with xp.set_strict(True):
        assert xp.get_flags()["strict"] is True


def test_fusion_flag_switches_automatic_fusion():
    on = auto.enabled()
    with xp.flags(fusion=not on):
        assert auto.enabled() is (not on)
    assert auto.enabled() is on


def test_compile_flag_is_the_build_mode():
    with xp.flags(compile="sync"):
        assert background.mode() == "sync"
    old = background.set_mode("sync")
    try:
        assert xp.get_flags()["compile"] == "sync"
    finally:
        background.set_mode(old)


def test_device_flag_names_the_default_device():
    with xp.flags(device="cpu"):
        assert default_device() == xp.cpu
        assert xp.ones(3).device == xp.cpu


def test_tuning_flag_overrides_parameters_and_forgets_cached_ones():
    block = tuning.params("copy")["block"]
    with xp.flags(tuning={"copy": {"block": block * 2}}):
        assert tuning.params("copy")["block"] == block * 2
    assert tuning.params("copy")["block"] == block


def test_a_tuning_change_replans_a_launch_planned_before_it(bk):
    """The launch a call cached under the old tuning is not replayed under the new one: the
    same call plans again with the new block (and the result stays the same)."""
    from forge_array.dispatch import reduce as dispatch_reduce

    x = xp.asarray(bk.arange(1000, dtype=np.float64))
    block = tuning.params("reduce")["block"]

    def planned_blocks():
        dispatch_reduce.HOT.clear()   # the fast path replays; plan() shows what a new call gets
        assert float(xp.sum(x)) == 499500.0
        return {p.block for p in dispatch_reduce._REPLAY.values()}

    assert planned_blocks() == {block}
    with xp.flags(tuning={"reduce": {"block": block * 2}}):
        assert planned_blocks() == {block * 2}
    assert planned_blocks() == {block}


@pytest.mark.parametrize("over, named", [({"rowcol": {"row_tile_vrw": 4}}, "'row_tile_vrw' of 'rowcol'"),
                                         ({"rowcols": {"block": 64}}, "kernel kind 'rowcols'")])
def test_tuning_overrides_of_unknown_parameters_are_refused(over, named):
    """A misspelt kind or parameter in the tuning overrides raises at the next plan instead of
    being ignored; every parameter a planner reads has an entry in the default table."""
    with xp.flags(tuning=over):
        with pytest.raises(ValueError, match=named):
            tuning.params("copy")
    assert tuning.params("copy")["block"] > 0
    defaults = tuning.TABLES["default"]
    for name, table in tuning.TABLES.items():
        for kind, entry in table.items():
            assert set(entry) <= set(defaults[kind]), (name, kind, set(entry) - set(defaults[kind]))


@pytest.mark.parametrize("bad, error", [
    ({"strict": "yes"}, TypeError),
    ({"fusion_min_size": -1}, ValueError),
    ({"fusion_min_size": 1.5}, ValueError),
    ({"compile": "later"}, ValueError),
    ({"tuning": {"copy": 3}}, ValueError),
    ({"device": 0}, TypeError),
])
def test_bad_values_are_refused_and_nothing_changes(bad, error):
    before = xp.get_flags()
    with pytest.raises(error):
        xp.set_flags(fusion_alone=5, **bad)       # the valid one before it is rolled back
    assert xp.get_flags() == before


def test_unknown_and_fixed_flags():
    with pytest.raises(KeyError, match="no forge_array flag 'fusoin'.*fusion"):
        xp.set_flags(fusoin=False)
    with pytest.raises(ValueError, match="fixed when forge_array starts: set FORGE_ARRAY_CACHE_DIR"):
        xp.set_flags(cache_dir="/elsewhere")
    xp.set_flags(simulate=xp.get_flags()["simulate"])   # the same value: nothing to refuse


def test_reset_restores_what_the_environment_said():
    start = {n: f.initial for n, f in flags.FLAGS.items()}
    xp.set_flags(fusion_alone=11)
    previous = xp.reset_flags("fusion_alone")
    assert previous == {"fusion_alone": 11}
    assert xp.get_flags()["fusion_alone"] == start["fusion_alone"]
    xp.reset_flags()
    assert xp.get_flags() == start


def _fresh(code, **env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FORGE_ARRAY_") or k in
         ("FORGE_ARRAY_SIMULATE", "FORGE_ARRAY_CACHE_DIR")}
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)


def test_environment_is_read_at_import():
    r = _fresh("import forge_array as xp; f = xp.get_flags(); "
               "print(f['fusion_min_size'], f['strict'], f['fusion'], f['tuning'])",
               FORGE_ARRAY_FUSION_MIN_SIZE="5", FORGE_ARRAY_STRICT="1", FORGE_ARRAY_FUSION="off",
               FORGE_ARRAY_TUNING='{"copy": {"block": 64}}')
    assert r.returncode == 0, r.stderr
    assert r.stdout.split(maxsplit=3) == ["5", "True", "False", "{'copy': {'block': 64}}\n"]


def test_bad_environment_values_warn_and_keep_the_default():
    r = _fresh("import forge_array as xp; print(xp.get_flags()['fusion_min_size'])",
               FORGE_ARRAY_FUSION_MIN_SIZE="many")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(1 << 24)
    assert "FORGE_ARRAY_FUSION_MIN_SIZE='many' is not valid" in r.stderr
