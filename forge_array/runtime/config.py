"""The kernel layer's fixed settings, as :mod:`.flags` read them from the environment (without
importing numba): the simulator switch, the kernel cache directory, kernels on or off.

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

from .flags import FLAGS, _simulate_requested

if _simulate_requested and "numba.cuda" not in sys.modules:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

#: True when our kernels run in numba's CUDA simulator on NumPy buffers (flag ``simulate``).
SIMULATE: bool = FLAGS["simulate"].cell[0]

if _simulate_requested and not SIMULATE:
    warnings.warn(
        "FORGE_ARRAY_SIMULATE=1 was set after numba.cuda had been imported without the "
        "simulator; forge_array kernels will not be simulated in this process",
        RuntimeWarning,
        stacklevel=2,
    )

#: Seed for the simulator's model of weak memory visibility (flag ``sim_seed``).
SIM_SEED: int = FLAGS["sim_seed"].cell[0]

#: Directory of the on-disk kernel cache (flag ``cache_dir``).
CACHE_DIR: str = FLAGS["cache_dir"].cell[0]

#: Our kernels on; ``FORGE_ARRAY_KERNELS=0`` sends everything to CuPy / NumPy (flag ``kernels``).
KERNELS_ENABLED: bool = FLAGS["kernels"].cell[0]
