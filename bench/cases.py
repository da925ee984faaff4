"""Bench cases: :class:`Case` (a measurement point), :class:`Impl` (one implementation of it),
:class:`Skip`, sweeps of shapes, and the helpers results are written with.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import numpy as np

L2_BYTES_DEFAULT = 60 * 2**20
CANONICAL_IMPLS = ("forge_array", "cupy", "numpy", "torch", "cuda.compute")
PEERS = ("cupy", "numpy", "torch", "cuda.compute")


# --------------------------------------------------------------------------- cases


class Skip(Exception):
    """Raised by a builder to skip an implementation with a reason (not an error)."""


@dataclasses.dataclass
class Impl:
    """An implementation with options; a bare builder means ``Impl(builder)``.

    ``check=False``: its output is not comparable with the reference (e.g. a
    different operation shown for comparison). ``note``: shown in the report.
    """

    builder: Callable[..., Callable[[], Any]]
    check: bool = True
    note: str = ""


@dataclasses.dataclass
class Case:
    suite: str
    name: str  # the series: cases with the same name form a line over size
    size: int  # elements (of the main input)
    bytes_moved: int  # minimal traffic: inputs read once + outputs written once
    make_inputs: Callable[[int], tuple]  # seed -> tuple of device arrays
    impls: dict[str, Any]  # name -> builder or Impl
    shape: tuple = ()
    dtype: str = ""
    params: dict = dataclasses.field(default_factory=dict)
    reference: str = "cupy"  # impl whose output the others are checked against
    input_bytes: int = 0  # bytes of one set of inputs (for L2 rotation); 0: bytes_moved
    mem_bytes: int = 0  # peak device memory estimate; 0: 4 x bytes_moved
    note: str = ""
    rtol: float | None = None  # check tolerance; None: by output dtype
    checker: Callable[[Any, Any], tuple] | None = None  # (out, ref) -> (err, ok); None: compare()

    @property
    def label(self) -> str:
        if self.shape and len(self.shape) > 1:
            return f"{self.name} {fmt_shape(self.shape)}"
        return f"{self.name} n={fmt_count(self.size)}"


def fmt_count(n: int) -> str:
    if n >= 10 and 10 ** round(math.log10(n)) == n:
        return f"1e{round(math.log10(n))}"
    return str(n)


def fmt_shape(shape: Sequence[int]) -> str:
    return "(" + ",".join(fmt_count(int(s)) for s in shape) + ")"


def shape_sweep(total_exp: int, first: int = 1) -> list[tuple[int, int]]:
    """(10^k, 10^(total-k)) for k = first .. total-first: tall to wide at fixed size."""
    return [(10**k, 10 ** (total_exp - k)) for k in range(first, total_exp - first + 1)]



def _short_error(exc: BaseException) -> str:
    msg = f"{type(exc).__name__}: {exc}".strip()
    msg = " ".join(msg.split())
    return msg if len(msg) <= 400 else msg[:397] + "..."



def _jsonable(v):
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (tuple, list)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (np.integer, np.floating)):
        return v.item()
    return str(v)


