"""The one cache type: bounded, counted, registered; clear_all() forgets every plan and the
calls after it give the same results."""

import gc

import numpy as np
import pytest

import forge_array as xp
from forge_array.runtime import caches
from forge_array.runtime.caches import Cache


def test_bound_evicts_everything_by_default():
    c = Cache("test.all", limit=3)
    for k in range(3):
        c[k] = k
    c[1] = 10                      # an existing key: no eviction
    assert c.evictions == 0 and len(c) == 3
    c[3] = 3
    assert dict(c) == {3: 3} and c.evictions == 1 and c.stores == 5


def test_bound_evicts_the_oldest_when_asked():
    c = Cache("test.oldest", limit=2, evict="oldest")
    c["a"], c["b"], c["c"] = 1, 2, 3
    assert list(c) == ["b", "c"] and c.evictions == 1
    assert c.setdefault("d", 4) == 4 and list(c) == ["c", "d"]
    assert c.setdefault("d", 5) == 4
    c.update({"e": 5})
    assert list(c) == ["d", "e"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="evict must be"):
        Cache("test.bad", evict="random")
    with pytest.raises(ValueError, match="at least one entry"):
        Cache("test.bad", limit=0)


def test_registry_reports_and_forgets_collected_caches():
    c = Cache("test.registry", limit=8)
    c[1] = 1
    assert caches.stats()["test.registry"] == {"size": 1, "limit": 8, "stores": 1, "evictions": 0}
    del c
    gc.collect()
    assert "test.registry" not in caches.caches()


def test_clear_all_forgets_plans_and_results_stay_the_same(bk):
    a = xp.asarray(bk.asarray(np.arange(1, 100, dtype=np.float64)))
    m = xp.reshape(a[:96], (12, 8))

    def results():
        return float(xp.sum(a)), float(xp.max(a)), np.asarray(xp.sum(m, axis=0).to_device("cpu")).tolist()

    first = results()
    assert results() == first
    assert any(s["size"] for s in caches.stats().values())
    caches.clear_all()
    assert all(s["size"] == 0 for s in caches.stats().values())
    assert results() == first
    assert first[:2] == (4950.0, 99.0)


def test_package_caches_are_of_the_one_type():
    for expected in ("_statistical.VALID", "dispatch.reduce.HOT", "dispatch.reduce.REPLAY",
                     "dispatch.axis_reduce.FAST", "runtime.stored.LIVE", "fusion.evaluate.LAUNCHES",
                     "fusion.resettle.PLANS", "dispatch.copy.PLANS", "runtime.tuning.CACHE"):
        if expected.split(".")[0] in ("primitives", "dispatch", "kernels", "runtime", "fusion"):
            __import__("forge_array." + expected.rsplit(".", 1)[0])
        assert expected in caches.caches(), expected


def test_a_table_paired_with_a_cache_is_emptied_with_it():
    """``on_evict``: a table that must go with the cache (the registered functions beside
    their fingerprints, the probe counts beside the one-step structures) is emptied by the
    cache's eviction, its ``clear()`` and ``clear_all()``."""
    from forge_array.fusion import expr
    from forge_array.runtime import functions

    paired = {"k": 1}
    c = Cache("tests.paired", 2, on_evict=paired.clear)
    c["a"], c["b"] = 1, 2
    assert paired == {"k": 1}
    c["c"] = 3                                   # the eviction of everything
    assert dict(c) == {"c": 3} and paired == {}
    paired["k"] = 1
    c.clear()
    assert paired == {}
    paired["k"] = 1
    caches.clear_all()
    assert paired == {} and len(c) == 0
    assert functions._FUNCTIONS.on_evict == functions._REGISTERED.clear
    assert expr.ALONE.on_evict == expr.SKIPPED.clear
