"""Reports of a bench run: metadata, JSON, the markdown table and the plots.
"""
from __future__ import annotations

import datetime
import importlib
import json
import os
import platform

import numpy as np

from .backends import _Backend
from .cases import CANONICAL_IMPLS, PEERS, Skip, _jsonable, _short_error

# ----------------------------------------------------------------------- reporting


def metadata(ctx: _Backend, args: dict, elapsed_s: float | None = None) -> dict:
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "device": ctx.device_meta(),
        "versions": ctx.versions(),
        "args": args,
        "notes": list(getattr(ctx, "notes", [])),
        "dry_run": ctx.dry_run,
    }
    if elapsed_s is not None:
        meta["elapsed_s"] = round(elapsed_s, 1)
    return meta


def run_labels(dry: bool = False) -> tuple:
    """``(device, commit)`` that a suite's results are labelled with: the first GPU's name
    (``"cpu (dry run)"`` for a dry run on the CPU) and ``FORGE_ARRAY_GIT`` (``"unknown"``
    where it is not set, as on the lent GPU machine's copy of the tree)."""
    if dry:
        device = "cpu (dry run)"
    else:
        import cupy as cp

        device = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    return device, os.environ.get("FORGE_ARRAY_GIT", "unknown")


def write_named(out: str, device: str, stem: str, data: dict, md: str) -> str:
    """Write ``data`` as ``<stem>.json`` and ``md`` as ``<stem>.md`` under
    ``<out>/<device-slug>/`` (the suites that keep their own tables); returns that folder."""
    from .backends import slug

    d = os.path.join(out, slug(device))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"{stem}.json"), "w") as f:
        json.dump(data, f, indent=1)
    with open(os.path.join(d, f"{stem}.md"), "w") as f:
        f.write(md)
    return d


def write_json(path: str, meta: dict, results: list[dict]) -> None:
    with open(path, "w") as f:
        json.dump({"meta": meta, "cases": results}, f, indent=1, default=_jsonable)


def _impl_order(results: list[dict]) -> list[str]:
    names: list[str] = []
    for rec in results:
        for n in rec.get("impls", {}):
            if n not in names:
                names.append(n)

    def key(n):
        base = n.split(" ")[0]
        rank = CANONICAL_IMPLS.index(base) if base in CANONICAL_IMPLS else len(CANONICAL_IMPLS)
        return (rank, n != base, names.index(n))

    return sorted(names, key=key)


def _cell(r: dict | None) -> str:
    if r is None:
        return ""
    if r.get("status") != "ok":
        return "skip" if r.get("status") == "skipped" else "err"
    t = r["median_us"]
    ts = f"{t:.1f}" if t < 1000 else f"{t:,.0f}"
    gb = r.get("gbps")
    frac = r.get("roofline_frac")
    extra = []
    if gb is not None:
        extra.append(f"{gb:.0f} GB/s")
    if frac is not None:
        extra.append(f"{100 * frac:.0f}%")
    s = f"{ts} ({', '.join(extra)})" if extra else ts
    if r.get("check") == "MISMATCH":
        s += " **MISMATCH**"
    return s


def markdown(meta: dict, results: list[dict]) -> str:
    dev = meta["device"]
    v = meta["versions"]
    lines = [f"# forge_array benchmarks: {dev.get('name')}", ""]
    lines.append(
        f"{meta['date']}; compute capability {dev.get('cc', '?')}; "
        + ", ".join(f"{k} {val}" for k, val in v.items() if val)
    )
    lines.append("")
    for note in meta.get("notes", []):
        lines.append(f"> {note}")
    lines += [
        "",
        "Cells: median time in µs (bandwidth from the minimal bytes moved, fraction of the "
        "copy roofline: a device-to-device copy of the same traffic timed in the same run). "
        "`fa ×peer` = peer time / forge_array time (> 1: forge_array is faster). "
        "`skip`/`err`: see the notes under each table.",
        "",
    ]
    suites: list[str] = []
    for rec in results:
        if rec["suite"] not in suites:
            suites.append(rec["suite"])
    for suite in suites:
        recs = [r for r in results if r["suite"] == suite]
        impls = _impl_order(recs)
        peers = [p for p in PEERS if any(p in r.get("speedup_vs", {}) for r in recs)]
        lines.append(f"## {suite}")
        lines.append("")
        head = ["case", "MB", "copy µs"] + impls + [f"fa ×{p}" for p in peers]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "|".join(["---"] * len(head)) + "|")
        problems: list[str] = []
        for rec in recs:
            roof = rec.get("roofline", {})
            row = [rec["label"], f"{rec['bytes'] / 1e6:.3g}"]
            row.append(f"{roof['median_us']:.1f}" if roof.get("median_us") else "")
            if rec.get("skipped"):
                row += [""] * (len(impls) + len(peers))
                row[0] += " (skipped)"
                problems.append(f"- {rec['label']}: skipped: {rec['skipped']}")
            else:
                for n in impls:
                    r = rec["impls"].get(n)
                    row.append(_cell(r))
                    if r and r.get("status") != "ok":
                        problems.append(f"- {rec['label']} / {n}: {r.get('error')}")
                    elif r and r.get("check") == "MISMATCH":
                        problems.append(
                            f"- {rec['label']} / {n}: result differs from "
                            f"the reference: rel. error {_err(r.get('max_rel_err'))}"
                        )
                for p in peers:
                    s = rec.get("speedup_vs", {}).get(p)
                    row.append(f"{s:.2f}" if s is not None else "")
            lines.append("| " + " | ".join(row) + " |")
        notes = sorted({r.get("note") for r in recs if r.get("note")})
        if notes or problems:
            lines.append("")
        for n in notes:
            lines.append(f"- note: {n}")
        # the same error repeats over sizes: show each distinct one once per impl
        seen: set = set()
        for p in problems:
            key = p.split(": ", 1)[-1]
            impl = p.split(" / ")[-1].split(":")[0] if " / " in p else ""
            if (impl, key) in seen:
                continue
            seen.add((impl, key))
            lines.append(p)
        lines.append("")
    return "\n".join(lines)


