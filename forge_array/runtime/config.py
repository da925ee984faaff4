"""Process-wide settings of the kernel layer, read from the environment without importing
numba: the simulator switch, the kernel cache directory, kernels on or off.

``FORGE_ARRAY_SIMULATE=1`` runs our kernels in numba's CUDA simulator; numba reads the
switch (``NUMBA_ENABLE_CUDASIM``, set here) when :mod:`numba.cuda` is first imported, so
this module must be imported before it (``import forge_array`` does, and loads numba only
when a kernel is first built).

Example
-------
>>> from forge_array.runtime import config
>>> isinstance(config.SIMULATE, bool)
True
"""

from __future__ import annotations

import os
import sys
import warnings

_requested = os.environ.get("FORGE_ARRAY_SIMULATE", "").strip().lower() not in ("", "0", "false", "no")

if _requested and "numba.cuda" not in sys.modules:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"


def _simulated() -> bool:
    if "numba.cuda" in sys.modules:  # numba decided when it was imported
        return bool(sys.modules["numba.cuda"].config.ENABLE_CUDASIM)
    return _requested or os.environ.get("NUMBA_ENABLE_CUDASIM", "").strip() not in ("", "0")


#: True when our kernels run in numba's CUDA simulator on NumPy buffers.
SIMULATE: bool = _simulated()

if _requested and not SIMULATE:
    warnings.warn(
        "FORGE_ARRAY_SIMULATE=1 was set after numba.cuda had been imported without the "
        "simulator; forge_array kernels will not be simulated in this process",
        RuntimeWarning,
        stacklevel=2,
    )

#: Seed for the simulator's model of weak memory visibility (see intrinsics.sim_impl).
SIM_SEED: int = int(os.environ.get("FORGE_ARRAY_SIM_SEED", "12345"))

#: Directory of the on-disk kernel cache.
CACHE_DIR: str = os.environ.get("FORGE_ARRAY_CACHE_DIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
    "forge_array",
    "kernels",
)

#: ``FORGE_ARRAY_KERNELS=0`` turns our kernels off (everything goes to CuPy / NumPy).
KERNELS_ENABLED: bool = os.environ.get("FORGE_ARRAY_KERNELS", "1").strip() not in ("0", "false", "no")
