"""Run scikit-learn's own array API tests with forge_array arrays.

    python conformance/sklearn_run.py --device cpu [--strict] [-n 2] [--out FILE] \
        [-k EXPR] [-- extra pytest args]

Runs ``pytest --pyargs sklearn -k array_api`` on the installed scikit-learn (its tests
ship with it; nothing is copied here) with ``SCIPY_ARRAY_API=1`` and the plugin
``conformance/sklearn_plugin.py``, which makes every namespace-parametrized test use
``forge_array`` on ``--device`` (``cpu`` or ``cuda:N``) in float64 and float32. ``--strict``
sets ``FORGE_ARRAY_STRICT=1`` (the standard's promotion table alone). Prints the pass,
fail, error and skip counts (all selected tests, and those whose id names forge_array:
the others are scikit-learn's NumPy-only or library-specific array API tests) and writes
them, with every failure as its test id and a
one-line error, to ``--out`` (default ``conformance/sklearn-<device>.txt``); ``--json``
also writes the per-test outcomes.

Example::

    python conformance/sklearn_run.py --device cpu -n 2 -k "array_api and pca"

Exit status: 0 when nothing failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def _one_line(text: str) -> str:
    """The line of a failure report that says what went wrong (``E   ...`` lines first).

    >>> _one_line("x = 1\\nE   TypeError: bad\\nE   more")
    'TypeError: bad'
    """
    lines = [ln.strip() for ln in (text or "").splitlines()]
    for ln in lines:
        if ln.startswith("E ") and ln[1:].strip():
            return ln[1:].strip()[:300]
    for ln in reversed(lines):
        if ln:
            return ln[:300]
    return ""


def parse_junit(path: Path) -> list[tuple[str, str, str]]:
    """(test id, outcome, one-line message) for each test case of a JUnit XML report.

    ``outcome`` is passed, failed, error or skipped.
    """
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        tid = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome, msg = "passed", ""
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                outcome = "failed" if tag == "failure" else tag
                msg = _one_line(el.text or "") or (el.get("message") or "")
                if tag == "skipped" or not msg:
                    msg = (el.get("message") or msg).splitlines()[0] if (
                        el.get("message") or msg) else ""
                break
        out.append((tid, outcome, msg[:300]))
    return out


def _versions() -> dict:
    code = ("import json, numpy, scipy, sklearn; d = dict(numpy=numpy.__version__, "
            "scipy=scipy.__version__, sklearn=sklearn.__version__)\n"
            "try:\n import cupy; d['cupy'] = cupy.__version__\nexcept Exception: pass\n"
            "print(json.dumps(d))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=False)
    try:
        return json.loads(r.stdout)
    except ValueError:
        return {}


def _commit() -> str:
    """``FORGE_ARRAY_GIT`` where set (a copy of the tree whose git data is not its own, as on
    a lent GPU machine), else the checkout's HEAD."""
    label = os.environ.get("FORGE_ARRAY_GIT")
    if label:
        return label
    r = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                       capture_output=True, text=True, check=False)
    return r.stdout.strip() or "unknown"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", help="cpu or cuda:N")
    p.add_argument("--strict", action="store_true",
                   help="FORGE_ARRAY_STRICT=1: the standard's promotion table alone")
    p.add_argument("-n", "--workers", default="2", help="pytest-xdist workers (0: none)")
    p.add_argument("-k", dest="kexpr", default="array_api",
                   help="pytest -k expression (default: array_api)")
    p.add_argument("--out", help="results file (default conformance/sklearn-<device>.txt)")
    p.add_argument("--json", help="also write the per-test outcomes here")
    p.add_argument("pytest_args", nargs="*", help="extra arguments for pytest (after --)")
    args = p.parse_args(argv)

    device = "cuda:0" if args.device == "cuda" else args.device
    env = dict(os.environ)
    env["SCIPY_ARRAY_API"] = "1"
    env["FORGE_ARRAY_SKLEARN_DEVICE"] = device
    env["FORGE_ARRAY_STRICT"] = "1" if args.strict else "0"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(HERE), str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))

    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-p", "sklearn_plugin", "--pyargs", "sklearn",
               "-k", args.kexpr, "-q", "-p", "no:cacheprovider", "--tb=short", "--disable-warnings",
               "-o", "junit_family=xunit1", f"--junitxml={junit}"]
        if args.workers not in ("0", ""):
            cmd += ["-n", args.workers]
        cmd += args.pytest_args
        print(" ".join(cmd), flush=True)
        rc = subprocess.run(cmd, env=env, cwd=tmp, check=False).returncode
        if not junit.exists():
            print(f"pytest wrote no report (exit status {rc})", file=sys.stderr)
            return 1
        cases = parse_junit(junit)

    counts = Counter(o for _, o, _ in cases)
    vers = _versions()
    head = (f"date {datetime.date.today().isoformat()}, commit {_commit()}, device {device}, "
            f"scikit-learn {vers.get('sklearn', '?')}, SciPy {vers.get('scipy', '?')}, "
            f"NumPy {vers.get('numpy', '?')}"
            + (f", CuPy {vers['cupy']}" if "cupy" in vers and device != "cpu" else "")
            + f", FORGE_ARRAY_STRICT={env['FORGE_ARRAY_STRICT']}, -k {args.kexpr!r}")
    summary = ", ".join(f"{k} {counts.get(k, 0)}" for k in ("passed", "failed", "error",
                                                              "skipped"))
    fa = Counter(o for t, o, _ in cases if "forge_array" in t)
    summary += ("; tests whose id names forge_array: "
                + ", ".join(f"{k} {fa.get(k, 0)}" for k in ("passed", "failed", "error",
                                                           "skipped")))
    lines = [head, summary, ""]
    bad = [(t, o, m) for t, o, m in cases if o in ("failed", "error")]
    lines += [f"{o.upper()} {t}: {m}" for t, o, m in sorted(bad)]
    text = "\n".join(lines) + "\n"
    out = Path(args.out) if args.out else HERE / f"sklearn-{device.replace(':', '')}.txt"
    out.write_text(text)
    print(text if len(bad) < 200 else "\n".join(lines[:2]) + f"\n(failures in {out})")
    print(f"results: {out}")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"header": head, "counts": dict(counts),
             "tests": [{"id": t, "outcome": o, "message": m} for t, o, m in cases]},
            indent=1))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
