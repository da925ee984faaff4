"""``python -m forge_array``: versions, devices, kernel status and a smoke test.

``python -m forge_array`` (or ``python -m forge_array check``) checks sum, cumulative_sum
and matmul on every device against NumPy; exits with status 1 when one of them fails.
``python -m forge_array warmup`` compiles the standard operations' kernels into the disk
cache (:mod:`forge_array._warmup`); ``python -m forge_array prebuild`` (a maintainer's command,
on a GPU machine) builds the kernels shipped in ``forge_array/prebuilt/``
(:mod:`forge_array.runtime.prebuilt`). ``--help`` shows the usage; unknown arguments exit with
status 2.
"""

from __future__ import annotations

import argparse
import os
import sys


def _version(mod_name: str) -> str:
    try:
        from importlib.metadata import version  # noqa: PLC0415

        return version(mod_name)
    except Exception:
        return "not installed"


def _kernels_status() -> str:
    try:
        from forge_array import runtime  # noqa: PLC0415
    except Exception as e:  # not built, or no numba-cuda
        return f"kernels: not built ({type(e).__name__})"
    fn = getattr(runtime, "kernels_status", None)
    if fn is None:
        return "kernels: not built"
    try:
        return str(fn())
    except Exception as e:
        return f"kernels: status unavailable ({type(e).__name__}: {e})"


def _prebuilt_status() -> str:
    try:
        import numba  # noqa: PLC0415

        from forge_array.runtime import compiler, kernel_sources, prebuilt  # noqa: PLC0415

        return prebuilt.status(kernel_sources.source_hash(), numba.__version__, compiler._NUMBA_CUDA_VERSION,
                               module_hashes=kernel_sources.module_hashes())
    except Exception as e:
        return f"prebuilt kernels: status unavailable ({type(e).__name__}: {e})"


def _checks(xp, np, device):
    rng = np.random.default_rng(0)
    failures = []
    a = rng.standard_normal((37, 41)).astype(np.float32)
    b = rng.standard_normal((41, 5)).astype(np.float32)
    i = rng.integers(-100, 100, size=1000).astype(np.int32)

    def host(x):
        return np.asarray(x.to_device(xp.cpu))

    cases = [
        ("sum float32", lambda: xp.sum(xp.asarray(a, device=device)), a.sum(), 1e-4),
        ("sum int32 -> int64", lambda: xp.sum(xp.asarray(i, device=device)),
         i.sum(dtype=np.int64), 0),
        ("sum axis=0", lambda: xp.sum(xp.asarray(a, device=device), axis=0), a.sum(axis=0),
         1e-4),
        ("cumulative_sum int32", lambda: xp.cumulative_sum(xp.asarray(i, device=device)),
         np.cumsum(i, dtype=np.int64), 0),
        ("cumulative_sum axis=1",
         lambda: xp.cumulative_sum(xp.asarray(a, device=device), axis=1),
         np.cumsum(a, axis=1), 1e-4),
        ("matmul float32", lambda: xp.matmul(xp.asarray(a, device=device),
                                             xp.asarray(b, device=device)), a @ b, 1e-4),
        ("matmul matrix-vector", lambda: xp.matmul(xp.asarray(a, device=device),
                                                   xp.asarray(b[:, 0], device=device)),
         a @ b[:, 0], 1e-4),
    ]
    for name, fn, expected, tol in cases:
        try:
            got = host(fn())
            if got.dtype != np.asarray(expected).dtype or got.shape != np.shape(expected):
                failures.append(f"{name}: got {got.dtype}{got.shape}, expected "
                                f"{np.asarray(expected).dtype}{np.shape(expected)}")
            elif not np.allclose(got, expected, rtol=tol, atol=tol):
                failures.append(f"{name}: values differ from NumPy")
        except Exception as e:
            failures.append(f"{name}: {type(e).__name__}: {e}")
    return failures


