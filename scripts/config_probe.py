"""Configurations timed side by side (session 17): each round runs every configuration of
``PROBE_CONFIGS`` (JSON list of [name, FORGE_ARRAY_TUNING overrides, optionally a directory
put first on PYTHONPATH: an archive of another commit of the package]) in a fresh process that
times the cases below event-timed from an idle GPU (the bench's method) and behind a busy GPU
(the kernels alone), 300 calls each, rotating over 4 copies of each input (cold L2); rounds
interleave the configurations so that a drifting machine moves them all alike.
PROBE_ROUNDS (default 3) rounds. Run on the GPU machine: python3 scripts/config_probe.py"""
import json
import os
import subprocess
import sys

CASES = {
    "sum (1e3)": ("sf", 1, 1000),
    "x@A (1e4,1e3)": ("xA", 10**4, 10**3),
    "x@A (1e3,1e4)": ("xA", 10**3, 10**4),
    "x@A (1e5,1e2)": ("xA", 10**5, 100),
    "A@x (1e5,1e2)": ("Ax", 10**5, 100),
    "A@x (1e3,1e4)": ("Ax", 10**3, 10**4),
    "sum0 (1e3,1e5)": ("s0", 10**3, 10**5),
    "sum0 (1e4,1e4)": ("s0", 10**4, 10**4),
}


def child(names):
    import itertools

    import cupy as cp
    import torch

    import forge_array as xp
    from bench.hosttime import event_us
    torch_too = os.environ.get("PROBE_TORCH") == "1"
    for name in names:
        kind, n, p = CASES[name]
        cAs = [cp.random.random((n, p), dtype=cp.float32) for _ in range(4)]
        As = itertools.cycle([xp.asarray(a) for a in cAs])
        tAs = itertools.cycle([torch.as_tensor(a, device="cuda") for a in cAs])
        v, u = xp.asarray(cp.random.random(p, dtype=cp.float32)), xp.asarray(cp.random.random(n, dtype=cp.float32))
        tv, tu = torch.as_tensor(cp.asarray(v), device="cuda"), torch.as_tensor(cp.asarray(u), device="cuda")
        f = {"xA": lambda: u @ next(As), "Ax": lambda: next(As) @ v, "s0": lambda: xp.sum(next(As), axis=0),
             "sf": lambda: xp.sum(next(As))}[kind]
        g = {"xA": lambda: tu @ next(tAs), "Ax": lambda: next(tAs) @ tv, "s0": lambda: next(tAs).sum(0),
             "sf": lambda: next(tAs).sum()}[kind]
        for h in (f, g) if torch_too else (f,):
            h()
            h()
            print(json.dumps([name, "torch" if h is g else "ours", event_us(h, 300), event_us(h, 300, busy=True)]),
                  flush=True)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    configs = json.loads(os.environ["PROBE_CONFIGS"])
    names = [c for c in os.environ.get("PROBE_CASES", ",".join(CASES)).split(";") if c] \
        if "PROBE_CASES" in os.environ else list(CASES)
    rounds = int(os.environ.get("PROBE_ROUNDS", "3"))
    res = {}
    for r in range(rounds):
        for k, (cname, over, *path) in enumerate(configs):
            env = dict(os.environ, FORGE_ARRAY_TUNING=json.dumps(over), PROBE_TORCH="1" if k == 0 else "0")
            if path:   # another tree of the package (e.g. an archive of an earlier commit)
                env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(path[0]), env.get("PYTHONPATH", "")])
            out = subprocess.run([sys.executable, __file__, "--child", *names], env=env,
                                 capture_output=True, text=True, timeout=300)
            if out.returncode:
                print(cname, "failed:", out.stderr[-2000:], flush=True)
                continue
            for line in out.stdout.splitlines():
                case, who, idle, busy = json.loads(line)
                label = "torch" if who == "torch" else cname
                res.setdefault((case, label), []).append((idle, busy))
        print(f"round {r + 1} done", flush=True)
    print(f"{'case':18s} {'config':28s} idle (per round)          busy (per round)")
    for (case, label), v in sorted(res.items()):
        print(f"{case:18s} {label:28s} " + " ".join(f"{i:6.1f}" for i, _ in v) + "   |  "
              + " ".join(f"{b:6.1f}" for _, b in v))


if __name__ == "__main__":
    main()
