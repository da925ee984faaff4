"""Which element-wise operations fuse, and the source template of each (data only: the
expression layer consults it without loading the code generator or numba).

>>> from forge_array.fusion.fusible import BINARY, UNARY
>>> BINARY["add"].format("a", "b")
'a + b'
"""

from __future__ import annotations

__all__ = ["BINARY", "UNARY", "FLOAT_ONLY", "INT_EAGER"]

#: element-wise binary operations that fuse: name -> source template
BINARY = {
    "add": "{0} + {1}", "subtract": "{0} - {1}", "multiply": "{0} * {1}",
    "divide": "{0} / {1}", "pow": "{0} ** {1}",
    "maximum": "_maximum({0}, {1})", "minimum": "_minimum({0}, {1})",
    "atan2": "_m.atan2({0}, {1})", "hypot": "_m.hypot({0}, {1})",
    "copysign": "_m.copysign({0}, {1})",
    "bitwise_and": "{0} & {1}", "bitwise_or": "{0} | {1}", "bitwise_xor": "{0} ^ {1}",
    "logical_and": "({0} and {1})", "logical_or": "({0} or {1})", "logical_xor": "({0} != {1})",
    "equal": "({0} == {1})", "not_equal": "({0} != {1})", "less": "({0} < {1})",
    "less_equal": "({0} <= {1})", "greater": "({0} > {1})", "greater_equal": "({0} >= {1})",
}

#: element-wise unary operations that fuse: name -> source template
UNARY = {
    "negative": "-{0}", "positive": "{0}", "abs": "abs({0})", "square": "{0} * {0}",
    "reciprocal": "_one / {0}", "sign": "_sign({0})",
    "isnan": "({0} != {0})", "isinf": "_m.isinf({0})", "isfinite": "_m.isfinite({0})",
    "signbit": "(_m.copysign(1.0, {0}) < 0.0)", "logical_not": "(not {0})",
    "bitwise_invert": "~{0}",
    **{n: "_m." + n + "({0})" for n in (
        "sqrt", "exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "sinh",
        "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh")},
}

#: operations not fused for integer dtypes (they run eagerly): on the H200 min reductions
#: of a negated integer come out wrong for 32-bit values (see "Known issue" in
#: docs/reductions.md: the generic ``mapreduce(lambda v: -v, ops.minimum, x)`` of int32 as
#: well, so the fault is below the fusion layer; the simulator is exact)
INT_EAGER = frozenset(["negative"])

#: operations fused for floating-point dtypes only (others run eagerly)
FLOAT_ONLY = frozenset(
    ["divide", "pow", "atan2", "hypot", "copysign", "reciprocal", "isinf", "isfinite",
     "signbit", "sqrt", "exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan",
     "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh"])
