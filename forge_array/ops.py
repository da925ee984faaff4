"""Named associative operators for reductions, scans and semiring products.

An [`Operator`][forge_array.ops.Operator] wraps a plain Python function of two elements (``fn``) that
numba compiles into kernels, together with what the kernels may exploit: a name,
an identity per dtype, commutativity and, for operators on tuples, the arity
(number of components).  Elements are scalars or, for tuple operators, tuples of
scalars (struct-of-arrays in memory, tuples in registers).  Plain functions become
operators with [`as_operator`][forge_array.ops.as_operator] (not commutative, no identity).

Examples:
    >>> from forge_array import ops
    >>> ops.add(2, 3)
    5
    >>> ops.maximum.identity("int8")
    np.int8(-128)
    >>> ops.argmax((1.0, 0), (3.0, 1))
    (3.0, 1)
    >>> ops.affine((2.0, 1.0), (3.0, 0.0))   # x -> 3*(2*x + 1)
    (6.0, 3.0)
    >>> op = ops.as_operator(lambda a, b: a + 2 * b)
    >>> op.commutative, op.identity("float32")
    (False, None)
"""

from __future__ import annotations

import math
import operator as _operator

import numpy as np

from .runtime import functions as _functions
from .runtime.caches import Cache

__all__ = [
    "Operator",
    "as_operator",
    "add",
    "multiply",
    "maximum",
    "minimum",
    "logaddexp",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "logical_and",
    "logical_or",
    "argmax",
    "argmin",
    "welford",
    "add_pair",
    "shifted_squares",
    "welford_map",
    "minmax",
    "affine",
    "INDEX_DTYPE",
]

#: dtype of the index component of the argmax / argmin pairs.
INDEX_DTYPE = np.dtype("int64")


class Operator:
    """An associative binary operator on scalars or tuples of scalars.

    Args:
        fn (callable): ``fn(a, b) -> c``, a plain Python function that numba can compile.
        name (str): Name used in error messages, reprs and cache keys.
        identity (callable or None): ``identity(dtype) -> value`` (``dtype`` is a NumPy
            dtype, or a tuple of dtypes for tuple operators); returns None where no identity
            exists.
        commutative (bool): Whether ``fn(a, b) == fn(b, a)``; kernels may then reorder
            operands.
        arity (int or None): Number of tuple components; 1 for scalar operators, None when
            unknown.
        ufunc (numpy.ufunc or None): A NumPy ufunc computing the same thing (CPU fast path).

    Examples:
        >>> op = Operator(lambda a, b: a * b, "times", identity=lambda d: d.type(1))
        >>> op(3, 4), op.identity("float32"), op.name
        (12, np.float32(1.0), 'times')
    """

    __slots__ = ("fn", "name", "_identity", "commutative", "arity", "ufunc", "__weakref__")

    def __init__(self, fn, name=None, *, identity=None, commutative=False, arity=1,
                 ufunc=None):
        if not callable(fn):
            raise TypeError(f"operator must be callable, got {type(fn).__name__}")
        self.fn = fn
        self.name = name if name is not None else getattr(fn, "__name__", repr(fn))
        self._identity = identity
        self.commutative = bool(commutative)
        self.arity = arity
        self.ufunc = ufunc

    def __call__(self, a, b):
        return self.fn(a, b)

    def identity(self, dtype):
        """The identity element for elements of ``dtype`` (a dtype or a tuple of
        dtypes for tuple operators), or None when there is none.

        Examples:
            >>> add.identity("float64"), minimum.identity("uint8")
            (np.float64(0.0), np.uint8(255))
            >>> argmax.identity(("float32", "int64"))
            (np.float32(-inf), np.int64(9223372036854775807))
        """
        if self._identity is None:
            return None
        if isinstance(dtype, (tuple, list)):
            dtype = tuple(np.dtype(d) for d in dtype)
        else:
            dtype = np.dtype(dtype)
        return self._identity(dtype)

    @property
    def is_tuple(self):
        """True for operators on tuples (arity > 1).

        Examples:
            >>> argmax.is_tuple, add.is_tuple
            (True, False)
        """
        return self.arity is not None and self.arity > 1

    def __repr__(self):
        return f"<forge_array.ops.Operator {self.name}>"


