"""forge_array benchmarks: ``python -m bench.run --help``; see bench/README.md.

Benchmarks measure our kernels, so they build them in the calling thread
(``FORGE_ARRAY_COMPILE=sync``) instead of running first calls on CuPy while they build; the
startup suite sets the mode of each process it starts itself.
"""

import os

os.environ.setdefault("FORGE_ARRAY_COMPILE", "sync")
