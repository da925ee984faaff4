"""Process-wide mode of the kernel layer: real GPU or numba's CUDA simulator.

``FORGE_ARRAY_SIMULATE=1`` must be set before :mod:`numba.cuda` is first imported; this
module sets ``NUMBA_ENABLE_CUDASIM`` accordingly and then imports :mod:`numba.cuda`, so
importing it first (``forge_array`` does) is enough.

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

from numba import cuda as _cuda  # noqa: E402  (must follow the environment set-up)

#: True when our kernels run in numba's CUDA simulator on NumPy buffers.
SIMULATE: bool = bool(_cuda.config.ENABLE_CUDASIM)

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
