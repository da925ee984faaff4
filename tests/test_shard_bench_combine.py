"""``python -m bench.suite_shard --combine``: runs of one machine in one table, with
forge_array's speed against each peer (their wall time over ours), and the refusal to mix
machines."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import suite_shard  # noqa: E402


def _run(path, impl, walls, device="GPU X", ops=("sum", "argmax")):
    recs = [{"scaling": "weak", "gpus": g, "impl": impl, "op": op, "wall_ms": w,
             "gbps_per_gpu": 100.0 / w, "of_copy": 0.5}
            for op in ops for g, w in walls.items()]
    meta = {"device": device, "command": f"python -m bench.suite_shard --impls {impl}",
            "copy_gbps": 200, "per_gpu": 10}
    path.write_text(json.dumps({"meta": meta, "results": recs}))
    return str(path)


def test_combine_puts_runs_in_one_table_with_speeds(tmp_path, capsys):
    a = _run(tmp_path / "a.json", "forge_array", {1: 2.0, 4: 2.5})
    b = _run(tmp_path / "b.json", "jax", {1: 3.0, 4: 2.0}, ops=("sum",))
    assert suite_shard.main(["--out", str(tmp_path / "out"), "--combine", a, b]) == 0
    md = (tmp_path / "out" / "gpu-x" / "shard.md").read_text()
    assert "| weak | sum | 1 | jax | 1.50x |" in md      # 3.0 / 2.0
    assert "| weak | sum | 4 | jax | 0.80x |" in md      # 2.0 / 2.5
    assert "| weak | argmax | 1 | jax" not in md         # JAX did not run argmax
    assert "--impls forge_array`; `python -m bench.suite_shard --impls jax" in md
    data = json.loads((tmp_path / "out" / "gpu-x" / "shard.json").read_text())
    assert len(data["results"]) == 6 and len(data["runs"]) == 2


def test_combine_refuses_runs_of_different_machines(tmp_path):
    a = _run(tmp_path / "a.json", "forge_array", {1: 2.0})
    b = _run(tmp_path / "b.json", "jax", {1: 3.0}, device="GPU Y")
    with pytest.raises(SystemExit, match="different devices"):
        suite_shard.main(["--out", str(tmp_path / "out"), "--combine", a, b])
