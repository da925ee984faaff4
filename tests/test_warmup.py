"""``python -m forge_array warmup``: every standard operation once per dtype and layout class
(in the simulator in CI, with tiny shapes), combinations the standard rejects skipped, bad
arguments refused."""

import io

import pytest

import forge_array as xp
from forge_array import __main__ as cli
from forge_array._warmup import OPS, warmup
from forge_array.runtime import config

#: where our kernels run: the simulator's CPU arrays in CI, else the GPU
DEV = "cpu" if config.SIMULATE else "cuda:0"


def test_warmup_runs_every_layout_class():
    out = io.StringIO()
    r = warmup(dtypes=("float32", "int32"), ops=("sum", "mean", "cumulative_sum", "matmul"), device=DEV,
               sizes=(40,), shapes=[(8, 12)], out=out)
    # sum, cumulative_sum: 1 size + 2 axes each; mean: 3 for float32, skipped for int32; matmul: 2
    assert r["calls"] == 2 * (3 + 3 + 2) + 3
    assert r["skipped"] == 3
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[1/8] sum float32 n=40")
    assert any("skipped" in ln for ln in lines if "mean int32" in ln)


def test_row_classes_take_every_rows_per_block_of_the_multi_row_kernel():
    from forge_array._warmup import ROW_CLASS_COLUMNS, _row_class_shapes
    from forge_array.dispatch.axis_reduce.plan import _rows_per_block
    from forge_array.runtime import tuning

    most = tuning.params("rowcol")["row_multi"]
    shapes = _row_class_shapes()
    assert len(shapes) == (most - 1) * len(ROW_CLASS_COLUMNS)
    assert sorted({_rows_per_block(nr, most) for nr, _ in shapes}) == list(range(2, most + 1))
    assert {cols for _, cols in shapes} == set(ROW_CLASS_COLUMNS)


def test_warmup_refuses_unknown_names():
    with pytest.raises(ValueError, match="unknown operations"):
        warmup(ops=("sum", "median"), device=xp.cpu)
    with pytest.raises(ValueError, match="unknown dtypes"):
        warmup(dtypes=("float128x",), device=xp.cpu)
    assert "matmul" in OPS and "cumulative_prod" in OPS


def test_warmup_command(capsys):
    rc = cli.main(["warmup", "--dtypes", "float64", "--ops", "max,argmax", "--sizes", "33",
                   "--shape", "5,7", "--device", DEV, "--jobs", "1"])
    assert rc == 0
    captured = capsys.readouterr()
    assert "warmup: 6 calls (0 skipped)" in captured.out
    assert "[2/2] argmax float64 axis=1 (5, 7)" in captured.err


def test_warmup_shares_the_pairs_among_processes():
    out = io.StringIO()
    r = warmup(dtypes=("float64", "int64"), ops=("sum", "argmax"), device=DEV, sizes=(17,),
               shapes=[(3, 5)], out=out, jobs=2)
    assert (r["calls"], r["skipped"]) == (12, 0)
    lines = out.getvalue().splitlines()
    assert sum(ln.startswith("[") for ln in lines) == 12
    assert any("argmax int64 axis=1 (3, 5)" in ln for ln in lines)


def test_units_take_the_heaviest_pairs_first_and_cut_them():
    from forge_array._warmup import SPLIT, _units

    units = _units([("sum", "float32"), ("matmul", "float32"), ("cumulative_sum", "int32"), ("operators", "int64")])
    assert [u[0] for u in units[:SPLIT["operators"]]] == ["operators"] * SPLIT["operators"]
    assert [u[2:] for u in units if u[0] == "matmul"] == [(i, SPLIT["matmul"]) for i in range(SPLIT["matmul"])]
    assert units[-2:] == [("cumulative_sum", "int32", 0, 1), ("sum", "float32", 0, 1)]


def test_a_worker_runs_each_unit_it_is_given_and_answers_in_json():
    import json

    from forge_array._warmup import Layouts, serve

    inp = io.StringIO("sum float64 0 1 1 3\nmatmul float64 0 2 2 3\nmatmul float64 1 2 3 3\n")
    out, progress = io.StringIO(), io.StringIO()
    serve(Layouts((9,), ((4, 6),)), DEV, inp, out, progress)
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    # sum: 1 size + 2 axes; matmul's two calls (A @ v, v @ A) split between the two parts
    assert [a["calls"] for a in answers] == [3, 1, 1]
    lines = progress.getvalue().splitlines()
    assert lines[0].startswith("[1/3] sum float64 n=9") and lines[-1].startswith("[3/3] matmul float64 v @ A")


def test_warmup_views_add_every_layout_class():
    out = io.StringIO()
    r = warmup(dtypes=("float32",), ops=("sum", "matmul"), device=DEV, sizes=(1, 9), shapes=[(4, 6), (3, 2)],
               out=out, views=True)
    # sum: 2 sizes + 3 1-D views + 2 shapes x 4 matrices x 2 axes; matmul: 2 shapes x 4 matrices x 2
    assert (r["calls"], r["skipped"]) == (2 + 3 + 16 + 16, 0)
    text = out.getvalue()
    for label in ("x[1:] n=9", "x[::2] n=9", "x[::-1] n=9", "axis=1 (4, 6) transposed", "(3, 2) [:, 1:]",
                  "A @ v (4, 6) [::2]", "v @ A (3, 2) transposed"):
        assert label in text


def test_warmup_command_takes_several_shapes_and_all_dtypes(capsys):
    rc = cli.main(["warmup", "--dtypes", "all", "--ops", "max", "--sizes", "5", "--shape", "2x3,3x2",
                   "--device", DEV, "--jobs", "1"])
    assert rc == 0
    captured = capsys.readouterr()
    assert "max complex128" in captured.err and "max bool axis=0 (3, 2)" in captured.err
