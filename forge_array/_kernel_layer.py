"""The kernel layer as the namespace and the fusion layer reach it: every primitive module
they call, bound here and imported at its first use.

``import forge_array`` must not load numba (about a second on a GPU machine) nor the kernel
modules built on it, so the modules above the primitives hold these stand-ins
(:class:`forge_array.runtime.lazy.module`) instead of importing the primitives: a module takes
one with :func:`binding`, and the first attribute access imports the primitive and puts the
module itself in that module's global, so that later calls cost nothing extra.  This is the
one place that names them; the imports under ``TYPE_CHECKING`` below are the same bindings
as the import graph sees them (the namespace's arrows down to the primitives).

>>> binding("reductions", __name__, "_unused") is not None
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .runtime.lazy import module as _lazy

if TYPE_CHECKING:  # what the stand-ins below stand for
    from .primitives import compaction, fused_reduce, matvec, reductions, scan, strided_copy  # noqa: F401
    from .runtime import stored  # noqa: F401

__all__ = ["binding"]

#: the modules of the kernel layer above it, by the name :func:`binding` takes
_MODULES = {
    "reductions": _lazy("forge_array.primitives.reductions"),
    "scan": _lazy("forge_array.primitives.scan"),
    "matvec": _lazy("forge_array.primitives.matvec"),
    "strided_copy": _lazy("forge_array.primitives.strided_copy"),
    "compaction": _lazy("forge_array.primitives.compaction"),
    "fused_reduce": _lazy("forge_array.primitives.fused_reduce"),
    # the launches stored on disk: a GPU's first calls only (nothing of it on a CPU-only machine)
    "stored": _lazy("forge_array.runtime.stored"),
}


def binding(name: str, owner: str, as_name: str):
    """Kernel-layer module ``name`` (a key of the table above) for global ``as_name`` of module
    ``owner``: a stand-in that imports it at the first attribute access and then rebinds that
    global to it."""
    stand_in = _MODULES[name]
    return stand_in.bind(owner, as_name)
