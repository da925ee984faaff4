"""The one cache type of forge_array: a bounded, counted dictionary, registered by name.

Every in-memory cache of plans, launches, compiled functions and checked arguments is a
:class:`Cache`. Look-ups are a plain ``dict`` look-up (``cache.get(key)``, ``key in cache``:
no Python code runs, so the host time of a cached call does not grow); a store past the
bound evicts first, either everything (``evict="all"``: caches keyed by what a program
varies, such as a correction or an address, refill with the keys in use) or the oldest entry
(``evict="oldest"``: recorded plans, whose rebuilding costs more); ``on_evict`` runs after the
cache is emptied (by an eviction of everything, ``clear()`` or :func:`clear_all`), for a table
that must go with it. :func:`clear_all` empties
every cache (tests, tuning sweeps, a changed setting); :func:`stats` reports each one's size,
stores and evictions.

>>> from forge_array.runtime.caches import Cache, stats
>>> c = Cache("doc.example", limit=2)
>>> c["a"] = 1; c["b"] = 2; c["c"] = 3      # the third store evicts
>>> sorted(c), stats()["doc.example"]["evictions"]
(['c'], 1)
"""

from __future__ import annotations

import weakref

__all__ = ["Cache", "clear_all", "stats", "caches"]

_ALL: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


class Cache(dict):
    """A dictionary of at most ``limit`` entries, counted and registered under ``name``
    (``"module.NAME"``)."""

    __slots__ = ("name", "limit", "oldest", "stores", "evictions", "on_evict", "__weakref__")

    def __init__(self, name: str, limit: int = 4096, evict: str = "all", on_evict=None):
        super().__init__()
        if evict not in ("all", "oldest"):
            raise ValueError(f"evict must be 'all' or 'oldest', got {evict!r}")
        if limit < 1:
            raise ValueError(f"a cache holds at least one entry, got limit={limit}")
        self.name, self.limit, self.oldest = name, int(limit), evict == "oldest"
        self.stores = self.evictions = 0
        self.on_evict = on_evict
        _ALL[name] = self

    def __setitem__(self, key, value):
        if len(self) >= self.limit and key not in self:
            self.evictions += 1
            if self.oldest:
                try:
                    dict.pop(self, next(iter(self)), None)
                except (RuntimeError, StopIteration):  # changed by another thread meanwhile
                    pass
            else:
                self.clear()
        self.stores += 1
        dict.__setitem__(self, key, value)

    def clear(self):
        dict.clear(self)
        if self.on_evict is not None:
            self.on_evict()

    def setdefault(self, key, default=None):
        if key in self:
            return dict.__getitem__(self, key)
        self[key] = default
        return default

    def update(self, *args, **kwargs):
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def __repr__(self):
        return f"Cache({self.name!r}, {len(self)}/{self.limit} entries)"

    # a Cache stands for its registered name: copies and pickles are plain dicts
    def __reduce__(self):
        return (dict, (dict(self),))


def caches() -> dict:
    """Every live cache, by name."""
    return dict(_ALL)


def clear_all() -> None:
    """Empty every cache (their counters keep counting)."""
    for c in list(_ALL.values()):
        c.clear()


def stats() -> dict:
    """``{name: {"size", "limit", "stores", "evictions"}}`` of every live cache."""
    return {name: {"size": len(c), "limit": c.limit, "stores": c.stores, "evictions": c.evictions}
            for name, c in sorted(_ALL.items())}
