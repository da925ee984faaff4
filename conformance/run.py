"""Run the official array-api-tests suite against forge_array.

    python conformance/run.py --suite /path/to/array-api-tests --device cpu \
        [--strict] [--max-examples 100] [-n 2] [--json out.json] [-- extra pytest args]

The suite is a git checkout of data-apis/array-api-tests with its array-api
submodule (it is not on PyPI). This script sets ARRAY_API_TESTS_MODULE=forge_array,
FORGE_ARRAY_DEVICE and ARRAY_API_TESTS_VERSION=2025.12, passes
conformance/xfails-<cpu|cuda>.txt, disables hypothesis' per-example deadline
(--keep-deadline keeps it) and prints pass/fail/xfail/skip counts. The suite runs with
forge_array's default promotion (FORGE_ARRAY_STRICT=0: mixed kinds promote as in NumPy 2,
which the suite's tests never draw) or, with --strict, with the standard's table alone
(FORGE_ARRAY_STRICT=1); both must pass.
Exit status: 0 when nothing failed (xfails excepted), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--suite", required=True, help="path to an array-api-tests checkout")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument("--max-examples", type=int, default=100)
    p.add_argument("-n", "--workers", default="2", help="pytest-xdist workers (0: none)")
    p.add_argument("--json", help="write the per-test outcomes here")
    p.add_argument("--xfails", help="override the xfails file")
    p.add_argument("--keep-deadline", action="store_true",
                   help="keep hypothesis' 800 ms per-example deadline (off by default: it "
                        "times the suite's own element-by-element Python checks and CuPy's "
                        "first-use kernel compilation, and fails on a loaded machine)")
    p.add_argument("--strict", action="store_true",
                   help="strict type promotion (FORGE_ARRAY_STRICT=1): mixed kinds raise and "
                        "integer division needs floating-point operands, as the standard's "
                        "table alone gives")
    p.add_argument("pytest_args", nargs="*", help="extra arguments for pytest (after --)")
    args = p.parse_args(argv)

    suite = Path(args.suite).resolve()
    if not (suite / "array_api_tests").is_dir():
        p.error(f"{suite} is not an array-api-tests checkout")
    kind = "cpu" if args.device == "cpu" else "cuda"
    xfails = Path(args.xfails) if args.xfails else HERE / f"xfails-{kind}.txt"

    env = dict(os.environ)
    env["ARRAY_API_TESTS_MODULE"] = "forge_array"
    env["ARRAY_API_TESTS_VERSION"] = "2025.12"
    env["FORGE_ARRAY_DEVICE"] = args.device if args.device != "cuda" else "cuda:0"
    env["FORGE_ARRAY_STRICT"] = "1" if args.strict else "0"
    # our kernels on every call, not their CuPy fallback while they build in the background
    env.setdefault("FORGE_ARRAY_COMPILE", "sync")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)

    report = Path(args.json) if args.json else Path(tempfile.mkstemp(suffix=".json")[1])
    cmd = [sys.executable, "-m", "pytest", "array_api_tests", "-q", "-rN",
           f"--max-examples={args.max_examples}", "--json-report",
           f"--json-report-file={report}", "-p", "no:cacheprovider"]
    if not args.keep_deadline:
        cmd.append("--disable-deadline")
    if xfails.exists():
        cmd.append(f"--xfails-file={xfails}")
    if args.workers not in ("0", "1"):
        cmd += ["-n", str(args.workers)]
    cmd += args.pytest_args
    print("+", " ".join(cmd), flush=True)
    subprocess.call(cmd, cwd=suite, env=env)

    data = json.loads(report.read_text())
    counts = Counter(t["outcome"] for t in data.get("tests", []))
    failed = sorted(t["nodeid"] for t in data.get("tests", []) if t["outcome"] == "failed")
    print()
    for nodeid in failed:
        print("FAILED", nodeid)
    print(f"device={args.device} strict={int(args.strict)} passed={counts['passed']} failed={counts['failed']} "
          f"xfailed={counts['xfailed']} xpassed={counts['xpassed']} "
          f"skipped={counts['skipped']} errors={counts['error']}")
    return 1 if counts["failed"] or counts["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
