"""Every process-wide setting of forge_array: one table, read from the environment once at
import (standard library only, so reading it loads neither NumPy nor numba), changed at run
time through :func:`set_flags` or the :func:`flags` context manager.

| flag | environment | default | at run time |
|---|---|---|---|
| ``strict`` | ``FORGE_ARRAY_STRICT`` | off | yes |
| ``fusion`` | ``FORGE_ARRAY_FUSION`` | on (off with ``kernels`` off) | yes |
| ``fusion_min_size`` | ``FORGE_ARRAY_FUSION_MIN_SIZE`` | 16777216 | yes |
| ``fusion_alone`` | ``FORGE_ARRAY_FUSION_ALONE`` | 2 | yes |
| ``compile`` | ``FORGE_ARRAY_COMPILE`` | ``"background"`` (``"sync"`` simulated) | yes |
| ``build_process`` | ``FORGE_ARRAY_BUILD_PROCESS`` | on | yes (the next build) |
| ``prebuilt`` | ``FORGE_ARRAY_PREBUILT`` | on | yes |
| ``link`` | ``FORGE_ARRAY_LINK`` | on | yes |
| ``device`` | ``FORGE_ARRAY_DEVICE`` | ``""`` (``cuda:0``, else ``cpu``) | yes |
| ``tuning`` | ``FORGE_ARRAY_TUNING`` | ``{}`` | yes |
| ``kernels`` | ``FORGE_ARRAY_KERNELS`` | on | fixed at start |
| ``simulate`` | ``FORGE_ARRAY_SIMULATE`` | off | fixed at start |
| ``cache_dir`` | ``FORGE_ARRAY_CACHE_DIR`` | ``~/.cache/forge_array/kernels`` | fixed at start |
| ``launch`` | ``FORGE_ARRAY_LAUNCH`` | ``"driver"`` | fixed at start |
| ``target_cc`` | ``FORGE_ARRAY_TARGET_CC`` | ``None`` (the device's) | fixed at start |
| ``sim_seed``, ``sim_stale``, ``sim_barrier_timeout`` | ``FORGE_ARRAY_SIM_*`` | 12345, 1/3, 30 | fixed at start |
| ``scan_count``, ``scan_trace`` | ``FORGE_ARRAY_SCAN_*`` | off | fixed at start |

Each flag keeps its value in a one-element list, :attr:`Flag.cell`, which the modules that
read it on hot paths hold directly (one index per read); a module that must act when a flag
changes (compute pending fused work, forget promoted dtypes, forget tuning) registers a
callback with :func:`on_change`.

```python
import forge_array as xp

xp.get_flags()["strict"]                 # False
with xp.flags(strict=True, fusion=False):
    ...                                  # the standard's promotion table alone, no fusion
xp.set_flags(compile="sync")             # wait for kernels instead of running CuPy meanwhile
xp.reset_flags()                         # back to the environment's settings
```

>>> from forge_array.runtime import flags
>>> flags.get_flags()["fusion_min_size"] >= 0
True
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import warnings

__all__ = ["Flag", "FLAGS", "get_flags", "set_flags", "reset_flags", "flags", "on_change", "flag"]

_FALSE = ("", "0", "false", "no", "off")


def _bool_true_unless_off(text):
    return text.strip().lower() not in ("0", "false", "no", "off")


def _prebuilt_mode(text):
    text = text.strip().lower()
    return "exact" if text == "exact" else _bool_true_unless_off(text)


def _bool_off_unless_on(text):
    return text.strip().lower() not in _FALSE


def _count(text):
    value = int(text)
    if value < 0:
        raise ValueError("must be 0 or more")
    return value


def _tuning(text):
    text = text.strip()
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"is not valid JSON: {exc}") from None
    return _tuning_value(data)


def _tuning_value(data):
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError('must map kernel kinds to dicts, e.g. {"scan": {"block": 128}}')
    return data


class Flag:
    """One setting: its name, environment variable, parser of the variable's text, value check
    for :func:`set_flags`, and whether it may change after start."""

    __slots__ = ("name", "env", "parse", "check", "settable", "doc", "cell", "initial", "callbacks")

    def __init__(self, name, env, parse, default, doc, check=None, settable=True):
        self.name, self.env, self.parse, self.doc = name, env, parse, doc
        self.check = check
        self.settable = settable
        self.callbacks: list = []
        raw = os.environ.get(env)
        if raw is None:
            value = default
        else:
            try:
                value = parse(raw)
            except (TypeError, ValueError) as exc:
                warnings.warn(f"{env}={raw!r} is not valid ({exc}); using {default!r}", RuntimeWarning,
                              stacklevel=4)
                value = default
        #: the value as read at import (what :func:`reset_flags` restores)
        self.initial = value
        #: ``[value]``: modules read ``cell[0]``
        self.cell = [value]

    @property
    def value(self):
        return self.cell[0]

    def __repr__(self):
        return f"Flag({self.name!r}, {self.env}={self.cell[0]!r})"


def _choice(*options):
    def parse(text):
        text = text.strip().lower()
        if text not in options:
            raise ValueError(f"must be one of {', '.join(map(repr, options))}")
        return text
    return parse


def _as_bool(value):
    if not isinstance(value, (bool, int)):
        raise TypeError(f"expected True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def _as_prebuilt(value):
    return "exact" if value == "exact" else _as_bool(value)


def _as_count(value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected an integer >= 0, got {value!r}")
    return value


def _as_choice(*options):
    def check(value):
        if value not in options:
            raise ValueError(f"expected one of {', '.join(map(repr, options))}, got {value!r}")
        return value
    return check


def _as_str(value):
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__} {value!r}")
    return value


_simulate_requested = _bool_off_unless_on(os.environ.get("FORGE_ARRAY_SIMULATE", ""))


def _simulated() -> bool:
    if "numba.cuda" in sys.modules:  # numba decided when it was imported
        return bool(sys.modules["numba.cuda"].config.ENABLE_CUDASIM)
    return _simulate_requested or os.environ.get("NUMBA_ENABLE_CUDASIM", "").strip() not in ("", "0")


def _compute_capability(text):
    """``"8.0"`` or ``"80"`` -> ``(8, 0)``; ``""`` -> None."""
    text = text.strip()
    if not text:
        return None
    major, _, minor = text.partition(".") if "." in text else (text[:-1], "", text[-1:])
    return (int(major), int(minor))


def _default_cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "forge_array", "kernels")


FLAGS: dict = {}


def _define(name, env, parse, default, doc, check=None, settable=True):
    f = FLAGS[name] = Flag(name, env, parse, default, doc, check, settable)
    return f


_define("simulate", "FORGE_ARRAY_SIMULATE", _bool_off_unless_on, False,
        "run our kernels in numba's CUDA simulator on NumPy buffers", settable=False)
FLAGS["simulate"].cell[0] = FLAGS["simulate"].initial = _simulated()
_define("kernels", "FORGE_ARRAY_KERNELS", _bool_true_unless_off, True,
        "our kernels on (off: every operation runs on CuPy / NumPy)", settable=False)
_define("cache_dir", "FORGE_ARRAY_CACHE_DIR", lambda t: t or _default_cache_dir(), _default_cache_dir(),
        "directory of the on-disk kernel cache", settable=False)
_define("launch", "FORGE_ARRAY_LAUNCH", _choice("driver", "cupy"), "driver",
        "how kernels are launched: the CUDA driver directly, or through CuPy", settable=False)
_define("target_cc", "FORGE_ARRAY_TARGET_CC", _compute_capability, None,
        "compile kernels for this compute capability (e.g. 8.0: PTX the driver JITs for later GPUs) "
        "instead of the device's", settable=False)
_define("sim_seed", "FORGE_ARRAY_SIM_SEED", int, 12345,
        "seed of the simulator's model of weak memory visibility", settable=False)
_define("sim_stale", "FORGE_ARRAY_SIM_STALE", float, 1 / 3,
        "the simulator's chance that a relaxed load sees an older value", settable=False)
_define("sim_barrier_timeout", "FORGE_ARRAY_SIM_BARRIER_TIMEOUT", float, 30.0,
        "seconds a simulated lane waits at a barrier before the launch is called deadlocked",
        settable=False)
_define("scan_count", "FORGE_ARRAY_SCAN_COUNT", _bool_off_unless_on, False,
        "look-back scans count their waits (always on in the simulator)", settable=False)
_define("scan_trace", "FORGE_ARRAY_SCAN_TRACE", _bool_off_unless_on, False,
        "pipelined scans record when each tile ran", settable=False)
_define("strict", "FORGE_ARRAY_STRICT", _bool_off_unless_on, False,
        "type promotion by the standard's table alone (mixed kinds and integer `/` raise)",
        check=_as_bool)
_define("fusion", "FORGE_ARRAY_FUSION", _bool_true_unless_off, True,
        "automatic fusion of element-wise steps into the kernels that consume them",
        check=_as_bool)
FLAGS["fusion"].cell[0] = FLAGS["fusion"].initial = FLAGS["fusion"].initial and FLAGS["kernels"].initial
_define("fusion_min_size", "FORGE_ARRAY_FUSION_MIN_SIZE", _count, 1 << 24,
        "elements below which a step on materialised arrays runs eagerly", check=_as_count)
_define("fusion_alone", "FORGE_ARRAY_FUSION_ALONE", _count, 2,
        "times a one-step expression is computed alone before such steps run eagerly (0: never)",
        check=_as_count)
_define("compile", "FORGE_ARRAY_COMPILE", _choice("background", "sync"),
        "sync" if FLAGS["simulate"].initial else "background",
        "'background': a call whose kernel is not built yet runs on CuPy meanwhile; 'sync': it waits",
        check=_as_choice("background", "sync"))
_define("build_process", "FORGE_ARRAY_BUILD_PROCESS", _bool_true_unless_off, True,
        "background builds run in a separate process (off: on a thread of this one)", check=_as_bool)
_define("prebuilt", "FORGE_ARRAY_PREBUILT", _prebuilt_mode, True,
        "kernels shipped built with the package are loaded instead of compiled ('exact': only those "
        "made for the compile target itself, as the prebuild's --extend reuses them)", check=_as_prebuilt)
_define("link", "FORGE_ARRAY_LINK", _bool_true_unless_off, True,
        "a kernel that differs from one built before only in its operators links the new operators "
        "into the stored rest of it (off: every specialisation is a full numba build)", check=_as_bool)
_define("device", "FORGE_ARRAY_DEVICE", str.strip, "",
        "the default device ('' : cuda:0 when CuPy finds a GPU, else cpu)", check=_as_str)
_define("tuning", "FORGE_ARRAY_TUNING", _tuning, {},
        "launch-parameter overrides by kernel kind, applied after the tuning tables",
        check=_tuning_value)


def flag(name: str) -> Flag:
    """The :class:`Flag` called ``name`` (KeyError naming the known ones otherwise)."""
    try:
        return FLAGS[name]
    except KeyError:
        raise KeyError(f"no forge_array flag {name!r}; the flags: {', '.join(FLAGS)}") from None


def get_flags() -> dict:
    """Every flag's current value, by name.

    ```python
    import forge_array as xp
    xp.get_flags()["compile"]        # 'background' on a GPU machine
    ```
    """
    return {name: f.cell[0] for name, f in FLAGS.items()}


def on_change(name: str, callback=None):
    """Call ``callback(old, new)`` before flag ``name`` takes a new value (it may raise to
    refuse the change); without ``callback``, a decorator that registers the function."""
    f = flag(name)
    if callback is None:
        def register(fn):
            f.callbacks.append(fn)
            return fn
        return register
    f.callbacks.append(callback)
    return callback


def _assign(f, value):
    if not f.settable:
        if value == f.cell[0]:
            return
        raise ValueError(f"flag {f.name!r} is fixed when forge_array starts: set {f.env} in the "
                         f"environment before importing it")
    if f.check is not None:
        value = f.check(value)
    old = f.cell[0]
    if value == old and type(value) is type(old):
        return
    for cb in f.callbacks:
        cb(old, value)
    f.cell[0] = value


def set_flags(**values) -> dict:
    """Set flags by name; returns their previous values (a dict to pass back).

    ```python
    import forge_array as xp
    old = xp.set_flags(strict=True, fusion_min_size=0)
    xp.set_flags(**old)
    ```
    """
    found = [flag(name) for name in values]
    previous = {f.name: f.cell[0] for f in found}
    done = []
    try:
        for f in found:
            _assign(f, values[f.name])
            done.append(f)
    except BaseException:
        for f in reversed(done):
            _assign(f, previous[f.name])
        raise
    return previous


def reset_flags(*names) -> dict:
    """Return the named flags (all when none is named) to the values read from the environment
    at import; returns their previous values."""
    chosen = [flag(n) for n in names] if names else [f for f in FLAGS.values() if f.settable]
    return set_flags(**{f.name: f.initial for f in chosen})


@contextlib.contextmanager
def flags(**values):
    """Set flags for the duration of a ``with`` block, then restore them.

    ```python
    import forge_array as xp
    with xp.flags(strict=True):
        ...
    ```
    """
    previous = set_flags(**values)
    try:
        yield get_flags()
    finally:
        set_flags(**previous)
