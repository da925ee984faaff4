"""Modules imported on first use.

``import forge_array`` must not load numba (a second on a GPU machine) nor the kernel
modules built on it: the namespace reaches the primitives through :func:`module`, a
stand-in that imports the real module at its first attribute access and then puts the
module itself in the owner's globals, so that later look-ups cost nothing extra.

>>> import sys
>>> m = module("json")
>>> m.dumps([1])
'[1]'
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["module", "GUARDS"]

#: called with a module's name before a stand-in imports it; a guard may raise to refuse the
#: import (:func:`.factories.shipped_only`: no kernel module, no numba, while it holds)
GUARDS: list = []


class module:  # noqa: N801  (used like the ``module`` it stands for)
    """Stand-in for module ``name``, imported at the first attribute access.

    With ``owner`` (a module's ``__name__``) and ``as_name`` (the global that holds this
    stand-in), the import rebinds that global to the real module; :meth:`bind` adds further
    such globals (one stand-in shared by several modules).
    """

    __slots__ = ("_name", "_owners")

    def __init__(self, name: str, owner: str | None = None, as_name: str | None = None):
        self._name = name
        self._owners = [] if owner is None else [(owner, as_name)]

    def bind(self, owner: str, as_name: str):
        """This stand-in as global ``as_name`` of module ``owner``, which the import rebinds
        to the real module.

        >>> m = module("json")
        >>> m.bind(__name__, "_unused") is m
        True
        """
        self._owners.append((owner, as_name))
        return self

    def load(self):
        """The real module (imported now if it was not)."""
        if self._name not in sys.modules:
            for guard in GUARDS:
                guard(self._name)
        # (a module another thread is importing is in sys.modules already: the import waits
        # for it to finish)
        mod = importlib.import_module(self._name)
        for owner_name, as_name in self._owners:
            owner = sys.modules.get(owner_name)
            if owner is not None and owner.__dict__.get(as_name) is self:
                owner.__dict__[as_name] = mod
        return mod

    def __getattr__(self, attr):
        return getattr(self.load(), attr)

    def __setattr__(self, attr, value):
        if attr in module.__slots__:
            object.__setattr__(self, attr, value)
        else:   # the module's attribute (a test's monkeypatch through the stand-in)
            setattr(self.load(), attr, value)

    def __delattr__(self, attr):
        delattr(self.load(), attr)

    def __repr__(self):
        return f"<module {self._name!r} (imported on first use)>"
