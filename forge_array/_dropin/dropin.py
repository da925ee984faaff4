"""The drop-in over one array module: :class:`DropIn` (CuPy's functions and ``ndarray``
methods on our primitives, each falling back to the function it replaces) and
:func:`namespace` (a module-like object of them over ``xp``); see the package's docstring.
"""

from __future__ import annotations

import functools

from ..primitives import scan as _scan
from ..primitives.reductions import argmax as _p_argmax
from ..primitives.reductions import argmin as _p_argmin
from ..runtime import originals
from ..runtime.originals import FUNCTIONS, METHODS, in_original
from .cores import Cores, _all_prim, _any_prim, _max_prim, _min_prim, _prod_prim, _sum_prim
from .rules import DECLINE

__all__ = ["DropIn", "FUNCTIONS", "METHODS", "namespace"]


# --------------------------------------------------------------------------- the drop-in


class DropIn(Cores):
    """CuPy-signature reductions, scans and products over array module ``xp`` on our
    kernels, each falling back to the function it replaces.

    ``xp``: the array module (``cupy``; ``numpy`` under the simulator). ``fallbacks``:
    name -> callable overriding the originals (default: the module's own functions as
    :func:`forge_array.runtime.originals.capture` recorded them, before any patch);
    ``method_fallbacks`` likewise for ``xp.ndarray``'s methods.
    Attributes: one function per name of :data:`FUNCTIONS`; ``methods``: name -> function
    taking the array first, for :data:`METHODS`; ``counts``: how many calls ran on our
    kernels (``"kernel"``) and how many fell back (``"fallback"``), per name.

    >>> import numpy as np
    >>> d = DropIn(np)
    >>> float(d.var(np.array([1.0, 2.0, 3.0, 4.0]), ddof=1))
    1.6666666666666667
    >>> d.methods["sum"](np.ones((2, 2)), axis=0).tolist()
    [2.0, 2.0]
    """

    def __init__(self, xp, fallbacks=None, method_fallbacks=None):
        self.xp = xp
        self.ndarray = xp.ndarray
        funcs, meths = originals.capture(xp)   # CuPy's own, recorded before any patch
        fb = dict(funcs)
        fb.update(fallbacks or {})
        fb = {n: originals.guarded(f) for n, f in fb.items()}
        mfb = dict(meths)
        mfb.update(method_fallbacks or {})
        mfb = {n: originals.guarded(f) for n, f in mfb.items()}
        self.fallbacks = fb
        self.method_fallbacks = mfb
        self.counts = {"kernel": {}, "fallback": {}}
        self._patched: dict = {}
        self._build()

    # ----------------------------------------------------------------- bookkeeping

    def _hit(self, which, name):
        c = self.counts[which]
        c[name] = c.get(name, 0) + 1

    def reset_counts(self):
        """Zero :attr:`counts`.

        >>> import numpy as np
        >>> d = DropIn(np); d.reset_counts(); d.counts
        {'kernel': {}, 'fallback': {}}
        """
        self.counts = {"kernel": {}, "fallback": {}}

        return DECLINE                          # matrix-matrix: cuBLAS

    # ----------------------------------------------------------------- public functions

    def _cores(self):
        """name -> the computing core of each reduction, scan and product: called with
        keyword arguments as CuPy's function takes them, it returns the result on our kernels
        or ``DECLINE`` (an argument it does not cover, any unknown keyword among them)."""
        me, DEC = self, DECLINE

        def core(fn):
            names = frozenset(fn.__code__.co_varnames[1:fn.__code__.co_argcount])

            def call(a, *args, **kw):
                for k in kw:
                    if k not in names:
                        return DEC
                return fn(a, *args, **kw)
            return call

        return {
            "sum": core(lambda a, axis=None, dtype=None, out=None, keepdims=False:
                        me._c_sum_prod(_sum_prim, a, axis, dtype, out, keepdims)),
            "prod": core(lambda a, axis=None, dtype=None, out=None, keepdims=False:
                         me._c_sum_prod(_prod_prim, a, axis, dtype, out, bool(keepdims))),
            "max": core(lambda a, axis=None, out=None, keepdims=False:
                        me._c_extremum(_max_prim, a, axis, out, keepdims)),
            "min": core(lambda a, axis=None, out=None, keepdims=False:
                        me._c_extremum(_min_prim, a, axis, out, keepdims)),
            "mean": core(lambda a, axis=None, dtype=None, out=None, keepdims=False:
                         me._c_mean(a, axis, dtype, out, keepdims)),
            "var": core(lambda a, axis=None, dtype=None, out=None, ddof=0, keepdims=False:
                        me._c_moments(a, axis, dtype, out, ddof, keepdims, False)),
            "std": core(lambda a, axis=None, dtype=None, out=None, ddof=0, keepdims=False:
                        me._c_moments(a, axis, dtype, out, ddof, keepdims, True)),
            "argmax": core(lambda a, axis=None, dtype=None, out=None, keepdims=False:
                           me._c_arg(_p_argmax, a, axis, dtype, out, keepdims)),
            "argmin": core(lambda a, axis=None, dtype=None, out=None, keepdims=False:
                           me._c_arg(_p_argmin, a, axis, dtype, out, keepdims)),
            "any": core(lambda a, axis=None, out=None, keepdims=False:
                        me._c_logical(_any_prim, a, axis, out, keepdims)),
            "all": core(lambda a, axis=None, out=None, keepdims=False:
                        me._c_logical(_all_prim, a, axis, out, keepdims)),
            "cumsum": core(lambda a, axis=None, dtype=None, out=None:
                           me._c_scan(_scan.cumulative_sum, a, axis, dtype, out)),
            "cumprod": core(lambda a, axis=None, dtype=None, out=None:
                            me._c_scan(_scan.cumulative_prod, a, axis, dtype, out)),
            "nansum": core(lambda a, axis=None, dtype=None, out=None, keepdims=False:
                           me._c_nansum(a, axis, dtype, out, keepdims)),
            "nanmax": core(lambda a, axis=None, out=None, keepdims=False:
                           me._c_nanext(a, axis, out, keepdims, True)),
            "nanmin": core(lambda a, axis=None, out=None, keepdims=False:
                           me._c_nanext(a, axis, out, keepdims, False)),
            "dot": core(lambda a, b, out=None: me._c_product(a, b, out, "dot")),
            "matmul": core(lambda a, b, out=None: me._c_product(a, b, out, "matmul")),
            "inner": core(lambda a, b: me._c_product(a, b, None, "inner")),
        }

    def _build(self):
        cores = self._cores()
        self.functions = self._build_functions(cores)
        self.methods = self._build_methods(cores)

    def _build_functions(self, cores):  # noqa: C901 - one function per name, with CuPy's signature
        """The drop-in functions (CuPy's signatures): each runs its core and falls back to the
        function it replaces where the core declines."""
        me = self
        fb = self.fallbacks
        DEC = DECLINE

        def run(name, r, fallback, *args, **kwargs):
            if r is DEC:
                me._hit("fallback", name)
                return fallback(*args, **kwargs)
            me._hit("kernel", name)
            return r

        c = cores

        def sum(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
            """Sum over ``axis`` (CuPy's ``sum``): int64 / uint64 for bool and narrower
            integers unless ``dtype`` is given."""
            return run("sum", c["sum"](a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw), fb["sum"],
                       a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)

        def prod(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
            """Product over ``axis`` (CuPy's ``prod``), with ``sum``'s dtype rules."""
            return run("prod", c["prod"](a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw), fb["prod"],
                       a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)

        def amax(a, axis=None, out=None, keepdims=False, **kw):
            """Maximum over ``axis`` (CuPy's ``amax`` / ``max``); NaN propagates."""
            return run("max", c["max"](a, axis=axis, out=out, keepdims=keepdims, **kw), fb["amax"],
                       a, axis=axis, out=out, keepdims=keepdims, **kw)

        def amin(a, axis=None, out=None, keepdims=False, **kw):
            """Minimum over ``axis`` (CuPy's ``amin`` / ``min``); NaN propagates."""
            return run("min", c["min"](a, axis=axis, out=out, keepdims=keepdims, **kw), fb["amin"],
                       a, axis=axis, out=out, keepdims=keepdims, **kw)

        def mean(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
            """Arithmetic mean over ``axis`` (float64 for integers)."""
            return run("mean", c["mean"](a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw), fb["mean"],
                       a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)

        def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
            """Variance over ``axis`` with ``ddof``, in one pass (Welford / Chan)."""
            return run("var", c["var"](a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw),
                       fb["var"], a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw)

        def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
            """Standard deviation over ``axis`` with ``ddof``, in one pass."""
            return run("std", c["std"](a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw),
                       fb["std"], a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw)

        def _arg_fallback(f):
            def call(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
                if dtype is not None:
                    kw["dtype"] = dtype
                return f(a, axis=axis, out=out, keepdims=keepdims, **kw)
            return call

        argmax_fb = _arg_fallback(fb["argmax"])
        argmin_fb = _arg_fallback(fb["argmin"])

        def argmax(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
            """Index of the first maximum along ``axis`` (flat index for ``axis=None``)."""
            return run("argmax", c["argmax"](a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw),
                       argmax_fb, a, axis, dtype, out, keepdims, **kw)

        def argmin(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
            """Index of the first minimum along ``axis`` (flat index for ``axis=None``)."""
            return run("argmin", c["argmin"](a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw),
                       argmin_fb, a, axis, dtype, out, keepdims, **kw)

        def any(a, axis=None, out=None, keepdims=False, **kw):
            """Whether any element over ``axis`` is nonzero."""
            return run("any", c["any"](a, axis=axis, out=out, keepdims=keepdims, **kw), fb["any"],
                       a, axis=axis, out=out, keepdims=keepdims, **kw)

        def all(a, axis=None, out=None, keepdims=False, **kw):
            """Whether every element over ``axis`` is nonzero."""
            return run("all", c["all"](a, axis=axis, out=out, keepdims=keepdims, **kw), fb["all"],
                       a, axis=axis, out=out, keepdims=keepdims, **kw)

        def cumsum(a, axis=None, dtype=None, out=None, **kw):
            """Cumulative sum along ``axis`` (of the flattened array for ``axis=None``)."""
            return run("cumsum", c["cumsum"](a, axis=axis, dtype=dtype, out=out, **kw), fb["cumsum"],
                       a, axis=axis, dtype=dtype, out=out, **kw)

        def cumprod(a, axis=None, dtype=None, out=None, **kw):
            """Cumulative product along ``axis`` (of the flattened array for ``axis=None``)."""
            return run("cumprod", c["cumprod"](a, axis=axis, dtype=dtype, out=out, **kw), fb["cumprod"],
                       a, axis=axis, dtype=dtype, out=out, **kw)

        def nansum(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
            """Sum over ``axis`` counting NaN as zero."""
            return run("nansum", c["nansum"](a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw),
                       fb["nansum"], a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)

        def nanmax(a, axis=None, out=None, keepdims=False, **kw):
            """Maximum over ``axis`` ignoring NaN (NaN and a RuntimeWarning for all-NaN
            slices)."""
            return run("nanmax", c["nanmax"](a, axis=axis, out=out, keepdims=keepdims, **kw), fb["nanmax"],
                       a, axis=axis, out=out, keepdims=keepdims, **kw)

        def nanmin(a, axis=None, out=None, keepdims=False, **kw):
            """Minimum over ``axis`` ignoring NaN."""
            return run("nanmin", c["nanmin"](a, axis=axis, out=out, keepdims=keepdims, **kw), fb["nanmin"],
                       a, axis=axis, out=out, keepdims=keepdims, **kw)

        def dot(a, b, out=None, **kw):
            """Dot product; matrix-vector, vector-matrix and vector-vector on our kernels."""
            return run("dot", c["dot"](a, b, out=out, **kw), fb["dot"], a, b, out=out, **kw)

        def matmul(a, b, out=None, **kwargs):
            """``a @ b``; matrix (or batch) times vector and vector times matrix on our
            kernels."""
            return run("matmul", c["matmul"](a, b, out=out, **kwargs), fb["matmul"], a, b, out=out, **kwargs)

        def vdot(a, b, **kw):
            """Dot product of the flattened arrays (real dtypes on our kernels)."""
            r = DEC
            if (not kw and me._mine(a) and me._mine(b) and a.size == b.size and a.ndim and b.ndim):
                r = me._c_product(a.reshape(-1), b.reshape(-1), None, "dot")
            return run("vdot", r, fb["vdot"], a, b, **kw)

        def inner(a, b, **kw):
            """Inner product over the last axes."""
            return run("inner", c["inner"](a, b, **kw), fb["inner"], a, b, **kw)

        funcs = dict(sum=sum, prod=prod, amax=amax, max=amax, amin=amin, min=amin, mean=mean,
                     var=var, std=std, argmax=argmax, argmin=argmin, any=any, all=all,
                     cumsum=cumsum, cumprod=cumprod, nansum=nansum, nanmax=nanmax,
                     nanmin=nanmin, dot=dot, matmul=matmul, vdot=vdot, inner=inner)
        direct = dict(fb, argmax=argmax_fb, argmin=argmin_fb)
        entries = {}
        for name, f in list(funcs.items()):
            if f not in entries:
                entries[f] = _entry(f, direct[name])
            funcs[name] = entries[f]
        for name, f in funcs.items():
            if name not in ("max", "min"):
                f.__qualname__ = f.__name__ = name
            orig = fb.get(name)
            doc = f.__doc__ or ""
            if orig is not None and orig.__doc__:
                doc += ("\n\n    Runs on forge_array's kernels where they apply, else on the "
                        "original; its documentation follows.\n\n    " + orig.__doc__)
            f.__doc__ = doc
            setattr(self, name, f)
        return funcs

    def _build_methods(self, cores):
        """``ndarray`` methods (CuPy's signatures) on the same cores; a method falls back to
        the unpatched method, and stays in it when called from CuPy's own code."""
        me = self
        mfb = self.method_fallbacks
        DEC = DECLINE

        def m(name, core, call):
            orig = mfb.get(name)

            def method(self, *args, **kwargs):
                if in_original():           # inside CuPy's own code: stay there
                    return call(orig, self, *args, **kwargs)
                r = core(self, *args, **kwargs)
                if r is DEC:
                    me._hit("fallback", "ndarray." + name)
                    return call(orig, self, *args, **kwargs)
                me._hit("kernel", "ndarray." + name)
                return r

            method.__name__ = method.__qualname__ = name
            method.__doc__ = (f"``ndarray.{name}`` on forge_array's kernels where they apply "
                              f"(see forge_array.cupy).\n\n" + (getattr(orig, "__doc__", "") or ""))
            return method

        def plain(orig, self, *args, **kwargs):
            return orig(self, *args, **kwargs)

        def arg_call(orig, self, axis=None, out=None, dtype=None, keepdims=False):
            kw = {"dtype": dtype} if dtype is not None else {}
            return orig(self, axis=axis, out=out, keepdims=keepdims, **kw)

        def prod_call(orig, self, axis=None, dtype=None, out=None, keepdims=None):
            return orig(self, axis=axis, dtype=dtype, out=out, keepdims=bool(keepdims))

        def arg_core(core):     # ndarray.argmax(axis, out, dtype, keepdims): out before dtype
            def call(a, axis=None, out=None, dtype=None, keepdims=False, **kw):
                return core(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)
            return call

        def positional(core, params):   # the method's positional arguments as keywords
            def call(a, *args, **kw):
                if len(args) > len(params):
                    return DEC
                return core(a, **dict(zip(params, args)), **kw)
            return call

        order = {"sum": ("axis", "dtype", "out", "keepdims"), "prod": ("axis", "dtype", "out", "keepdims"),
                 "max": ("axis", "out", "keepdims"), "min": ("axis", "out", "keepdims"),
                 "mean": ("axis", "dtype", "out", "keepdims"), "var": ("axis", "dtype", "out", "ddof", "keepdims"),
                 "std": ("axis", "dtype", "out", "ddof", "keepdims"), "any": ("axis", "out", "keepdims"),
                 "all": ("axis", "out", "keepdims"), "cumsum": ("axis", "dtype", "out"),
                 "cumprod": ("axis", "dtype", "out"), "dot": ("b", "out")}
        calls = {"argmax": arg_call, "argmin": arg_call, "prod": prod_call}
        method_cores = {name: positional(cores[name], params) for name, params in order.items()}
        method_cores["argmax"] = arg_core(cores["argmax"])
        method_cores["argmin"] = arg_core(cores["argmin"])
        return {name: m(name, core, calls.get(name, plain))
                for name, core in method_cores.items() if name in mfb}

    # ----------------------------------------------------------------- patching

    def patch(self, module, methods=True):
        """Replace the functions of ``module`` (e.g. ``cupy``) named in :data:`FUNCTIONS`
        by this drop-in's, and -- with ``methods`` -- the methods of ``module.ndarray``
        named in :data:`METHODS`. Idempotent. Returns ``{"functions": [...], "methods":
        [...], "failed": {name: reason}}``: a method of a type that cannot be changed
        (a C / Cython extension type) is left as it is and reported in ``failed``.

        >>> import numpy as np, types
        >>> fake = types.ModuleType("fake"); fake.sum = np.sum; fake.ndarray = np.ndarray
        >>> d = DropIn(np)
        >>> rep = d.patch(fake)
        >>> fake.sum is d.sum, sorted(rep["failed"])[:1]      # numpy.ndarray is immutable
        (True, ['all'])
        >>> d.unpatch(fake); fake.sum is np.sum
        True
        """
        originals.capture(module)        # what every fallback calls, recorded first
        saved = self._patched.setdefault(id(module), {"module": module, "functions": {},
                                                      "methods": {}})
        done = {"functions": [], "methods": [], "failed": {}}
        for name in FUNCTIONS:
            if not hasattr(module, name):
                continue
            if name not in saved["functions"]:
                saved["functions"][name] = getattr(module, name)
            setattr(module, name, self.functions[name])
            done["functions"].append(name)
        if methods:
            cls = getattr(module, "ndarray", None)
            for name, meth in self.methods.items():
                if cls is None:
                    break
                before = cls.__dict__.get(name, _MISSING)
                try:
                    setattr(cls, name, meth)
                except (TypeError, AttributeError) as exc:
                    done["failed"][name] = f"{type(exc).__name__}: {exc}"
                    continue
                if name not in saved["methods"]:
                    saved["methods"][name] = before
                done["methods"].append(name)
        return done

    def unpatch(self, module):
        """Put back what :meth:`patch` replaced in ``module`` (exactly the original
        objects; a method that the class did not define itself is deleted again, so the
        inherited one shows through). No-op when not patched.

        >>> import numpy as np, types
        >>> fake = types.ModuleType("fake"); fake.cumsum = np.cumsum; fake.ndarray = np.ndarray
        >>> d = DropIn(np); _ = d.patch(fake); d.unpatch(fake); fake.cumsum is np.cumsum
        True
        """
        saved = self._patched.pop(id(module), None)
        if saved is None:
            return
        for name, f in saved["functions"].items():
            setattr(module, name, f)
        cls = getattr(module, "ndarray", None)
        for name, before in saved["methods"].items():
            if before is _MISSING:
                try:
                    delattr(cls, name)
                except AttributeError:
                    pass
            else:
                setattr(cls, name, before)

    def is_patched(self, module):
        """Whether :meth:`patch` is in effect on ``module``.

        >>> import numpy as np, types
        >>> DropIn(np).is_patched(types.ModuleType("m"))
        False
        """
        return id(module) in self._patched


_MISSING = object()


def _entry(f, original):
    """``f``, except inside an original's call (:func:`forge_array.runtime.originals.in_original`),
    where ``original`` runs instead: CuPy's own functions call ``ndarray`` methods and other
    functions that may be patched."""

    @functools.wraps(f)
    def entry(*args, **kwargs):
        if in_original():
            return original(*args, **kwargs)
        return f(*args, **kwargs)

    return entry


class _Namespace:
    """``xp``'s namespace with a :class:`DropIn`'s functions in front (see
    :func:`namespace`)."""

    def __init__(self, xp, dropin):
        self.__dict__.update(dropin.functions)
        self.__dict__["_xp"] = xp
        self.__dict__["dropin"] = dropin

    def __getattr__(self, name):
        return getattr(self.__dict__["_xp"], name)

    def __dir__(self):
        return sorted(set(dir(self._xp)) | set(self.__dict__))

    def __repr__(self):
        return f"<forge_array drop-in over {getattr(self._xp, '__name__', self._xp)!r}>"


def namespace(xp, dropin=None):
    """A module-like object: ``xp``'s whole namespace, with the functions of
    :data:`FUNCTIONS` replaced by a :class:`DropIn`'s (``forge_array.cupy`` is this over
    ``cupy``; over ``numpy`` it runs the same code in the simulator, e.g. for
    ``bench/cupy_workload.py --dry-run``).

    >>> import numpy as np
    >>> fnp = namespace(np)
    >>> fnp.arange is np.arange, int(fnp.sum(np.arange(4, dtype=np.int8)))
    (True, 6)
    """
    return _Namespace(xp, dropin if dropin is not None else DropIn(xp))