def as_operator(f):
    """Return ``f`` if it is an [`Operator`][forge_array.ops.Operator]; Python's ``max``, ``min`` and the
    ``operator`` module's ``add``, ``mul``, ``and_``, ``or_``, ``xor`` become the named
    operators (with their identities and fast paths); another builtin or plain function is
    wrapped (not commutative, no identity, arity unknown), one `Operator` per function
    as `forge_array.runtime.functions.canonical` sees it, so that an equal lambda
    written anew finds the kernels compiled for the first.

    Examples:
        >>> as_operator(add) is add, as_operator(max) is maximum
        (True, True)
        >>> import math
        >>> op = as_operator(math.hypot)
        >>> op.name, op(3.0, 4.0)
        ('hypot', 5.0)
        >>> ops = [as_operator(lambda a, b: a + 2 * b) for _ in range(2)]
        >>> ops[0] is ops[1]
        True
        >>> as_operator(3)
        Traceback (most recent call last):
        ...
        TypeError: operator must be callable, got int
    """
    if isinstance(f, Operator):
        return f
    if not callable(f):
        raise TypeError(f"operator must be callable, got {type(f).__name__}")
    try:
        named = _BUILTIN_OPERATORS.get(f)
    except TypeError:  # an unhashable callable
        named = None
    if named is not None:
        return named
    fn = _functions.compilable(f, 2)
    try:
        op = _WRAPPED.get(fn)
    except TypeError:  # an unhashable callable object: no reuse
        op = fn = None
    if op is None:
        op = Operator(f if fn is None else fn, getattr(f, "__name__", None) or repr(f), identity=None,
                      commutative=False, arity=None)
        if fn is not None:
            op = _WRAPPED.setdefault(fn, op)   # bounded: new functions per call evict
    return op


#: Operator objects of wrapped functions, by canonical function
_WRAPPED = Cache("ops.WRAPPED")


# ----------------------------------------------------------------------------
# identities


def _scalar(dtype, value):
    return dtype.type(value)


def _lowest(dtype):
    """The smallest value of ``dtype`` (-inf for floats)."""
    if dtype.kind == "f":
        return dtype.type(-np.inf)
    if dtype.kind == "b":
        return np.False_
    if dtype.kind in "iu":
        return dtype.type(np.iinfo(dtype).min)
    return None


def _highest(dtype):
    """The largest value of ``dtype`` (+inf for floats)."""
    if dtype.kind == "f":
        return dtype.type(np.inf)
    if dtype.kind == "b":
        return np.True_
    if dtype.kind in "iu":
        return dtype.type(np.iinfo(dtype).max)
    return None


def _all_ones(dtype):
    if dtype.kind == "b":
        return np.True_
    if dtype.kind == "i":
        return dtype.type(-1)
    if dtype.kind == "u":
        return dtype.type(np.iinfo(dtype).max)
    return None


def _zero_if_int(dtype):
    if dtype.kind in "biu":
        return dtype.type(0)
    return None


def _first(dtype):
    return dtype[0] if isinstance(dtype, tuple) else dtype


def _pair_identity(value_of):
    def ident(dtype):
        if isinstance(dtype, tuple):
            vdt, idt = dtype[0], dtype[1]
        else:
            vdt, idt = dtype, INDEX_DTYPE
        v = value_of(vdt)
        if v is None:
            return None
        return (v, idt.type(np.iinfo(idt).max))
    return ident


def _tuple_identity(values):
    """identity for an operator on n-tuples whose components are ``values``
    (functions of the component dtype)."""
    def ident(dtype):
        dts = dtype if isinstance(dtype, tuple) else (dtype,) * len(values)
        out = tuple(f(d) for f, d in zip(values, dts))
        return None if any(v is None for v in out) else out
    return ident


# ----------------------------------------------------------------------------
# the operator functions (plain Python; numba compiles them)


def _add(a, b):
    return a + b


def _multiply(a, b):
    return a * b


def _maximum(a, b):
    # NaN-propagating: a NaN in either operand wins (ints: a != a is False)
    if a >= b or a != a:
        return a
    return b


def _minimum(a, b):
    if a <= b or a != a:
        return a
    return b


def _logaddexp(a, b):
    # log(exp(a) + exp(b)) without overflow; typed like the operands
    if a == b:
        if math.isinf(a):
            return a
        return a + math.log1p(math.exp(a - a))  # a + log(2), typed like a
    d = a - b
    if d > 0:
        return a + math.log1p(math.exp(-d))
    if d <= 0:
        return b + math.log1p(math.exp(d))
    return d  # nan


def _bitwise_and(a, b):
    return a & b


def _bitwise_or(a, b):
    return a | b


def _bitwise_xor(a, b):
    return a ^ b


def _logical_and(a, b):
    return (a != 0) & (b != 0)


def _logical_or(a, b):
    return (a != 0) | (b != 0)


def _argmax(p, q):
    # (value, index): largest value, first NaN wins, ties -> smallest index
    pv = p[0]
    qv = q[0]
    if pv != pv:
        if qv != qv and q[1] < p[1]:
            return q
        return p
    if qv != qv:
        return q
    if qv > pv or (qv == pv and q[1] < p[1]):
        return q
    return p


