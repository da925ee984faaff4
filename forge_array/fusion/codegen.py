"""From expressions to numba-compilable functions of their leaves.

:func:`linearize` walks the expressions of one launch and returns a *program* — a tuple of
instructions, the structural key of the launch — with the leaves in the order they were
met; :func:`function_of` turns a program into a plain Python function of the leaves
(``f(l0, l1, ...) -> (out0, out1, ...)``) that the kernels compile inline.  Functions are
cached by program, so equal expressions over new arrays reuse the compiled kernels (never
keyed by Python object identity).

Each step computes in its own result dtype, as eager evaluation does: operands are
converted to the promoted dtype first, and the result is converted to the step's dtype
(``int8 + int8`` wraps).  Floating-point steps are compiled as written; numba lets LLVM
contract ``a * b + c`` into one fused multiply-add, so a fused float result may differ
from the eager one by the rounding of that contraction.

>>> import numpy as np
>>> from forge_array.fusion.expr import Const, Leaf, Node
>>> f64 = np.dtype("float64")
>>> x = Leaf(np.arange(3.0))
>>> e = Node("add", (Node("multiply", (x, x), f64, (3,), f64), Const(1.0, f64)), f64, (3,), f64)
>>> program, leaves = linearize([e])
>>> function_of(program)(2.0)
(np.float64(5.0),)
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from .. import intrinsics as _fi
from .. import ops as _ops
from ..runtime.build_process import rebuilt_by
from ..runtime.caches import Cache
from ..runtime.config import SIMULATE
from .expr import PLAIN, Const, Node, const_key
from .fusible import BINARY, UNARY

__all__ = ["linearize", "function_of", "source_of", "ConstantsVary", "MAX_CONSTANT_SETS"]

#: sets of constants one expression structure is compiled with before plain code computes
#: that structure eagerly: constants are compiled into the kernels, so a line whose Python
#: scalar changes from call to call (a loop over a learning rate) would compile one kernel
#: per value (0.4-1.3 s each on the H200's host)
MAX_CONSTANT_SETS = 2


class ConstantsVary(Exception):
    """Plain code would compile a structure with yet another set of constants (see
    :data:`MAX_CONSTANT_SETS`): its settlement computes it eagerly instead."""


#: a program with its constants left out -> how many programs of it were compiled
_STRUCTURES = Cache("fusion.codegen.STRUCTURES")


def _structure(program):
    out = []
    for ins in program:
        if ins[0] == "c":
            out.append(("c", ins[2]))
        elif ins[0] == "clip":
            out.append(ins[:4])
        else:
            out.append(ins)
    return tuple(out)


#: whether float32 steps flush subnormals to zero: on the GPU the eager path is CuPy's
#: element-wise kernels, which NVRTC compiles with -ftz=true (every float32 arithmetic step
#: and comparison reads a subnormal operand as a zero of its sign and writes a subnormal
#: result as one); the simulator's eager path is NumPy's, which keeps subnormals
_FLUSH_F32 = not SIMULATE
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
#: float64 steps whose eager GPU kernels read a negative subnormal operand as -0.0 (CuPy's
#: ``log(-5e-324)`` is -inf, where IEEE gives NaN; positive subnormals are kept)
_FLUSH_F64_OPERANDS = frozenset(["log", "log2", "log10"])
#: steps that move or test bits without arithmetic: they keep subnormals on the GPU too
_MOVES = frozenset(["positive", "copysign", "signbit", "isnan", "isinf", "isfinite", "where"])


def linearize(roots, stops=None):
    """(program, leaves) of the expressions ``roots`` (nodes, leaves or constants).

    The program is a tuple of instructions ``("in", k, dtype)``, ``("c", value, dtype)`` or
    ``(op, dtype, ctype, (operand positions...), extra)``, ending with ``("out", positions)``;
    settled nodes are leaves.  Float constants (and clip bounds) appear as their
    :func:`~.expr.const_key`, so that programs differing in a zero's sign or holding a NaN
    compare as they should.  Leaves are the distinct backend arrays, in order of first use.
    ``stops``: ``{id(node): stand-in}`` for pending nodes read as leaves (the stand-in, an
    object with a ``dtype``, takes the leaf's place in ``leaves``).
    """
    prog = []
    leaves = []
    leaf_pos = {}
    seen = {}

    def visit(e):
        key = id(e)
        p = seen.get(key)
        if p is not None:
            return p
        t = type(e)
        if t is Node and e.value is None and (stops is None or key not in stops):
            args = tuple([visit(a) for a in e.args])
            extra = tuple(map(const_key, e.extra)) if e.op == "clip" else None
            ct = e.ctype
            prog.append((e.op, e.dtype.str, None if ct is None else ct.str, args, extra))
        elif t is Const:
            prog.append(("c", const_key(e.value), e.dtype.str))
        else:
            if stops is not None and key in stops:
                arr = stops[key]
            else:
                arr = e.value if isinstance(e, Node) else e.array
            k = leaf_pos.get(id(arr))
            if k is None:
                k = leaf_pos[id(arr)] = len(leaves)
                leaves.append(arr)
            prog.append(("in", k, arr.dtype.str))
        p = seen[key] = len(prog) - 1
        return p

    outs = tuple([visit(r) for r in roots])
    prog.append(("out", outs))
    return tuple(prog), leaves


def _conv(src, from_dt, to_dt):
    """Source converting a value of ``from_dt`` to ``to_dt``."""
    if from_dt == to_dt:
        return src
    if to_dt.kind == "b":
        return f"({src} != 0)"
    if from_dt.kind == "b":
        return f"_t_{to_dt.name}(1 if {src} else 0)"
    return f"_t_{to_dt.name}({src})"


def _value(key):
    """The constant of a program's :func:`~.expr.const_key`."""
    return float.fromhex(key) if isinstance(key, str) else key


def _literal(v, dt):
    lit = repr(float(v)) if dt.kind == "f" else repr(int(v))
    return f"float('{lit}')" if lit in ("inf", "-inf", "nan") else lit


def _flush(name):
    """Source flushing the float32 value ``name``, as the GPU's -ftz=true arithmetic does in
    hardware: one ``add.ftz.f32`` (:func:`forge_array.intrinsics.ftz_f32`)."""
    return f"_ftz_f32({name})"


#: float32 steps written as one ``.rn.ftz.f32`` instruction each (operands and result
#: flushed by the instruction itself, and never contracted into a fused multiply-add, as
#: in CuPy's one-step kernels): name -> (intrinsic, source template)
_FTZ_STEPS = {"add": "_ftz_add({0}, {1})", "subtract": "_ftz_sub({0}, {1})",
              "multiply": "_ftz_mul({0}, {1})", "divide": "_ftz_div({0}, {1})",
              "square": "_ftz_mul({0}, {0})", "reciprocal": "_ftz_div(_t_float32(1), {0})"}


def _flushed(a, src, dt, lines, flushed):
    """The flushed operand ``src`` (value ``a`` of dtype ``dt`` converted to float32), in a
    name of its own: a float32 value is flushed once for all its uses."""
    key = a if dt == _F32 else (a, "f32")
    name = flushed.get(key)
    if name is None:
        name = flushed[key] = f"f{a}" if dt == _F32 else f"g{a}"
        if dt != _F32:
            lines.append(f"    {name} = {src}")
            src = name
        lines.append(f"    {name} = {_flush(src)}")
    return name


def _flushed_operand(a, src, dt, ct, clean, lines, flushed):
    """Operand ``src`` (value ``a`` of dtype ``dt`` converted to ``ct``) of a flushing step."""
    if dt == _F32 and not clean[a]:  # flushed before any widening, as the GPU's cvt.ftz
        return _conv(_flushed(a, f"v{a}", dt, lines, flushed), dt, ct)
    if ct == _F32 and dt.kind == "f" and dt != _F32:  # narrowed to float32: may be subnormal
        return _flushed(a, src, dt, lines, flushed)
    return src


class _Source:
    """The fused function being written: its lines, and per value of the program so far its
    dtype and whether it is *clean* (cannot be a float32 subnormal: a flushed step's
    result, a value of another dtype, a normal constant), so that a flushing step needs no
    flush of it."""

    def __init__(self, program):
        self.program = program
        nleaves = 1 + max((i[1] for i in program if i[0] == "in"), default=-1)
        self.lines = [f"def fused({', '.join(f'l{k}' for k in range(nleaves))}):"]
        self.dts: list = []
        self.clean: list = []
        self.flushed: dict = {}   # float32 values flushed once for all their flushing uses
        self.ftz_used = False     # whether a step is one of _FTZ_STEPS (they name _t_float32)
        self.names: set = set()   # the dtypes the source names

    def add(self, line):
        self.lines.append("    " + line)

    def value(self, dt, clean):
        """The next value is written: record its dtype and cleanness."""
        self.dts.append(dt)
        self.clean.append(clean)

    def is_constant(self, a, *values):
        """Whether value ``a`` is a constant (one of ``values`` when given)."""
        ins = self.program[a]
        return ins[0] == "c" and (not values or _value(ins[1]) in values)


def _write_input(w, pos, ins):
    dt = np.dtype(ins[2])
    src = f"l{ins[1]}"
    w.add(f"v{pos} = {'(' + src + ' != 0)' if dt.kind == 'b' else src}")
    w.value(dt, dt != _F32)


def _write_constant(w, pos, ins):
    dt = np.dtype(ins[2])
    v = _value(ins[1])
    if dt.kind == "b":
        w.add(f"v{pos} = {bool(v)!r}")
    else:
        w.names.add(dt.name)
        w.add(f"v{pos} = _t_{dt.name}({_literal(v, dt)})")
    w.value(dt, dt != _F32 or not 0 < abs(float(v)) < _F32_TINY)


def _write_clip(w, pos, src, arg, dt, ct, flush, bounds):
    """``clip`` of ``src`` (value ``arg``) as selections: the comparisons flush, the value
    kept does not."""
    w.add(f"v{pos} = {src}")
    for bound, cmp in zip(bounds, ("<", ">")):
        if bound is not None:
            w.add(f"_b = _t_{dt.name}({_literal(_value(bound), dt)})")
            left, right = f"v{pos}", "_b"
            if flush and ct == _F32:
                if not (w.clean[arg] and w.dts[arg] == _F32):
                    left = _flush(left)
                if 0 < abs(_value(bound)) < _F32_TINY:
                    right = _flush(right)
            w.add(f"v{pos} = _b if {left} {cmp} {right} else v{pos}")
    w.add(f"v{pos} = _t_{dt.name}(v{pos})")
    w.value(dt, dt != _F32 or w.clean[arg] and w.dts[arg] == _F32)


def _step_expression(w, op, ops_, args, dt, ct):
    """The expression of step ``op`` on operand sources ``ops_`` (values ``args``), of
    dtype ``dt`` computed in ``ct``."""
    if op == "where":
        c = ops_[0] if w.dts[args[0]].kind == "b" else f"({ops_[0]} != 0)"
        b1 = _conv(f"v{args[1]}", w.dts[args[1]], dt)
        b2 = _conv(f"v{args[2]}", w.dts[args[2]], dt)
        return f"({b1} if {c} else {b2})"
    if op == "astype":
        return _conv(ops_[0], w.dts[args[0]], dt)
    if op == "pow" and SIMULATE and w.is_constant(args[1], 0.5):
        return f"_m.sqrt({ops_[0]})"  # NumPy's power computes x ** 0.5 as sqrt(x)
    if op in ("maximum", "minimum") and ct.kind == "f":
        return f"_f{op}({ops_[0]}, {ops_[1]})"
    if op == "pow" and w.is_constant(args[1], 1, 2):
        # x ** 2 as x * x (exact, and no pow call: pow costs as much as the load)
        return ops_[0] if _value(w.program[args[1]][1]) == 1 else f"{ops_[0]} * {ops_[0]}"
    if op == "pow" and SIMULATE and ct.kind in "fc":
        # NumPy's array loop, as the eager path runs it (its float32 power is a SIMD loop on
        # AVX-512 hosts, an ulp away from the scalar libm call at times)
        return f"_m.array_pow({ops_[0]}, {ops_[1]})"
    if op in BINARY:
        if op in ("bitwise_and", "bitwise_or", "bitwise_xor") and ct.kind == "b":
            return {"bitwise_and": "({0} and {1})", "bitwise_or": "({0} or {1})",
                    "bitwise_xor": "({0} != {1})"}[op].format(*ops_)
        return BINARY[op].format(*ops_)
    tpl = UNARY[op]
    if op == "reciprocal":
        tpl = f"_t_{ct.name}(1) / {{0}}"
    elif op == "bitwise_invert" and ct.kind == "b":
        tpl = "(not {0})"
    elif op == "isnan" and ct.kind != "f":
        tpl = "False"
    return tpl.format(*ops_)


def _write_step(w, pos, ins):
    """Step ``ins`` (an operation on earlier values) as value ``pos``."""
    op, dts_, cts, args, extra = ins
    dt = np.dtype(dts_)
    ct = np.dtype(cts) if cts is not None else dt
    w.names.add(dt.name)
    w.names.add(ct.name)
    raw = [_conv(f"v{a}", w.dts[a], ct) for a in args]
    flush = _FLUSH_F32 and op not in _MOVES
    if flush and ct == _F32 and dt == _F32 and (
            op in _FTZ_STEPS or op == "pow" and w.is_constant(args[1], 2)):
        # one instruction flushes the operands and the result
        w.add(f"v{pos} = {_FTZ_STEPS['square' if op == 'pow' else op].format(*raw)}")
        w.value(dt, True)
        w.ftz_used = True
        return
    ops_ = raw
    if flush and ct.kind == "f":  # float32 operands flushed, also where widened
        ops_ = [_flushed_operand(a, o, w.dts[a], ct, w.clean, w.lines, w.flushed)
                for o, a in zip(ops_, args)]
    if flush and ct == _F64 and op in _FLUSH_F64_OPERANDS:
        ops_ = [f"_negative_subnormal_to_zero64({o})" for o in ops_]
    if op == "clip":
        _write_clip(w, pos, raw[0], args[0], dt, ct, flush, extra)
        return
    expr = _step_expression(w, op, ops_, args, dt, ct)
    if dt.kind == "b":
        w.add(f"v{pos} = {expr}")
    else:
        w.add(f"v{pos} = _t_{dt.name}({expr})")
        if flush and dt == _F32:
            w.add(f"v{pos} = {_flush(f'v{pos}')}")
    if dt != _F32 or flush:
        clean = True
    else:   # a move of its operand's bits (``where``: of the value it selects)
        clean = all(w.clean[a] and w.dts[a] == _F32 for a in (args[1:] if op == "where" else args))
    w.value(dt, clean)


def source_of(program):
    """The Python source of the function of ``program`` (see :func:`linearize`), and the
    dtypes it names."""
    w = _Source(program)
    for pos, ins in enumerate(program):
        kind = ins[0]
        if kind == "out":
            w.add(f"return ({', '.join(f'v{p}' for p in ins[1])},)")
            break
        if kind == "in":
            _write_input(w, pos, ins)
        elif kind == "c":
            _write_constant(w, pos, ins)
        else:
            _write_step(w, pos, ins)
    if w.flushed or w.ftz_used:
        w.names.add("float32")
    return "\n".join(w.lines) + "\n", w.names


def _sign(v):
    # +-1 for any nonzero number (infinities included), +0 for either zero, NaN for NaN
    if v > 0:
        return 1
    if v < 0:
        return -1
    return v - v


def _max_tie_second(a, b):
    # NumPy's maximum: a NaN operand wins, equal operands (+0 and -0) give the second
    if a > b or a != a:
        return a
    return b


def _min_tie_second(a, b):
    if a < b or a != a:
        return a
    return b


def _max_positive_zero(a, b):
    # CuPy's maximum of floats: a NaN operand wins, +0 is above -0
    if a != a or a > b:
        return a
    if b != b or b > a:
        return b
    return b if _m.copysign(1.0, a) < 0.0 else a


def _min_negative_zero(a, b):
    if a != a or a < b:
        return a
    if b != b or b < a:
        return b
    return a if _m.copysign(1.0, a) < 0.0 else b


_F32_TINY = float(np.finfo(np.float32).tiny)
_F64_TINY = float(np.finfo(np.float64).tiny)


def _negative_subnormal_to_zero64(v):
    if v < 0 and v > -_F64_TINY:
        return v * 0.0
    return v


class _QuietMath:
    """``math`` for the simulator: NumPy's scalar functions with warnings off (NaN for a
    domain error, as on the GPU, instead of Python's ValueError)."""

    @staticmethod
    def array_pow(a, b):
        """``a ** b`` through NumPy's array loop (one element), as eager computes it."""
        with np.errstate(all="ignore"):
            return np.power(np.array([a]), np.array([b]))[0]

    def __getattr__(self, name):
        fn = getattr(np, {"asin": "arcsin", "acos": "arccos", "atan": "arctan",
                          "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh",
                          "atan2": "arctan2"}.get(name, name))

        def quiet(*args):
            with np.errstate(all="ignore"):
                return fn(*args)
        return quiet


_MATH = _QuietMath() if SIMULATE else math
_m = _MATH  # the name the helpers above use, as the generated functions do
_DEVICE = cuda.jit(device=True)
if SIMULATE:  # the eager path is NumPy's
    _FLOAT_MAX, _FLOAT_MIN = _max_tie_second, _min_tie_second
else:  # the eager path is CuPy's
    _FLOAT_MAX, _FLOAT_MIN = _max_positive_zero, _min_negative_zero
#: names the generated functions read besides the dtypes' ``_t_<name>`` converters
_GLOBALS = {"_m": _MATH, "_one": 1.0, "_sign": _DEVICE(_sign),
            "_maximum": _DEVICE(_ops._maximum), "_minimum": _DEVICE(_ops._minimum),
            "_fmaximum": _DEVICE(_FLOAT_MAX), "_fminimum": _DEVICE(_FLOAT_MIN),
            "_ftz_f32": _fi.ftz_f32, "_ftz_add": _fi.ftz_add,
            "_ftz_sub": _fi.ftz_sub, "_ftz_mul": _fi.ftz_mul, "_ftz_div": _fi.ftz_div,
            "_negative_subnormal_to_zero64": _DEVICE(_negative_subnormal_to_zero64)}
_FUNCTIONS = Cache("fusion.codegen.FUNCTIONS")


def function_of(program):
    """The compiled-inline function of ``program`` (cached by the program).  Raises
    :class:`ConstantsVary` instead, in a plain-code settlement, for a structure compiled
    with :data:`MAX_CONSTANT_SETS` other sets of constants already."""
    fn = _FUNCTIONS.get(program)
    if fn is None:
        structure = _structure(program)
        n = _STRUCTURES.get(structure, 0)
        if n >= MAX_CONSTANT_SETS and getattr(PLAIN, "on", False):
            raise ConstantsVary(structure)
        _STRUCTURES[structure] = n + 1
        src, names = source_of(program)
        g = dict(_GLOBALS)
        for n in names:
            g[f"_t_{n}"] = np.dtype(n).type
        loc: dict = {}
        exec(compile(src, "<forge_array fused expression>", "exec"), g, loc)
        fn = loc["fused"]
        if SIMULATE:
            fn = _quiet(fn)
        _FUNCTIONS[program] = fn = rebuilt_by(fn, function_of, program)
    return fn


def _quiet(fn):
    def fused(*args):
        with np.errstate(all="ignore"):
            return fn(*args)
    fused.__qualname__ = "fused"
    fused.__wrapped__ = fn
    return fused
