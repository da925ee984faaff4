"""One line per case of a ``bench.run`` results.json: our time, each peer's time and ratio.

    python -m bench.summarize bench/results/nvidia-h200/results.json > summary.md

Ratios are *peer time / our time* (> 1: forge_array is faster); "of copy" is our bandwidth as
a fraction of the copy roofline measured in the same run; "check" is the comparison of our
output with the reference implementation (``None``: too large to check).
"""

from __future__ import annotations

import argparse
import json
import sys

PEERS = ("cupy", "torch", "cuda.compute")
PEER_TITLES = {"cupy": "CuPy", "torch": "torch", "cuda.compute": "cuda.compute"}


def _cell(impl: dict | None, ours: float | None) -> str:
    """``time ratio×`` of one peer, or ``-`` where it did not run."""
    if not impl or impl.get("status") != "ok" or impl.get("median_us") is None:
        return "-" if not impl else impl.get("status", "-")
    t = impl["median_us"]
    return f"{t:.1f} {t / ours:.2f}×" if ours else f"{t:.1f}"


def summarize(results: dict) -> str:
    """The markdown table of ``results`` (the dict of a results.json).

    >>> summarize({"meta": {"device": {"name": "GPU"}}, "cases": []}).splitlines()[0]
    '| case | ours µs | CuPy µs × | torch µs × | cuda.compute µs × | of copy | check |'
    """
    head = "| case | ours µs | " + " | ".join(f"{PEER_TITLES[p]} µs ×" for p in PEERS)
    lines = [head + " | of copy | check |", "|---" * (len(PEERS) + 4) + "|"]
    for case in results["cases"]:
        impls = case.get("impls", {})
        ours = impls.get("forge_array", {})
        t = ours.get("median_us") if ours.get("status") == "ok" else None
        cells = [case["label"], f"{t:.1f}" if t else ours.get("status", "-")]
        cells += [_cell(impls.get(p), t) for p in PEERS]
        frac = ours.get("roofline_frac")
        cells.append(f"{frac:.2f}" if frac is not None else "-")
        cells.append(str(ours.get("check")))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="path of a bench.run results.json")
    args = parser.parse_args(argv)
    with open(args.results) as f:
        sys.stdout.write(summarize(json.load(f)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
