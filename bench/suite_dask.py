"""dask: dask.array of CuPy chunks, plain CuPy against forge_array's kernels under Dask.

    python -m bench.suite_dask                               # 10^9 float32, both shapes, threads + cluster
    python -m bench.suite_dask --n 1e8 --chunk 1e7 --schedulers threads --reps 5
    python -m bench.suite_dask --schedulers cluster --workers 1,2 --out "$OUT"
    python -m bench.suite_dask --gpus 1,2,4 --scaling weak   # LocalCUDACluster, one worker per GPU

Per shape (``--shapes``, ``rows x cols`` at ``--n`` elements in chunks of ``--chunk``
elements), scheduler and configuration, every operation (``sum``, ``mean(axis=0)``,
``std(axis=0)``, ``argmax``, ``cumsum(axis=0)``, ``x @ v``, and ``none``: a graph that only
passes every chunk through, the scheduler's own time) runs ``--reps`` times in each mode on
an array persisted in GPU memory, the modes alternating run by run after one unrecorded run
of each, in the order ABBA (plain first in even pairs, forge_array first in odd ones: what a
run leaves behind, such as a cluster freeing the previous result, falls on both modes).  A
run is wall-clock from ``persist()`` to its last task having synchronised the device (with
this process's garbage collector paused), and the median is kept.  ``plain``:
CuPy's own chunk functions; ``forge_array``: the same cluster with CuPy patched (the worker
plugin of :mod:`forge_array.dask`, or :func:`forge_array.dask.patched` for the threaded
scheduler).  Each run gives its input a fresh graph name (an identity ``map_blocks``), so
nothing is served from an earlier run.  Results are compared (allclose; argmax exact).
GB/s counts the array read once per operation (and written once for ``cumsum``); ``copy
GB/s`` is one GPU's device-to-device copy rate measured in the same run.

Schedulers: ``threads`` (one process), ``cluster`` (``distributed.LocalCluster`` with
``--workers`` worker processes on the one GPU), ``cuda`` (dask-cuda's ``LocalCUDACluster``,
one worker per GPU; ``--gpus`` lists the GPU counts, ``--scaling weak`` keeps ``--n`` per
GPU, ``strong`` keeps it in total). Writes ``dask.json`` and ``dask.md`` under
``<out>/<device-slug>/``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import uuid

import numpy as np

from .backends import slug

OPS = ("none", "sum", "mean0", "std0", "argmax", "cumsum0", "matvec")
LABELS = {"none": "(no operation)", "sum": "sum", "mean0": "mean(axis=0)", "std0": "std(axis=0)", "argmax": "argmax",
          "cumsum0": "cumsum(axis=0)", "matvec": "x @ v"}


def _same_block(b):
    return b


def _op(name, x, v):
    if name == "none":   # the scheduler's own time for a graph over every chunk
        return x
    if name == "sum":
        return x.sum()
    if name == "mean0":
        return x.mean(axis=0)
    if name == "std0":
        return x.std(axis=0)
    if name == "argmax":
        return x.argmax()
    if name == "cumsum0":
        return x.cumsum(axis=0)
    if name == "matvec":
        return x @ v
    raise ValueError(name)


def _sample(name, r):
    """What is compared: the whole result, or for cumsum its last row and a middle row."""
    if name == "cumsum0":
        return [r[-1], r[r.shape[0] // 2]]
    if name == "none":
        return [r[:2]]
    return [r]


def _gather(client, arrays):
    import dask

    if client is None:
        return [np.asarray(a.get() if hasattr(a, "get") else a) for a in dask.compute(*arrays, scheduler="threads")]
    return [np.asarray(a.get() if hasattr(a, "get") else a) for a in client.compute(list(arrays), sync=True)]


def _sync_all(client):
    import cupy

    if client is None:
        cupy.cuda.Device().synchronize()
    else:
        client.run(lambda: __import__("cupy").cuda.Device().synchronize())


def _persist(client, arr):
    import distributed

    if client is None:
        return arr.persist(scheduler="threads")
    y = client.persist(arr)
    distributed.wait(y)
    return y


def _copy_gbps(n=10**9):
    import cupy

    a = cupy.ones(n // 4, dtype=cupy.float32)
    b = cupy.empty_like(a)
    ts = []
    for _ in range(6):
        s, e = cupy.cuda.Event(), cupy.cuda.Event()
        s.record()
        b[...] = a
        e.record()
        e.synchronize()
        ts.append(cupy.cuda.get_elapsed_time(s, e) / 1e3)
    return 2 * a.nbytes / statistics.median(ts[1:]) / 1e9


def _make(client, rows, cols, chunk_rows, seed):
    import cupy
    import dask.array as da

    rs = da.random.RandomState(seed=seed, RandomState=cupy.random.RandomState)
    x = rs.random_sample((rows, cols), chunks=(chunk_rows, cols)).astype("float32")
    v = rs.random_sample((cols,), chunks=(cols,)).astype("float32")
    return _persist(client, x), _persist(client, v)


def _set_patch(client, on, state):
    """Patch (or restore) CuPy where the chunks run."""
    import forge_array.dask as fdask

    if client is None:
        if on:
            state["ctx"] = fdask.patched()
            state["report"] = state["ctx"].__enter__()
            return state["report"]["patched"]
        if "ctx" in state:
            state.pop("ctx").__exit__(None, None, None)
        return False
    if on:
        st = fdask.register(client)
        state["registered"] = True
        return all(s["patched"] for s in st.values())
    if state.pop("registered", False):
        if any(st["patched"] for st in fdask.unregister(client).values()):
            raise RuntimeError("CuPy stays patched on a worker: plain runs would not be plain")
    return False


def _synced(b):
    """``b`` once the device has finished everything queued so far (the last task of a
    timed graph: the result is then really computed when the scheduler says so)."""
    import cupy

    cupy.cuda.Device().synchronize()
    return b


def _timed(client, name, x, v):
    # a fresh name per run: the scheduler would hand back the results of a graph it still
    # holds instead of computing them again
    xr = x.map_blocks(_same_block, dtype=x.dtype, name=f"x-{uuid.uuid4().hex}")
    y = _op(name, xr, v)
    y = y.map_blocks(_synced, dtype=y.dtype)
    gc.collect()   # no collection of this process's garbage inside the timed run
    gc.disable()
    try:
        t0 = time.perf_counter()
        y = _persist(client, y)
        return time.perf_counter() - t0, y
    finally:
        gc.enable()


def run_config(sched, client, rows, cols, chunk_elems, ops, reps, seed=0):
    """Every operation ``reps`` times in each mode, the modes alternating run by run (after
    one unrecorded run of each), each mode first in every other pair, so that both see the
    same state of the machine."""
    chunk_rows = max(1, chunk_elems // cols)
    x, v = _make(client, rows, cols, chunk_rows, seed)
    out = {}
    state = {}
    for name in ops:
        ts = {"plain": [], "forge_array": []}
        got = {}
        for rep in range(reps + 1):
            for mode in ("plain", "forge_array")[::1 if rep % 2 == 0 else -1]:
                on = mode == "forge_array"
                active = _set_patch(client, on, state)
                if on and not active:
                    print(f"  {sched}: forge_array not active on the workers", file=sys.stderr)
                _sync_all(client)
                t, y = _timed(client, name, x, v)
                if rep:
                    ts[mode].append(t)
                if rep == reps:
                    got[mode] = _gather(client, _sample(name, y))
                del y
        _set_patch(client, False, state)
        for mode in ("plain", "forge_array"):
            if mode == "plain" or name == "none":
                err, ok = 0.0, True
            elif name == "argmax":
                ok = all(np.array_equal(a, b) for a, b in zip(got[mode], got["plain"]))
                err = 0.0 if ok else 1.0
            else:
                err = max(float(np.max(np.abs(a.astype(np.float64) - b) / (np.abs(b) + 1e-6)))
                          for a, b in zip(got[mode], got["plain"]))
                ok = all(np.allclose(a, b, rtol=1e-3, atol=1e-3)
                         for a, b in zip(got[mode], got["plain"]))
            med = statistics.median(ts[mode])
            out.setdefault(name, {})[mode] = {"median_s": med, "min_s": min(ts[mode]),
                                              "reps": len(ts[mode]), "max_rel_err": err,
                                              "check": ok, "times_s": ts[mode]}
            print(f"  {sched} {rows}x{cols} {LABELS[name]:>15} {mode:>11}: "
                  f"{med * 1e3:9.2f} ms{'' if ok else '  MISMATCH'}", flush=True)
    return out


def paired_ratios(plain, forge):
    """Quartiles of the speed-ups of the runs taken in pairs (plain run ``k`` over forge_array
    run ``k``, which ran beside it) and the share of pairs forge_array won: how far the
    median speed-up stands from the scheduler's run-to-run noise.

    >>> paired_ratios([2.0, 2.0, 2.0, 2.0], [1.0, 1.0, 4.0, 2.0])["won"]
    0.5
    """
    r = sorted(p / f for p, f in zip(plain, forge))
    q = statistics.quantiles(r, n=4) if len(r) >= 2 else r * 3
    return {"q1": q[0], "median": statistics.median(r), "q3": q[2],
            "won": sum(x > 1.0 for x in r) / len(r)}


def _bytes(name, rows, cols):
    n = rows * cols * 4
    return 2 * n if name == "cumsum0" else n


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.suite_dask", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", default="1e9", help="elements (per GPU with --scaling weak)")
    p.add_argument("--chunk", default="1e8", help="elements per chunk")
    p.add_argument("--shapes", default="x100,x1e4",
                   help="comma-separated 'x<cols>' (rows = n / cols) or '<rows>x<cols>'")
    p.add_argument("--schedulers", default="threads,cluster", help="threads, cluster, cuda")
    p.add_argument("--workers", default="1", help="worker processes of the 'cluster' scheduler")
    p.add_argument("--gpus", default="1", help="GPU counts of the 'cuda' scheduler")
    p.add_argument("--scaling", default="weak", choices=("weak", "strong"))
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    a = p.parse_args(argv)

    import cupy
    import dask
    import distributed

    import forge_array

    n, chunk = int(float(a.n)), int(float(a.chunk))
    ops = [o for o in a.ops.split(",") if o]
    props = cupy.cuda.runtime.getDeviceProperties(0)
    gpu = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    copy = _copy_gbps()
    print(f"{gpu}: copy {copy:.0f} GB/s; dask {dask.__version__}, distributed {distributed.__version__}")
    results = {"gpu": gpu, "copy_gbps": copy, "date": time.strftime("%Y-%m-%d"),
               "versions": {"dask": dask.__version__, "distributed": distributed.__version__,
                            "cupy": cupy.__version__, "forge_array": forge_array.__version__},
               "args": vars(a), "runs": []}

    def shapes(total):
        for s in a.shapes.split(","):
            r, c = s.split("x")
            c = int(float(c))
            yield (int(float(r)) if r else total // c), c

    for sched in a.schedulers.split(","):
        configs = []
        if sched == "threads":
            configs = [(1, None)]
        elif sched == "cluster":
            configs = [(int(w), "cluster") for w in a.workers.split(",")]
        elif sched == "cuda":
            configs = [(int(g), "cuda") for g in a.gpus.split(",")]
        for count, kind in configs:
            total = n * count if (kind == "cuda" and a.scaling == "weak") else n
            cluster = client = None
            if kind == "cluster":
                cluster = distributed.LocalCluster(n_workers=count, threads_per_worker=1,
                                                   processes=True, dashboard_address=None)
            elif kind == "cuda":
                from dask_cuda import LocalCUDACluster

                cluster = LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(map(str, range(count))),
                                           dashboard_address=None)
            if cluster is not None:
                client = distributed.Client(cluster)
            try:
                for rows, cols in shapes(total):
                    res = run_config(f"{sched}[{count}]", client, rows, cols, chunk, ops, a.reps)
                    for name, modes in res.items():
                        gb = _bytes(name, rows, cols) / 1e9
                        for m in modes.values():
                            m["gbps"] = gb / m["median_s"]
                            m["gbps_per_gpu"] = m["gbps"] / (count if kind == "cuda" else 1)
                        results["runs"].append({
                            "scheduler": sched, "count": count, "shape": [rows, cols], "op": name,
                            "plain": modes["plain"], "forge_array": modes["forge_array"],
                            "speedup": modes["plain"]["median_s"] / modes["forge_array"]["median_s"],
                            "paired": paired_ratios(modes["plain"]["times_s"],
                                                    modes["forge_array"]["times_s"])})
            finally:
                if client is not None:
                    client.close()
                    cluster.close()

    folder = os.path.join(a.out, slug(gpu))
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "dask.json"), "w") as f:
        json.dump(results, f, indent=1)
    lines = [f"# dask.array of CuPy chunks: plain CuPy against forge_array ({gpu}, {results['date']})", "",
             f"`python -m bench.suite_dask {' '.join(argv or sys.argv[1:])}`; wall-clock medians of "
             f"{a.reps} runs, plain and forge_array alternating run by run (ABBA); each run from the "
             "graph's submission to its last task having synchronised the device; `(no "
             "operation)`: a graph that only passes every chunk through, the scheduler's own "
             f"time; one GPU's copy rate {copy:.0f} GB/s. Paired: the speed-ups of the runs "
             "taken in pairs (each plain run over the forge_array run beside it), their "
             "quartiles and the share of pairs forge_array won.", "",
             "| scheduler | workers/GPUs | shape | operation | plain ms | forge_array ms | speed-up | "
             "paired q1–q3 | pairs won | forge_array GB/s per GPU | of copy | check |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["runs"]:
        fa, pl = r["forge_array"], r["plain"]
        # a graph with no operation reads nothing: no bandwidth
        rate = ("– | –" if r["op"] == "none" else
                f"{fa['gbps_per_gpu']:.0f} | {fa['gbps_per_gpu'] / copy:.2f}")
        lines.append(f"| {r['scheduler']} | {r['count']} | {r['shape'][0]:.0e}x{r['shape'][1]} | "
                     f"{LABELS[r['op']]} | {pl['median_s'] * 1e3:.1f} | {fa['median_s'] * 1e3:.1f} | "
                     f"{r['speedup']:.2f}x | {r['paired']['q1']:.2f}–{r['paired']['q3']:.2f} | "
                     f"{r['paired']['won']:.0%} | {rate} | {'ok' if fa['check'] else 'MISMATCH'} |")
    with open(os.path.join(folder, "dask.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(r["forge_array"]["check"] for r in results["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
