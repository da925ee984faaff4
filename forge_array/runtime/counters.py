"""The process's public counters of kernel work (no numba needed to read them).

``STATS["launches"]`` counts every launch of ours, ``STATS["fused"]`` the element-wise
expressions fused into the kernel that consumes them (see :mod:`forge_array.fusion`),
``compiled`` / ``disk_hits`` the kernels compiled here or found in the disk cache,
``compile_seconds`` / ``load_seconds`` the time spent on them, ``process_builds`` the kernels
the build process compiled for this process (see :mod:`forge_array.runtime.build_process`),
``cpu_compiled`` / ``cpu_disk_hits`` / ``cpu_uncached`` numba's CPU compilations made here,
loaded from the disk or not storable (operators' types, the CPU device's loops; see
:mod:`forge_array.runtime.cpu_cache`), ``deferred`` the calls that
ran on their CuPy / NumPy fallback while a kernel was built in the background (see
:mod:`forge_array.runtime.background`), ``stored_launches`` the launches run from the disk's
stored launches before numba loaded (see :mod:`forge_array.runtime.stored`), ``prebuilt_hits``
the kernels loaded from the package's prebuilt archive (see :mod:`forge_array.runtime.prebuilt`),
``numba_free_kernels`` the kernels found in the disk cache or the shipped archive with numba
unloaded (by the factories' fingerprint table, see :mod:`forge_array.runtime.factories`),
``cubin_loads`` the kernels loaded as the device's machine code (a shipped cubin) rather than
PTX the driver compiles at load,
``linked`` / ``link_failures`` the specialisations built by linking new operators into the
rest of a kernel built before, and the tries that fell back to a full build (see
:mod:`forge_array.runtime.linking`).

>>> from forge_array.runtime import STATS
>>> sorted(STATS)[:3]
['compile_seconds', 'compiled', 'cpu_compiled']
"""

from __future__ import annotations

#: Counters of this process (see the module's docstring).
STATS = {"compiled": 0, "disk_hits": 0, "compile_seconds": 0.0, "load_seconds": 0.0,
         "launches": 0, "fused": 0, "deferred": 0, "stored_launches": 0,
         "cpu_compiled": 0, "cpu_disk_hits": 0, "cpu_uncached": 0, "process_builds": 0,
         "prebuilt_hits": 0, "numba_free_kernels": 0, "cubin_loads": 0, "linked": 0, "link_failures": 0}
