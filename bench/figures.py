"""Figures and tables of the performance page from one ``bench.run`` results.json.

    python -m bench.figures bench/results/nvidia-h200/results.json --out docs/img --tables docs/perf-tables.md

One figure per question, each readable at page width:

- ``roofline-<suite>.png``: our bandwidth as a fraction of the copy roofline (a device-to-device
  copy of the same bytes, timed in the same run) against the problem size, one line per series
  that sweeps sizes; a suite whose series all keep one size and sweep shapes (``matvec``: n x p
  matrices with n*p fixed per series) is drawn against the number of rows n instead;
- ``speedup-<suite>.png``: at the largest size of every series, our speed-up against the best peer
  (CuPy, PyTorch, cuda.compute: whichever was fastest on that case), one bar per series;
- ``fusion.png`` (results of the ``fusion`` suite): every float32 case at its largest size, the
  time of ``xp.fuse``, plain code, plain code eager, torch.compile, torch and CuPy side by side
  (log scale).

``--tables`` writes one markdown table per suite (the largest size of each series, every peer).
A figure that would have no data raises ``EmptyFigureError`` instead of being written.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections import defaultdict

from .summarize import PEERS

TITLES = {"cupy": "CuPy", "torch": "PyTorch", "cuda.compute": "cuda.compute"}
SUITE_TITLES = {"copy": "Copy", "reduce": "Reductions", "scan": "Scans", "matvec": "Matrix-vector products",
                "cupy_dropin": "CuPy drop-in workload"}


class EmptyFigureError(ValueError):
    """A figure would be written with no data (a field or filter that matches no case)."""


def _save(fig, ax, path: str, what: str) -> None:
    """Write ``fig`` to ``path``, or raise :class:`EmptyFigureError` when ``ax`` holds no data
    point (no line with a point, no bar of nonzero length)."""
    import matplotlib.pyplot as plt

    points = sum(len(line.get_xdata()) for line in ax.get_lines() if line.get_label()[:1] != "_")
    bars = sum(1 for p in ax.patches if getattr(p, "get_width", lambda: 0)() > 0)
    if not points and not bars:
        plt.close(fig)
        raise EmptyFigureError(f"{what}: no data to plot, {path} not written (do the series' fields "
                               "and the figure's filters match the cases of the results?)")
    fig.savefig(path)
    plt.close(fig)


def _ok(impl):
    return bool(impl) and impl.get("status") == "ok" and impl.get("median_us")


def series(results: dict) -> dict:
    """``{suite: {series name: [case, ...] by size}}`` of the cases forge_array ran.

    >>> s = series({"cases": [{"suite": "reduce", "name": "sum", "size": 2,
    ...                        "impls": {"forge_array": {"status": "ok", "median_us": 1.0}}}]})
    >>> [(k, list(v)) for k, v in s.items()]
    [('reduce', ['sum'])]
    """
    out: dict = defaultdict(lambda: defaultdict(list))
    for c in results["cases"]:
        if _ok(c.get("impls", {}).get("forge_array")):
            out[c["suite"]][c["name"]].append(c)
    return {s: {n: sorted(cs, key=lambda c: c["size"]) for n, cs in d.items()} for s, d in out.items()}


def best_peer(case: dict):
    """``(peer, median µs)`` of the fastest peer on ``case``, or None.

    >>> best_peer({"impls": {"cupy": {"status": "ok", "median_us": 3.0},
    ...                      "torch": {"status": "ok", "median_us": 2.0}}})
    ('torch', 2.0)
    """
    times = [(p, case["impls"][p]["median_us"]) for p in PEERS if _ok(case.get("impls", {}).get(p))]
    return min(times, key=lambda t: t[1]) if times else None


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _rows(case: dict):
    """The number of rows of a 2-D case (``shape[0]``), else None."""
    shape = case.get("shape") or ()
    return shape[0] if len(shape) == 2 else None


def sweep_axis(by_name: dict) -> str:
    """What the roofline figure of a suite puts on x: ``"size"`` when some series sweeps sizes,
    ``"rows"`` when every series keeps one size and sweeps 2-D shapes (matvec).

    >>> case = lambda size, shape: {"size": size, "shape": shape}
    >>> sweep_axis({"sum": [case(10, [10]), case(100, [100])], "sum axis=0": [case(100, [10, 10])]})
    'size'
    >>> sweep_axis({"matvec": [case(100, [10, 10]), case(100, [1, 100])]})
    'rows'
    """
    if any(len({c["size"] for c in cases}) > 1 for cases in by_name.values()):
        return "size"
    return "rows"


def roofline_figure(suite: str, by_name: dict, path: str, device: str) -> None:
    """Fraction of the copy roofline against size (or rows, see :func:`sweep_axis`), one line
    per series of ``suite``."""
    axis = sweep_axis(by_name)
    x_of = (lambda c: c["size"]) if axis == "size" else _rows
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    for name, cases in sorted(by_name.items()):
        pts = sorted((x_of(c), c["impls"]["forge_array"].get("roofline_frac")) for c in cases)
        pts = [(x, y) for x, y in pts if x is not None and y is not None]
        if len({x for x, _ in pts}) > 1:   # a sweep (series of one point are in the tables)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, lw=1.2, label=name)
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_xlabel("elements" if axis == "size" else "rows n of the n × p matrix (n·p fixed per series)")
    ax.set_ylabel("fraction of the copy roofline")
    ax.set_title(f"{SUITE_TITLES.get(suite, suite)}: how close to the copy roofline ({device})")
    ax.set_ylim(0, 1.3)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, ncol=2, loc="upper left" if axis == "size" else "lower left")
    fig.tight_layout()
    _save(fig, ax, path, f"roofline figure of the {suite} suite")


def speedup_figure(suite: str, by_name: dict, path: str, device: str) -> None:
    """Speed-up against the best peer at the largest size of every series of ``suite``
    (horizontal bars)."""
    rows = []
    for _, cases in sorted(by_name.items()):
        for big in _largest(cases):
            bp = best_peer(big)
            if bp:
                rows.append((big["label"], bp[1] / big["impls"]["forge_array"]["median_us"], TITLES[bp[0]]))
    if not rows:   # no peer ran this suite: no figure (the tables show our times)
        print(f"speed-up figure of the {suite} suite: no case with a peer, {path} not written", file=sys.stderr)
        return
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 0.24 * len(rows) + 1.4), dpi=110)
    ys = range(len(rows))
    vals = [r[1] for r in rows]
    ax.barh(ys, vals, color=["tab:green" if v >= 1 else "tab:red" for v in vals])
    ax.set_yticks(list(ys), [f"{r[0]} vs {r[2]}" for r in rows], fontsize=7)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("best peer's time / ours (> 1: forge_array faster)")
    ax.set_title(f"{SUITE_TITLES.get(suite, suite)}: speed-up against the best peer ({device})", fontsize=10)
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    _save(fig, ax, path, f"speed-up figure of the {suite} suite")


#: the implementations the fusion figure shows, and their labels
FUSION_BARS = (("forge_array", "forge_array xp.fuse"), ("forge_array plain", "forge_array, plain code"),
               ("forge_array eager", "plain code, eager"), ("torch.compile", "torch.compile"),
               ("torch", "PyTorch"), ("cupy", "CuPy"))


def fusion_figure(cases: list, path: str, device: str) -> None:
    """µs of each float32 case of the fusion suite at its largest size, one group of bars per
    case (:data:`FUSION_BARS`), log scale."""
    biggest: dict = {}
    for c in cases:
        if c.get("suite") == "fusion" and c.get("dtype") == "float32":
            if c["name"] not in biggest or c["size"] > biggest[c["name"]]["size"]:
                biggest[c["name"]] = c
    rows = sorted(biggest.values(), key=lambda c: c["label"])
    if not rows:
        raise EmptyFigureError(f"fusion figure: no float32 case of the fusion suite, {path} not written")
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(rows) + 1.6), dpi=110)
    width = 0.8 / len(FUSION_BARS)
    for k, (impl, label) in enumerate(FUSION_BARS):
        ys = [i + (k - (len(FUSION_BARS) - 1) / 2) * width for i in range(len(rows))]
        vals = [c["impls"][impl]["median_us"] if _ok(c["impls"].get(impl)) else 0 for c in rows]
        ax.barh(ys, vals, height=width, label=label)
    ax.set_yticks(list(range(len(rows))), [c["label"] for c in rows], fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("µs per call (GPU events from an idle GPU; less is faster)")
    ax.set_title(f"Fused expressions, float32 ({device})", fontsize=10)
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    _save(fig, ax, path, "fusion figure")


def _largest(cases: list) -> list:
    """The cases of a series at its largest size (several for a sweep of shapes of one size)."""
    top = cases[-1]["size"]
    return [c for c in cases if c["size"] == top]


def _us(impl) -> str:
    return f"{impl['median_us']:.1f}" if _ok(impl) else "–"


def tables(per_suite: dict) -> str:
    """One markdown table per suite: the largest size of each series, our time, every peer's
    time with its ratio (peer / ours), and our fraction of the copy roofline."""
    out = []
    for suite, by_name in per_suite.items():
        out += [f"### {SUITE_TITLES.get(suite, suite)}", "",
                "| case | forge_array µs | " + " | ".join(f"{TITLES[p]} µs (×)" for p in PEERS) + " | of copy |",
                "|---" * (len(PEERS) + 3) + "|"]
        for c in [c for _, cases in sorted(by_name.items()) for c in _largest(cases)]:
            ours = c["impls"]["forge_array"]
            cells = []
            for p in PEERS:
                imp = c["impls"].get(p)
                ratio = imp["median_us"] / ours["median_us"] if _ok(imp) else None
                cells.append(f"{imp['median_us']:.1f} ({ratio:.2f}×)" if ratio else "–")
            frac = ours.get("roofline_frac")
            tail = f" | {frac:.2f} |" if frac is not None and not math.isnan(frac) else " | – |"
            out.append(f"| {c['label']} | {_us(ours)} | " + " | ".join(cells) + tail)
        out.append("")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="a bench.run results.json")
    ap.add_argument("--out", default="docs/img", help="folder of the figures (default docs/img)")
    ap.add_argument("--tables", help="write the per-suite markdown tables to this file")
    args = ap.parse_args(argv)
    with open(args.results) as fh:
        results = json.load(fh)
    device = results["meta"]["device"]["name"]
    per_suite = series(results)
    os.makedirs(args.out, exist_ok=True)
    if any(c.get("suite") == "fusion" for c in results["cases"]):
        fusion_figure(results["cases"], os.path.join(args.out, "fusion.png"), device)
    for suite, by_name in per_suite.items():
        if suite == "fusion":
            continue
        if suite in ("copy", "reduce", "scan", "matvec"):
            roofline_figure(suite, by_name, os.path.join(args.out, f"roofline-{suite}.png"), device)
        if suite != "copy":
            speedup_figure(suite, by_name, os.path.join(args.out, f"speedup-{suite}.png"), device)
    if args.tables:
        with open(args.tables, "w") as fh:
            fh.write(tables(per_suite))
    print(f"figures in {args.out}" + (f"; tables in {args.tables}" if args.tables else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
