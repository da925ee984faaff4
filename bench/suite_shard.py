"""shard: arrays split over the GPUs of one host (``forge_array.Sharding``), weak and strong
scaling, beside JAX's sharded arrays and Dask (one chunk per GPU) where they import.

    python -m bench.suite_shard --out "$OUT"                         # 1, 2, 4 GPUs, 2e9 float32 per GPU
    python -m bench.suite_shard --out "$OUT" --gpus 1,2 --per-gpu 2e8 --reps 5
    python -m bench.suite_shard --out /tmp/s --dry-run               # the CPU listed 1, 2, 4 times, tiny
    python -m bench.suite_shard --out "$OUT" --combine A.json B.json --tag weak   # runs of one machine, one table

Operations: ``sum``, ``mean(axis=0)``, ``std(axis=0)``, ``argmax``, ``x @ v``, ``sum(x*y+1)``,
``cumulative_sum`` along the split axis of the matrix and of a vector, ``accumulate(maximum)``
of a vector (JAX: ``lax.cummax``), and the affine scan ``accumulate(lambda p, q: (p0*q0,
q0*p1+q1), (a, b))`` of two vectors. The matrix is ``(n, 100)`` float32 split along its rows;
``--per-gpu`` elements per GPU (``--scaling weak``) or in total (``strong``). A run is
wall-clock from the call to every device having finished (``synchronize`` on each GPU), median
of ``--reps`` after two unrecorded runs (the first compiles); ``host ms`` is the median time
until the call returned, the host's share of issuing every block's work (JAX: until its
asynchronous call returned). GB/s per GPU counts each input read once and each output written
once, divided by the GPU count; ``copy`` is a device-to-device copy of the matrix's per-GPU
bytes on one GPU, timed in the same run (the roofline), and ``of copy`` the ratio. Results of
the sharded runs are compared with the same operation on one unsharded array on ``cuda:0``
(strong scaling; argmax exactly, the rest to 1e-3 relative). JAX: ``NamedSharding`` over a
``Mesh`` of the same GPUs, jitted ``jnp`` functions and ``jax.lax.associative_scan``. Dask:
dask-cuda's ``LocalCUDACluster`` with one worker and one chunk per GPU and ``forge_array.dask``
patching CuPy in the workers. Writes ``shard.json``, ``shard.md`` and ``shard-<scaling>.png``
(with ``--tag T``: ``shard-T.json`` ...) under ``<out>/<device-slug>/``; exits 1 when a sharded
result differs from the unsharded one, and at once when fewer GPUs than ``--gpus`` asks for are
visible.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time

import numpy as np

from .backends import slug

OPS = ("sum", "mean0", "std0", "argmax", "matvec", "sum_fused", "cumsum0", "cumsum1d", "cummax1d", "affine")
LABELS = {"sum": "sum", "mean0": "mean(axis=0)", "std0": "std(axis=0)", "argmax": "argmax",
          "matvec": "x @ v", "sum_fused": "sum(x*y+1)", "cumsum0": "cumulative_sum(axis=0)",
          "cumsum1d": "cumulative_sum (1-D)", "cummax1d": "accumulate(maximum) (1-D)",
          "affine": "affine scan (1-D)"}
COLS = 100


def _affine(p, q):
    return (p[0] * q[0], q[0] * p[1] + q[1])


def _bytes(op, n_elems):
    """Bytes an operation moves over n_elems float32 matrix elements (inputs read once,
    outputs written once)."""
    b = 4 * n_elems
    return {"sum_fused": 2 * b, "cumsum0": 2 * b, "cumsum1d": 2 * b, "cummax1d": 2 * b,
            "affine": 2 * b}.get(op, b)


# ----------------------------------------------------------------------------- devices


class Devices:
    """The GPUs (or, in a dry run, the CPU listed several times)."""

    def __init__(self, dry_run):
        self.dry = dry_run
        self.cp = None
        if not dry_run:
            try:
                import cupy
            except ImportError as e:
                sys.exit(f"suite_shard: needs CuPy and GPUs ({e}); --dry-run runs on the CPU")
            self.cp = cupy

    def count(self):
        if self.dry:
            return 64
        try:
            return int(self.cp.cuda.runtime.getDeviceCount())
        except Exception:
            return 0

    def names(self, g):
        return ["cpu"] * g if self.dry else [f"cuda:{i}" for i in range(g)]

    def sync(self, g):
        if self.dry:
            return
        for i in range(g):
            with self.cp.cuda.Device(i):
                self.cp.cuda.get_current_stream().synchronize()

    def free(self, g):
        gc.collect()
        if not self.dry:
            for i in range(g):
                with self.cp.cuda.Device(i):
                    self.cp.get_default_memory_pool().free_all_blocks()

    def name(self):
        if self.dry:
            return "cpu-dry-run"
        return self.cp.cuda.runtime.getDeviceProperties(0)["name"].decode()

    def copy_gbps(self, nbytes, reps):
        """One GPU's device-to-device copy rate over ``nbytes`` (read and written)."""
        if self.dry:
            return None
        cp = self.cp
        with cp.cuda.Device(0):
            a = cp.ones(nbytes // 4, dtype=cp.float32)
            b = cp.empty_like(a)
            ts = []
            for _ in range(reps + 1):
                s, e = cp.cuda.Event(), cp.cuda.Event()
                s.record()
                cp.cuda.runtime.memcpyAsync(b.data.ptr, a.data.ptr, a.nbytes, 3,
                                            cp.cuda.get_current_stream().ptr)
                e.record()
                e.synchronize()
                ts.append(cp.cuda.get_elapsed_time(s, e) / 1e3)
            del a, b
        return 2 * nbytes / statistics.median(ts[1:]) / 1e9


def _computed(r):
    """``r`` with every block computed: a deferred block (automatic fusion) is computed
    when its values are read."""
    for c in (r if isinstance(r, tuple) else (r,)):
        for s in getattr(c, "shards", (c,)):
            if hasattr(s, "_node"):
                s._array  # noqa: B018 - reading the values computes a deferred array
    return r


def _timed(fn, dev, g, reps):
    """(median seconds, median host seconds, last result): wall-clock from the call to every
    device idle, and from the call to its return (the host's time issuing every block's work;
    what is left of the wall time ran on the devices after it)."""
    ts, hs = [], []
    r = None
    for i in range(reps + 2):
        r = None
        dev.sync(g)
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            r = _computed(fn())
            t1 = time.perf_counter()
            dev.sync(g)
            t = time.perf_counter() - t0
        finally:
            gc.enable()
        if i >= 2:
            ts.append(t)
            hs.append(t1 - t0)
    return statistics.median(ts), statistics.median(hs), r


# --------------------------------------------------------------------------- forge_array


def _fill(xp, x, dev, seed):
    """Random values in every block of the sharded ``x``, made on the block's device."""
    for i, s in enumerate(x.shards):
        if dev.dry:
            rng = np.random.default_rng(seed + i)
            s[...] = xp.asarray(rng.random(s.shape, dtype=np.float32), device="cpu")
        else:
            cp = dev.cp
            with cp.cuda.Device(s.device.index):
                rs = cp.random.RandomState(seed + i)
                s[...] = xp.asarray(rs.random_sample(s.shape, dtype=cp.float32))
    return x


def _host(r):
    if isinstance(r, tuple):
        return tuple(_host(c) for c in r)
    if hasattr(r, "shards"):
        r = r.to_device("cpu")
    return np.asarray(r.to_device("cpu")) if hasattr(r, "to_device") else np.asarray(r)


def _sample(op, r):
    """The part of a result that is compared."""
    if op in ("cumsum0",):
        return [r[-1], r[r.shape[0] // 2]]
    if op in ("cumsum1d", "cummax1d"):
        return [r[-1:], r[r.shape[0] // 2:r.shape[0] // 2 + 1]]
    if op == "affine":
        return [c[-1:] for c in r]
    if op == "matvec":
        return [r[:1000], r[-1000:]]
    return [r]


def _forge_ops(xp, x, v, y, x1, ab):
    return {
        "sum": lambda: xp.sum(x),
        "mean0": lambda: xp.mean(x, axis=0),
        "std0": lambda: xp.std(x, axis=0),
        "argmax": lambda: xp.argmax(x),
        "matvec": lambda: x @ v,
        "sum_fused": lambda: xp.sum(x * y + 1),
        "cumsum0": lambda: xp.cumulative_sum(x, axis=0),
        "cumsum1d": lambda: xp.cumulative_sum(x1),
        "cummax1d": lambda: xp.accumulate(xp.ops.maximum, x1),
        "affine": lambda: xp.accumulate(_affine, ab),
    }


def _inputs(xp, dev, sh, rows, ops, same_data, seed=0):
    """The operands split over ``sh``. ``same_data``: made on the first device and split
    from there (the same values for every GPU count), else made on every device."""
    f32 = xp.float32
    one = xp.Sharding(sh.devices[:1])

    def make(shape, s):
        if not same_data:
            return _fill(xp, xp.empty(shape, dtype=f32, device=sh), dev, s)
        a = _fill(xp, xp.empty(shape, dtype=f32, device=one), dev, s)
        return a.to_device(sh)

    x = make((rows, COLS), seed)
    v = xp.asarray(np.linspace(0, 1, COLS, dtype=np.float32), device=sh.devices[0])
    y = x1 = ab = None
    if "sum_fused" in ops:
        y = make((rows, COLS), seed + 100)
    if "cumsum1d" in ops or "cummax1d" in ops:
        x1 = make((rows * COLS,), seed + 200)
    if "affine" in ops:
        half = rows * COLS // 2
        ab = (make((half,), seed + 300) * 0.5 + 0.5, make((half,), seed + 400))
    return x, v, y, x1, ab


def run_forge(xp, dev, g, rows, ops, reps, ref=None, same_data=False):
    sh = xp.Sharding(dev.names(g), axis=0)
    out = {}
    x, v, y, x1, ab = _inputs(xp, dev, sh, rows, ops, same_data)
    table = _forge_ops(xp, x, v, y, x1, ab)
    for op in ops:
        began = time.perf_counter()
        try:
            t, host, r = _timed(table[op], dev, g, reps)
            got = [_host(s) for s in _sample(op, r)]
            rec = {"s": t, "host_s": host}
            if ref is not None and op in ref:
                rec["ok"], rec["err"] = _compare(op, got, ref[op])
            out[op] = rec
            out[op]["_sample"] = got
        except Exception as e:  # recorded, never fatal
            out[op] = {"error": f"{type(e).__name__}: {e}"[:300]}
        r = None
        dev.free(g)
        print(f"[shard]   forge_array {op}: {time.perf_counter() - began:.1f} s with compiles",
              flush=True)
    del x, v, y, x1, ab, table
    dev.free(g)
    return out


def _compare(op, got, ref):
    errs = []
    for a, b in zip(got, ref):
        a = [np.asarray(c, dtype=np.float64) for c in (a if isinstance(a, tuple) else (a,))]
        b = [np.asarray(c, dtype=np.float64) for c in (b if isinstance(b, tuple) else (b,))]
        for p, q in zip(a, b):
            if op == "argmax":
                errs.append(0.0 if np.array_equal(p, q) else 1.0)
            else:
                scale = float(np.max(np.abs(q))) if q.size else 1.0
                scale = scale if scale > 1e-6 else 1.0   # values underflowing to 0 (affine products)
                errs.append(float(np.max(np.abs(p - q))) / scale if q.size else 0.0)
    err = max(errs) if errs else 0.0
    return err <= (0.0 if op == "argmax" else 1e-3), err


# ----------------------------------------------------------------------------------- JAX


def run_jax(g, rows, ops, reps):
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    gpus = [d for d in jax.devices() if d.platform == "gpu"][:g]
    if len(gpus) < g:
        raise RuntimeError(f"JAX sees {len(gpus)} GPUs")
    mesh = Mesh(np.array(gpus), ("d",))
    rows_s, vec_s, rep_s = NamedSharding(mesh, P("d", None)), NamedSharding(mesh, P("d")), \
        NamedSharding(mesh, P())

    def make(shape, sharding, seed):
        f = jax.jit(lambda k: jax.random.uniform(k, shape, dtype=jnp.float32), out_shardings=sharding)
        return f(jax.random.PRNGKey(seed))

    def aff(p, q):
        return (p[0] * q[0], q[0] * p[1] + q[1])

    x = make((rows, COLS), rows_s, 0)
    v = jax.device_put(jnp.linspace(0, 1, COLS, dtype=jnp.float32), rep_s)
    fns = {
        "sum": (jax.jit(jnp.sum), (x,)),
        "mean0": (jax.jit(lambda a: jnp.mean(a, axis=0)), (x,)),
        "std0": (jax.jit(lambda a: jnp.std(a, axis=0)), (x,)),
        "argmax": (jax.jit(jnp.argmax), (x,)),
        "matvec": (jax.jit(lambda a, b: a @ b), (x, v)),
        "cumsum0": (jax.jit(lambda a: jnp.cumsum(a, axis=0)), (x,)),
    }
    out = {}
    for op in ops:
        began = time.perf_counter()
        try:
            if op == "sum_fused":
                y = make((rows, COLS), rows_s, 1)
                fn, args = jax.jit(lambda a, b: jnp.sum(a * b + 1)), (x, y)
            elif op == "cumsum1d":
                fn, args = jax.jit(jnp.cumsum), (make((rows * COLS,), vec_s, 2),)
            elif op == "cummax1d":
                fn, args = jax.jit(jax.lax.cummax), (make((rows * COLS,), vec_s, 2),)
            elif op == "affine":
                half = rows * COLS // 2
                a, b = make((half,), vec_s, 3), make((half,), vec_s, 4)
                fn, args = jax.jit(lambda a, b: jax.lax.associative_scan(aff, (a, b))), (a, b)
            else:
                fn, args = fns[op]
            ts, hs = [], []
            for i in range(reps + 2):
                t0 = time.perf_counter()
                res = fn(*args)
                t1 = time.perf_counter()
                jax.block_until_ready(res)
                res = None
                if i >= 2:
                    ts.append(time.perf_counter() - t0)
                    hs.append(t1 - t0)
            out[op] = {"s": statistics.median(ts), "host_s": statistics.median(hs)}
            args = fn = None
        except Exception as e:
            out[op] = {"error": f"{type(e).__name__}: {e}"[:300]}
        gc.collect()
        print(f"[shard]   jax {op}: {time.perf_counter() - began:.1f} s with compiles", flush=True)
        print("JAXOP " + json.dumps({op: out[op]}), flush=True)  # read by run_jax_child
    return out


def run_jax_child(g, rows, ops, reps, timeout):
    """:func:`run_jax` in a child process limited to ``timeout`` seconds (XLA's compiles of
    some sharded scans take minutes): ops it did not finish are recorded as over the limit."""
    import subprocess

    cmd = [sys.executable, "-m", "bench.suite_shard", "--out", "-",
           "--jax-child", f"{g}:{rows}:{','.join(ops)}:{reps}"]
    done = {}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        text = proc.stdout
    except subprocess.TimeoutExpired as e:
        text = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
    for line in text.splitlines():
        if line.startswith("JAXOP "):
            done.update(json.loads(line[len("JAXOP "):]))
        elif line.startswith("[shard]"):
            print(line, flush=True)
    return {op: done.get(op, {"error": f"over the {timeout:.0f} s limit of the JAX run"})
            for op in ops}


# ---------------------------------------------------------------------------------- Dask


def run_dask(g, rows, ops, reps):
    import cupy
    import dask.array as da
    from dask_cuda import LocalCUDACluster
    from distributed import Client, wait

    import forge_array.dask as fdask

    out = {}
    cluster = LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(map(str, range(g))))
    client = Client(cluster)
    try:
        fdask.register(client)
        rs = da.random.RandomState(seed=0, RandomState=cupy.random.RandomState)
        chunk = -(-rows // g)
        x = fdask.one_chunk_per_worker(
            rs.random_sample((rows, COLS), chunks=(chunk, COLS)).astype("float32"), client)
        v = client.persist(rs.random_sample((COLS,), chunks=(COLS,)).astype("float32"))
        wait([x, v])
        table = {"sum": lambda: x.sum(), "mean0": lambda: x.mean(axis=0),
                 "std0": lambda: x.std(axis=0), "argmax": lambda: x.argmax(),
                 "matvec": lambda: x @ v, "cumsum0": lambda: x.cumsum(axis=0)}
        for op in ops:
            if op not in table:
                continue
            try:
                ts = []
                for i in range(reps + 2):
                    t0 = time.perf_counter()
                    r = client.persist(table[op]())
                    wait(r)
                    client.run(lambda: __import__("cupy").cuda.Device().synchronize())
                    if i >= 2:
                        ts.append(time.perf_counter() - t0)
                    del r
                out[op] = {"s": statistics.median(ts)}
            except Exception as e:
                out[op] = {"error": f"{type(e).__name__}: {e}"[:300]}
    finally:
        client.close()
        cluster.close()
    return out


# -------------------------------------------------------------------------------- report


def _records(scaling, g, impl, res, per_gpu_elems, copy):
    recs = []
    for op, r in res.items():
        rec = {"scaling": scaling, "gpus": g, "impl": impl, "op": op}
        if "error" in r:
            rec["error"] = r["error"]
        else:
            rec["wall_ms"] = r["s"] * 1e3
            if "host_s" in r:
                rec["host_ms"] = r["host_s"] * 1e3
            total = per_gpu_elems * g if scaling == "weak" else per_gpu_elems
            rec["gbps_per_gpu"] = _bytes(op, total) / r["s"] / 1e9 / g
            if copy:
                rec["of_copy"] = rec["gbps_per_gpu"] / copy
            for k in ("ok", "err"):
                if k in r:
                    rec[k] = r[k]
        recs.append(rec)
    return recs


def _markdown(meta, recs):
    lines = [f"# Sharded arrays on {meta['device']}", "",
             f"`{meta['command']}`; copy roofline {meta['copy_gbps']} GB/s per GPU.", "",
             "| scaling | op | GPUs | impl | wall ms | host ms | GB/s per GPU | of copy | check |",
             "|---|---|---:|---|---:|---:|---:|---:|---|"]
    for r in sorted(recs, key=lambda r: (r["scaling"], OPS.index(r["op"]), r["impl"], r["gpus"])):
        if "error" in r:
            lines.append(f"| {r['scaling']} | {LABELS[r['op']]} | {r['gpus']} | {r['impl']} | "
                         f"error: {r['error'][:80]} | | | | |")
            continue
        chk = "" if "ok" not in r else ("ok" if r["ok"] else f"DIFFERS ({r['err']:.1e})")
        frac = f"{r['of_copy']:.2f}" if "of_copy" in r else ""
        host = f"{r['host_ms']:.2f}" if "host_ms" in r else ""
        lines.append(f"| {r['scaling']} | {LABELS[r['op']]} | {r['gpus']} | {r['impl']} | "
                     f"{r['wall_ms']:.2f} | {host} | {r['gbps_per_gpu']:.4g} | {frac} | {chk} |")
    return "\n".join(lines) + "\n"


def _against(recs):
    """Markdown rows: forge_array's wall time against every other implementation's, per
    scaling, operation and GPU count where both ran."""
    lines = []
    by = {(r["scaling"], r["op"], r["gpus"], r["impl"]): r for r in recs if "wall_ms" in r}
    others = sorted({r["impl"] for r in recs} - {"forge_array"})
    for (scaling, op, g, impl), r in sorted(by.items(), key=lambda kv: (kv[0][0], OPS.index(kv[0][1]),
                                                                          kv[0][2])):
        if impl != "forge_array":
            continue
        for o in others:
            p = by.get((scaling, op, g, o))
            if p:
                lines.append(f"| {scaling} | {LABELS[op]} | {g} | {o} | {p['wall_ms'] / r['wall_ms']:.2f}x |")
    if not lines:
        return ""
    return ("\nforge_array's speed against each peer's (their wall time over ours; above 1: "
            "forge_array is faster):\n\n| scaling | op | GPUs | peer | speed |\n|---|---|---:|---|---:|\n"
            + "\n".join(lines) + "\n")


def combine(paths, out, tag):
    """One table, comparison and plot from several runs' JSON files of one machine (e.g.
    forge_array and JAX run one after the other, each with its own ``--ops``)."""
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f))
    devices = {r["meta"]["device"] for r in runs}
    if len(devices) != 1:
        sys.exit(f"suite_shard --combine: runs of different devices {sorted(devices)}")
    meta = dict(runs[0]["meta"])
    meta["command"] = "`; `".join(r["meta"]["command"] for r in runs)
    recs = [rec for r in runs for rec in r["results"]]
    folder = os.path.join(out, slug(meta["device"]))
    os.makedirs(folder, exist_ok=True)
    stem = "shard" + (f"-{tag}" if tag else "")
    with open(os.path.join(folder, f"{stem}.json"), "w") as f:
        json.dump({"meta": meta, "runs": [r["meta"] for r in runs], "results": recs}, f, indent=1)
    text = _markdown(meta, recs) + _against(recs)
    with open(os.path.join(folder, f"{stem}.md"), "w") as f:
        f.write(text)
    for scaling in sorted({r["scaling"] for r in recs}):
        _plot(os.path.join(folder, f"{stem}-{scaling}.png"), meta, recs, scaling)
    print(text)
    return 0


def _plot(path, meta, recs, scaling):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    ops = [o for o in OPS if any(r["op"] == o and r["scaling"] == scaling for r in recs)]
    if not ops:
        return None
    cols = 3
    fig, axes = plt.subplots(-(-len(ops) // cols), cols, figsize=(4 * cols, 3 * -(-len(ops) // cols)),
                             squeeze=False)
    for ax, op in zip(axes.flat, ops):
        for impl in ("forge_array", "jax", "dask"):
            pts = sorted((r["gpus"], r["gbps_per_gpu"]) for r in recs
                         if r["op"] == op and r["impl"] == impl and r["scaling"] == scaling
                         and "gbps_per_gpu" in r)
            if pts:
                ax.plot(*zip(*pts), marker="o", label=impl)
        if meta.get("copy_gbps"):
            ax.axhline(meta["copy_gbps"], color="grey", ls="--", lw=0.8, label="copy")
        ax.set_ylim(bottom=0)
        ax.set_title(LABELS[op])
        ax.set_xlabel("GPUs")
        ax.set_ylabel("GB/s per GPU")
        ax.set_xticks(sorted({r["gpus"] for r in recs}))
    for ax in list(axes.flat)[len(ops):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(f"{scaling} scaling, {meta['device']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------------- main


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.suite_shard", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="results folder (a folder per device below it)")
    p.add_argument("--gpus", default="1,2,4", help="GPU counts")
    p.add_argument("--per-gpu", default="2e9", help="float32 elements per GPU (weak) or in total (strong)")
    p.add_argument("--scaling", default="weak,strong")
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--impls", default="forge_array,jax,dask")
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--no-check", action="store_true", help="skip the unsharded reference runs")
    p.add_argument("--dry-run", action="store_true", help="the CPU listed several times, tiny sizes")
    p.add_argument("--tag", default="", help="appended to the file names (shard-TAG.json ...)")
    p.add_argument("--jax-timeout", type=float, default=240,
                   help="seconds for each GPU count's JAX run (a child process; ops not done "
                        "by then are recorded as over the limit)")
    p.add_argument("--combine", nargs="+", metavar="JSON",
                   help="no run: combine these runs' shard*.json files (one machine) into "
                        "shard-TAG.md/.json/-SCALING.png under --out")
    p.add_argument("--jax-child", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.combine:
        return combine(a.combine, a.out, a.tag)
    if a.jax_child:  # g,rows,ops,reps: one JAX run, its results as the last line of output
        g, rows, child_ops, reps = a.jax_child.split(":")
        run_jax(int(g), int(rows), child_ops.split(","), int(reps))
        return 0
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX beside CuPy's pool
    gpus = [int(s) for s in a.gpus.split(",")]
    ops = [o for o in a.ops.split(",") if o]
    for o in ops:
        if o not in OPS:
            p.error(f"unknown op {o!r}; known: {', '.join(OPS)}")
    per_gpu = int(float(a.per_gpu))
    if a.dry_run:
        per_gpu = min(per_gpu, 10**4)
    dev = Devices(a.dry_run)
    have = dev.count()
    if max(gpus) > have:
        sys.exit(f"suite_shard: --gpus {a.gpus} needs {max(gpus)} GPUs, {have} visible")
    os.environ.setdefault("FORGE_ARRAY_COMPILE", "sync")
    if a.dry_run:
        os.environ.setdefault("FORGE_ARRAY_DEVICE", "cpu")
    import forge_array as xp

    impls = [i for i in a.impls.split(",") if i]
    avail = {"forge_array": True,
             "jax": not a.dry_run and _importable("jax"),
             "dask": not a.dry_run and _importable("dask_cuda") and _importable("distributed")}
    copy = dev.copy_gbps(4 * per_gpu, a.reps)
    meta = {"device": dev.name(), "command": "python -m bench.suite_shard " + " ".join(argv or sys.argv[1:]),
            "gpus_visible": have, "per_gpu": per_gpu, "copy_gbps": None if copy is None else round(copy),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S"), "impls": {k: avail[k] for k in impls}}
    recs = []
    folder = os.path.join(a.out, slug(meta["device"]))
    os.makedirs(folder, exist_ok=True)
    stem = "shard" + (f"-{a.tag}" if a.tag else "")

    def save():  # after every run, so that a run cut short still leaves its figures
        with open(os.path.join(folder, f"{stem}.json"), "w") as f:
            json.dump({"meta": meta, "results": recs}, f, indent=1)
        with open(os.path.join(folder, f"{stem}.md"), "w") as f:
            f.write(_markdown(meta, recs))

    for scaling in a.scaling.split(","):
        ref = None
        if scaling == "strong" and not a.no_check:
            rows = max(1, per_gpu // COLS)
            r0 = run_forge(xp, dev, 1, rows, ops, 1, same_data=True)  # one block, one device
            ref = {op: r["_sample"] for op, r in r0.items() if "_sample" in r}
        for impl in impls:  # every GPU count of one implementation, then the next
            if not avail.get(impl):
                continue
            for g in gpus:
                total = per_gpu * g if scaling == "weak" else per_gpu
                rows = max(g, total // COLS)
                print(f"[shard] {scaling} {impl} on {g} GPU(s), {rows} x {COLS}", flush=True)
                try:
                    if impl == "forge_array":
                        res = run_forge(xp, dev, g, rows, ops, a.reps, ref, scaling == "strong")
                    elif impl == "jax":
                        res = run_jax_child(g, rows, ops, a.reps, a.jax_timeout)
                    else:
                        res = run_dask(g, rows, ops, a.reps)
                except Exception as e:
                    res = {op: {"error": f"{type(e).__name__}: {e}"[:300]} for op in ops}
                dev.free(g)
                new = _records(scaling, g, impl, res, (per_gpu // COLS) * COLS, copy)
                for r in new:
                    print(f"[shard]   {LABELS[r['op']]}: " + (r["error"][:100] if "error" in r else
                          f"{r['wall_ms']:.2f} ms"), flush=True)
                recs += new
                save()
    for scaling in a.scaling.split(","):
        _plot(os.path.join(folder, f"{stem}-{scaling}.png"), meta, recs, scaling)
    print(_markdown(meta, recs))
    bad = [r for r in recs if r.get("ok") is False]
    return 1 if bad else 0


def _importable(name):
    try:
        __import__(name)
        return True
    except Exception:
        return False


if __name__ == "__main__":
    sys.exit(main())