def parser() -> argparse.ArgumentParser:
    """The command line's parser: ``check`` (the default) and ``warmup``.

    ```python
    from forge_array.__main__ import parser

    parser().parse_args(["warmup", "--ops", "sum"]).command     # 'warmup'
    ```
    """
    from forge_array import _warmup  # noqa: PLC0415

    p = argparse.ArgumentParser(
        prog="python -m forge_array",
        description="forge_array: versions, devices and a check of our kernels against NumPy "
                    "(the default command), or kernels built ahead into the disk cache.")
    sub = p.add_subparsers(dest="command", metavar="{check,warmup,prebuild}")
    sub.add_parser("check", help="versions, devices, kernel status and a check of sum, "
                                 "cumulative_sum and matmul on every device (the default)",
                   description="Print versions, devices and the kernels' status, and check "
                               "sum, cumulative_sum and matmul on every device against NumPy "
                               "(exit status 1 when one differs).")
    w = sub.add_parser("warmup", help="compile the standard operations' kernels into the "
                                      "disk cache", description=_warmup.DESCRIPTION)
    _warmup.add_arguments(w)
    b = sub.add_parser("prebuild", help="build the kernels shipped with the package (a maintainer's "
                                        "command, on a GPU machine)",
                       description="Compile the standard operations' kernels for every standard "
                                   "dtype and layout class as PTX for the baseline compute "
                                   "capability, pack them into forge_array/prebuilt/ with a "
                                   "manifest, and check the archive in a fresh process.")
    b.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1),
                   help="processes compiling side by side (default: the cores, at most 16)")
    b.add_argument("--out", default=None, help="folder of kernels.zip and manifest.json "
                                              "(default: the package's prebuilt/ folder)")
    b.add_argument("--device", default=None, help="e.g. cuda:0 (default: the default device)")
    b.add_argument("--commit", default=None, help="the commit to record in the manifest (default: git "
                                                 "rev-parse HEAD of the checkout)")
    b.add_argument("--skeletons-only", action="store_true",
                   help="keep the shipped kernels (they must match this install) and build only the "
                        "skeletons of the stand-in user operators")
    b.add_argument("--work", default=None, help="folder of the build's caches (default: temporary "
                                               "ones); a build stopped on the way resumes there")
    b.add_argument("--extend", action="store_true",
                   help="start from the shipped archive: its kernels whose sources did not change "
                        "load into the build's cache, only the others (and specialisations the "
                        "standard operations plan beyond it) compile")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    if args.command == "warmup":
        from forge_array._warmup import run  # noqa: PLC0415

        return run(args)
    if args.command == "prebuild":
        return prebuild(args)
    return check()


def prebuild(args) -> int:
    """Run the ``prebuild`` command (see :func:`forge_array._warmup.prebuild`); print the
    manifest. Returns the exit status (2 without a GPU).

    ```python
    from forge_array.__main__ import main

    main(["prebuild", "--jobs", "16"])     # on a GPU machine
    ```
    """
    import json  # noqa: PLC0415

    from forge_array._warmup import prebuild as build  # noqa: PLC0415

    try:
        m = build(args.jobs, args.out, args.device, commit=args.commit, skeletons_only=args.skeletons_only,
                  work=args.work, extend=args.extend)
    except ValueError as e:
        print(str(e), file=sys.stderr)
        return 2
    print(json.dumps(m, indent=1, sort_keys=True))
    return 0


def check() -> int:
    """Print versions, devices and the kernels' status; check sum, cumulative_sum and matmul
    on every device against NumPy. Returns the exit status (1 when a check fails).

    ```python
    from forge_array.__main__ import check

    status = check()     # prints the report; 0 when every check passed
    ```
    """
    import numpy as np  # noqa: PLC0415

    import forge_array as xp  # noqa: PLC0415

    print(f"forge_array {xp.__version__} (Array API {xp.__array_api_version__})")
    info = xp.__array_namespace_info__()
    print(f"devices: {', '.join(str(d) for d in info.devices())} "
          f"(default: {info.default_device()})")
    for pkg in ("numpy", "cupy", "numba", "numba-cuda", "array-api-compat"):
        name = pkg
        v = _version(pkg)
        if pkg == "cupy" and v == "not installed":
            for alt in ("cupy-cuda13x", "cupy-cuda12x"):
                if _version(alt) != "not installed":
                    name, v = alt, _version(alt)
                    break
        print(f"  {name}: {v}")
    print(_kernels_status())
    print(_prebuilt_status())
    from forge_array.runtime import background  # noqa: PLC0415

    background.set_mode("sync")   # check our kernels, not the CuPy fallback of a first call
    ok = True
    for dev in info.devices():
        failures = _checks(xp, np, dev)
        if failures:
            ok = False
            print(f"check on {dev}: FAILED")
            for f in failures:
                print(f"  {f}")
        else:
            print(f"check on {dev}: OK (sum, cumulative_sum, matmul)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
