"""The dispatch tier: one module per algorithm that plans a launch from the operands' layout
and the tuning tables, caches the plan, compiles the kernel (:mod:`forge_array.kernels`)
and launches or replays it.

==================  ===============================================================
module              algorithm
==================  ===============================================================
``reduce``          full reductions (named, ``reduce`` / ``mapreduce``)
``axis_reduce``     reductions along axes, and the products built on them (``A @ v``)
``scan``            scans (``cumulative_*``, ``accumulate``)
``copy``            strided copies
``elementwise``     the element-wise map of materialised fused expressions
``rows``            fused row programs
``compaction``      run starts, selection and rank scatter of ``nonzero`` / ``unique``
==================  ===============================================================

The primitives (:mod:`forge_array.primitives`) check arguments, apply the dtype rules and
take the CPU paths, then call their algorithm's dispatch module. Importing this package
imports nothing: a dispatch module loads numba's CUDA target at its first plan.
"""