def _argmin(p, q):
    pv = p[0]
    qv = q[0]
    if pv != pv:
        if qv != qv and q[1] < p[1]:
            return q
        return p
    if qv != qv:
        return q
    if qv < pv or (qv == pv and q[1] < p[1]):
        return q
    return p


def _welford(p, q):
    # Chan et al. merge of (count, mean, M2); all components of one float type
    na = p[0]
    nb = q[0]
    n = na + nb
    if nb == 0:
        return p
    if na == 0:
        return q
    d = q[1] - p[1]
    f = nb / n
    return (n, p[1] + d * f, p[2] + q[2] + d * d * na * f)


def _minmax(p, q):
    lo = p[0]
    hi = p[1]
    if not (lo <= q[0] or lo != lo):
        lo = q[0]
    if not (hi >= q[1] or hi != hi):
        hi = q[1]
    return (lo, hi)


def _affine(p, q):
    # p then q: x -> q0 * (p0 * x + p1) + q1
    return (p[0] * q[0], q[0] * p[1] + q[1])


add = Operator(_add, "add", identity=lambda d: _scalar(d, 0), commutative=True,
               ufunc=np.add)
multiply = Operator(_multiply, "multiply", identity=lambda d: _scalar(d, 1),
                    commutative=True, ufunc=np.multiply)
maximum = Operator(_maximum, "maximum", identity=_lowest, commutative=True,
                   ufunc=np.maximum)
minimum = Operator(_minimum, "minimum", identity=_highest, commutative=True,
                   ufunc=np.minimum)
logaddexp = Operator(_logaddexp, "logaddexp",
                     identity=lambda d: d.type(-np.inf) if d.kind == "f" else None,
                     commutative=True, ufunc=np.logaddexp)
bitwise_and = Operator(_bitwise_and, "bitwise_and", identity=_all_ones, commutative=True,
                       ufunc=np.bitwise_and)
bitwise_or = Operator(_bitwise_or, "bitwise_or", identity=_zero_if_int, commutative=True,
                      ufunc=np.bitwise_or)
bitwise_xor = Operator(_bitwise_xor, "bitwise_xor", identity=_zero_if_int,
                       commutative=True, ufunc=np.bitwise_xor)
logical_and = Operator(_logical_and, "logical_and", identity=lambda d: np.True_,
                       commutative=True, ufunc=np.logical_and)
logical_or = Operator(_logical_or, "logical_or", identity=lambda d: np.False_,
                      commutative=True, ufunc=np.logical_or)
argmax = Operator(_argmax, "argmax", identity=_pair_identity(_lowest), commutative=True,
                  arity=2)
argmin = Operator(_argmin, "argmin", identity=_pair_identity(_highest), commutative=True,
                  arity=2)
welford = Operator(_welford, "welford",
                   identity=_tuple_identity([lambda d: d.type(0)] * 3),
                   commutative=True, arity=3)
_WELFORD_MAPS = Cache("ops.WELFORD_MAPS")


def _add_pair(p, q):
    return (p[0] + q[0], p[1] + q[1])


add_pair = Operator(_add_pair, "add_pair", identity=_tuple_identity([lambda d: d.type(0)] * 2),
                    commutative=True, arity=2)


def shifted_squares(v, s):
    """The map of the variance's shifted sums: ``d = v - s`` in float64, and ``d * d``;
    reduced with :data:`add_pair` they give ``sum(d)`` and ``sum(d * d)``, from which the
    variance follows with no division per element (``s`` is one element of the data, so
    that ``d`` stays of the data's spread).

    Examples:
        >>> [float(v) for v in shifted_squares(5.0, 2.0)]
        [3.0, 9.0]
    """
    d = np.float64(v) - np.float64(s)
    return (d, d * d)


def welford_map(dtype):
    """The map that turns one element into a `welford` triple ``(1, x, M2)`` in float
    dtype ``dtype``; ``M2`` is ``(x - x)**2``: 0 for a finite ``x`` and NaN for NaN or an
    infinity, so that the variance of data with a NaN or an infinity is NaN, as in NumPy.

    Examples:
        >>> import numpy as np
        >>> f = welford_map(np.dtype("float64"))
        >>> [float(v) for v in f(2.0)], bool(np.isnan(f(float("nan"))[2]))
        ([1.0, 2.0, 0.0], True)
    """
    dt = np.dtype(dtype)
    f = _WELFORD_MAPS.get(dt)
    if f is None:
        T = dt.type

        def welford_map(v):
            x = T(v)
            d = x - x
            return (T(1), x, d * d)

        f = _WELFORD_MAPS[dt] = welford_map
        # how another process makes the same function (runtime.build_process sends it so)
        f.__forge_rebuild__ = (globals()["welford_map"], (dt,))
    return f