def _split_series(recs: list[dict]):
    """Size sweeps (x: elements), shape sweeps at a fixed size (x: rows), singles."""
    series: dict[str, list[dict]] = {}
    for r in recs:
        series.setdefault(r["name"], []).append(r)
    sweeps, shape_sweeps, singles = {}, {}, []
    for name, rs in series.items():
        if len({r["size"] for r in rs}) > 1:
            sweeps[name] = sorted(rs, key=lambda r: r["size"])
        elif len(rs) > 1 and all(len(r["shape"]) == 2 for r in rs):
            shape_sweeps[name] = sorted(rs, key=lambda r: r["shape"][0])
        else:
            singles.extend(rs)
    return sweeps, shape_sweeps, singles


def _points(rs: list[dict], impl: str, xfun):
    pts = []
    for r in rs:
        ri = r["impls"].get(impl, {})
        if ri.get("status") == "ok" and ri.get("gbps"):
            pts.append((xfun(r), ri["gbps"]))
    return pts


def plot(path: str, meta: dict, results: list[dict]) -> str | None:
    """Bandwidth per implementation; one row per suite: size sweeps (GB/s vs elements),
    shape sweeps at a fixed size (GB/s vs rows), single cases (bars); the dashed black
    line / black ticks are the copy roofline of the same traffic."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:
        return f"no plot: {_short_error(exc)}"
    suites: list[str] = []
    for rec in results:
        if rec["suite"] not in suites and not rec.get("skipped") and rec.get("impls"):
            suites.append(rec["suite"])
    if not suites:
        return "no plot: no results"
    impls = _impl_order(results)
    colors = {n: f"C{i % 10}" for i, n in enumerate(impls)}
    styles = ["-", "--", ":", "-."]
    markers = "osD^v<>ph*"
    fig, axes = plt.subplots(len(suites), 3, figsize=(21, 8.5 * len(suites)), squeeze=False)
    for row, suite in enumerate(suites):
        recs = [r for r in results if r["suite"] == suite and not r.get("skipped")]
        sweeps, shape_sweeps, singles = _split_series(recs)
        for col, (group, xfun, xlabel) in enumerate((
            (sweeps, lambda r: r["size"], "elements"),
            (shape_sweeps, lambda r: r["shape"][0], "rows (fixed number of elements)"),
        )):
            ax = axes[row][col]
            if not group:
                ax.axis("off")
                continue
            for si, (sname, rs) in enumerate(group.items()):
                for n in impls:
                    pts = _points(rs, n, xfun)
                    if pts:
                        x, y = zip(*pts)
                        ax.plot(x, y, styles[si % 4], marker=markers[si % 10], color=colors[n],
                                label=f"{n}: {sname}", ms=4, lw=1.2)
            first = next(iter(group.values()))
            roof = [(xfun(r), r["roofline"]["gbps"]) for r in first
                    if r.get("roofline", {}).get("gbps")]
            if roof:
                x, y = zip(*roof)
                ax.plot(x, y, "k--", lw=1, label="copy roofline")
            ax.set_xscale("log")
            if col == 0:
                ax.set_yscale("log")
            ax.set_xlabel(xlabel)
            ax.set_ylabel("GB/s (minimal bytes moved)")
            ax.set_title(f"{suite}: " + ("size sweeps" if col == 0 else "shape sweeps"))
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=6, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.13))
        ax = axes[row][2]
        if singles:
            xs = np.arange(len(singles))
            used = [n for n in impls if any(r["impls"].get(n, {}).get("gbps") for r in singles)]
            width = 0.8 / max(len(used), 1)
            for j, n in enumerate(used):
                ys = [(r["impls"].get(n, {}).get("gbps") or 0) for r in singles]
                ax.bar(xs + (j - len(used) / 2 + 0.5) * width, ys, width, color=colors[n],
                       label=n)
            roof = [r.get("roofline", {}).get("gbps") or np.nan for r in singles]
            ax.plot(xs, roof, "k_", ms=20, mew=2, label="copy roofline")
            ax.set_xticks(xs)
            ax.set_xticklabels([r["label"] for r in singles], rotation=45, ha="right",
                               fontsize=7)
            ax.set_ylabel("GB/s")
            ax.set_title(f"{suite}: single cases")
            ax.grid(True, axis="y", alpha=0.3)
            ax.legend(fontsize=6)
        else:
            ax.axis("off")
    fig.suptitle(f"forge_array vs peers on {meta['device'].get('name')} ({meta['date']})")
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None


def write_all(out_dir: str, stem: str, meta: dict, results: list[dict]) -> dict:
    os.makedirs(out_dir, exist_ok=True)
    paths = {
        "json": os.path.join(out_dir, stem + ".json"),
        "md": os.path.join(out_dir, stem + ".md"),
        "png": os.path.join(out_dir, stem + ".png"),
    }
    write_json(paths["json"], meta, results)
    with open(paths["md"], "w") as f:
        f.write(markdown(meta, results))
    err = plot(paths["png"], meta, results)
    if err:
        paths.pop("png")
        print(err)
    return paths


def _err(e) -> str:
    return "n/a (shapes differ)" if e is None else f"{e:.3g}"


def import_optional(name: str):
    """importlib.import_module, raising Skip (not an error) when it is missing."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise Skip(f"{name} not available: {exc}") from None