minmax = Operator(_minmax, "minmax", identity=_tuple_identity([_highest, _lowest]),
                  commutative=True, arity=2)
affine = Operator(_affine, "affine",
                  identity=_tuple_identity([lambda d: d.type(1), lambda d: d.type(0)]),
                  commutative=False, arity=2)

_DOCS = {
    "add": "``a + b``; identity 0.\n\n>>> add(1.5, 2.0)\n3.5",
    "multiply": "``a * b``; identity 1.\n\n>>> multiply(3, 4)\n12",
    "maximum": "Larger operand, NaN-propagating; identity the lowest value (-inf).\n\n"
               ">>> maximum(1.0, float('nan'))\nnan",
    "minimum": "Smaller operand, NaN-propagating; identity the highest value (+inf).\n\n"
               ">>> minimum(1, 2)\n1",
    "logaddexp": "``log(exp(a) + exp(b))`` without overflow; identity -inf.\n\n"
                 ">>> round(logaddexp(0.0, 0.0), 6)\n0.693147",
    "bitwise_and": "``a & b``; identity all ones.\n\n>>> bitwise_and(6, 3)\n2",
    "bitwise_or": "``a | b``; identity 0.\n\n>>> bitwise_or(4, 1)\n5",
    "bitwise_xor": "``a ^ b``; identity 0.\n\n>>> bitwise_xor(6, 3)\n5",
    "logical_and": "``(a != 0) & (b != 0)``; identity True.\n\n>>> logical_and(1, 0)\nFalse",
    "logical_or": "``(a != 0) | (b != 0)``; identity False.\n\n>>> logical_or(1, 0)\nTrue",
    "argmax": "On (value, index) pairs: the larger value, the first NaN, ties to the "
              "smaller index (as numpy.argmax).\n\n>>> argmax((2.0, 5), (2.0, 3))\n(2.0, 3)",
    "argmin": "On (value, index) pairs: the smaller value, the first NaN, ties to the "
              "smaller index (as numpy.argmin).\n\n>>> argmin((1.0, 0), (0.5, 1))\n(0.5, 1)",
    "welford": "Chan's merge of (count, mean, M2) triples; map x to (1, x, 0) first.\n\n"
               ">>> welford((1.0, 2.0, 0.0), (1.0, 4.0, 0.0))\n(2.0, 3.0, 2.0)",
    "add_pair": "Component-wise sum of pairs; identity (0, 0).\n\n"
                ">>> add_pair((1.0, 2.0), (3.0, 4.0))\n(4.0, 6.0)",
    "minmax": "(min, max) pairs, NaN-propagating; map x to (x, x) first.\n\n"
              ">>> minmax((1.0, 3.0), (0.0, 2.0))\n(0.0, 3.0)",
    "affine": "Composition of affine maps (a, b): x -> a*x + b, first p then q; not "
              "commutative; identity (1, 0).\n\n>>> affine((2.0, 1.0), (3.0, 0.0))\n(6.0, 3.0)",
}



def describe(op):
    """A one-paragraph description of a named operator, with an example.

    Examples:
        >>> print(describe(add).splitlines()[0])
        ``a + b``; identity 0.
    """
    return _DOCS.get(as_operator(op).name, "")


#: every named operator, by name
BY_NAME = {op.name: op for op in (add, multiply, maximum, minimum, logaddexp, bitwise_and,
                                   bitwise_or, bitwise_xor, logical_and, logical_or, argmax,
                                   argmin, welford, add_pair, minmax, affine)}


def _test_docs():  # pragma: no cover - used by doctest collection only
    """Examples of every named operator.

    >>> add(1.5, 2.0)
    3.5
    >>> maximum(1.0, float('nan'))
    nan
    >>> minimum(1, 2)
    1
    >>> round(logaddexp(0.0, 0.0), 6)
    0.693147
    >>> bitwise_and(6, 3), bitwise_or(4, 1), bitwise_xor(6, 3)
    (2, 5, 5)
    >>> logical_and(1, 0), logical_or(1, 0)
    (False, True)
    >>> argmax((2.0, 5), (2.0, 3)), argmin((1.0, 0), (0.5, 1))
    ((2.0, 3), (0.5, 1))
    >>> welford((1.0, 2.0, 0.0), (1.0, 4.0, 0.0))
    (2.0, 3.0, 2.0)
    >>> minmax((1.0, 3.0), (0.0, 2.0))
    (0.0, 3.0)
    >>> affine((2.0, 1.0), (3.0, 0.0))
    (6.0, 3.0)
    """


#: Python builtins that are the named operators
_BUILTIN_OPERATORS = {max: maximum, min: minimum, _operator.add: add, _operator.mul: multiply,
                      _operator.and_: bitwise_and, _operator.or_: bitwise_or, _operator.xor: bitwise_xor}
