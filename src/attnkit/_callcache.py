"""What an op's call decides from its arguments' layouts, kept per layout: the host's fast path for repeated calls.

A call of an op with the same tensor shapes, strides, dtypes, devices and 16-byte alignments, the same scalar
arguments and the same option environment decides the same things every time: its shape and dtype checks pass, its
options resolve alike, its plan, grids and constexpr values are the same, and Triton selects the same compiled
kernel. A `CallCache` keeps those decisions (never a tensor) under a key of exactly those inputs, so a repeated
call skips them and launches the kept compiled kernels directly (`Launch`). What depends on tensor values (the
value checks of ``validate``, a length read from the device) is done on every call, never kept.

The key holds, per tensor argument, ``(shape, stride, dtype, device, data_ptr % 16)``; every other argument with
its type (ints, floats, strings, bools, None); the raw values of the environment variables of every option defined in
the op's modules and of ``TRITON_INTERPRET`` (read live, so setting a variable between calls takes effect on the
next call, as without the cache); and the current CUDA device. An argument of any other type, or a tensor whose
layout cannot be read (a fake or meta tensor), makes the call take the full path uncached. Bad input is never
kept: a call whose checks raise stores nothing and raises again on the next call.

Launches: `Launch` wraps one kernel launch (kernel, grid, constexpr keywords). Its first call goes through Triton's
JIT dispatch and keeps the compiled kernel it returns; later calls hand the arguments straight to that kernel's
launcher on the current stream (what Triton's dispatch ends with), which the key makes safe: everything Triton
specializes on (dtypes, pointer alignment, integer values derived from shapes and scalars) is fixed per entry.
Under Triton's interpreter, with launch hooks set (a profiler), or for a stand-in that returns no compiled kernel
(a test's recorder), launches go through ``kernel[grid](...)`` every time. An entry keeps the kernel object it was
configured with: code that replaces a kernel, a rule or a module constant must call `clear()` after.

``ATTNKIT_CALL_CACHE=0`` (or ``attnkit.set_call_cache(False)``) turns the cache off: every call takes the full
path. `clear()` (``attnkit.clear_call_cache()``) empties every op's cache (tests call it between tests, since they
patch rules and kernels).
"""

from __future__ import annotations

import types

import torch
from triton import knobs as _knobs

from ._runtime import interpreting
from .options import IntOption, Switch, env_snapshot

CALL_CACHE = Switch("call_cache", "ATTNKIT_CALL_CACHE", True,
                    "keep each op's layout-dependent decisions (checks, options, plan, compiled kernels) per "
                    "argument layout and option environment, and launch kept kernels directly (attnkit._callcache); "
                    "default on")

_CACHES: list = []
_ENABLED = [None]  # set_call_cache's override; None: the option
MAX_ENTRIES = 1024  # per op; a cache past it is emptied (a process with more layouts than this pays the full path)


def set_call_cache(on: bool | None) -> None:
    """Turn the call cache on or off for this process (None: back to ``ATTNKIT_CALL_CACHE``)."""
    _ENABLED[0] = on


def clear() -> None:
    """Empty every op's call cache (after patching a rule, a kernel or a module constant)."""
    for c in _CACHES:
        c.entries.clear()
        c.hits = c.misses = 0


def enabled() -> bool:
    on = _ENABLED[0]
    return CALL_CACHE.resolve(None) if on is None else on


def _option_envs(modules) -> tuple[str, ...]:
    names = {"TRITON_INTERPRET", CALL_CACHE.env}
    for m in modules:
        for v in vars(m).values():
            if isinstance(v, (Switch, IntOption)):
                names.add(v.env)
    return tuple(sorted(names))


class _Uncacheable(Exception):
    pass


def _tsig(a):
    if a is None:
        return None
    if isinstance(a, torch.Tensor):
        try:
            return a.shape, a.stride(), a.dtype, a.device, a.data_ptr() & 15
        except Exception:  # a fake or meta tensor, a tensor without storage: the full path
            raise _Uncacheable from None
    raise _Uncacheable  # not a tensor where one is expected: the full path, whose checks say so


def _ssig(a):
    if a is None:
        return None
    t = type(a)
    if t in (int, float, str, bool):
        return t, a  # typed: True and 1, 1 and 1.0 are equal keys but not the same argument to the checks
    raise _Uncacheable  # a tensor, a NumPy number, anything else: its value is not in the key, so the full path


class CallCache:
    """One op's kept decisions. `modules`: the modules whose options the op reads (their Switch / IntOption
    globals give the environment variables in the key)."""

    def __init__(self, name: str, *modules: types.ModuleType):
        self.name = name
        self.modules = modules
        self._envs = None
        self.entries: dict = {}
        self.hits = 0
        self.misses = 0
        _CACHES.append(self)

    def _env_snapshot(self) -> tuple:
        if self._envs is None:
            self._envs = env_snapshot(_option_envs(self.modules))
        return self._envs()

    def key(self, tensors: tuple, scalars: tuple):
        """The key of a call whose tensor arguments (or None) are `tensors` and whose every other argument is in
        `scalars` (ints, floats, strings, bools, None), or None where the call must take the full path: the cache
        off, an argument of another type (a tensor's value is not in the key, so a tensor among the scalars
        counts), a tensor without a readable layout."""
        if not enabled():
            return None
        try:
            sig = tuple([_tsig(a) for a in tensors]), tuple([_ssig(a) for a in scalars])
        except _Uncacheable:
            return None
        dev = torch.cuda.current_device() if torch.cuda.is_initialized() else -1
        return sig, self._env_snapshot(), dev

    def get(self, key):
        if key is None:
            return None
        e = self.entries.get(key)
        if e is None:
            self.misses += 1
        else:
            self.hits += 1
        return e

    def put(self, key, entry) -> None:
        if key is None:
            return
        if len(self.entries) >= MAX_ENTRIES:
            self.entries.clear()
        self.entries[key] = entry


def _hooks_set() -> bool:
    """Whether a launch hook is registered (Triton's hook chains, e.g. a profiler's): launches then go through
    Triton's dispatch, which calls them."""
    rt = _knobs.runtime
    return bool(getattr(rt.launch_enter_hook, "calls", rt.launch_enter_hook)) or bool(
        getattr(rt.launch_exit_hook, "calls", rt.launch_exit_hook))


class Launch:
    """One kernel launch with its grid and constexpr / launch keywords fixed; called with the runtime arguments
    (positional, in the kernel's order). See the module docstring."""

    __slots__ = ("kernel", "grid", "kwargs", "compiled", "tail", "stream_of", "prepare", "extra")

    def __init__(self, kernel, grid: tuple, kwargs: dict, prepare=None):
        self.kernel = kernel
        self.grid = tuple(grid) + (1,) * (3 - len(grid))
        self.kwargs = kwargs
        self.compiled = None
        self.tail = None
        self.stream_of = None
        self.prepare = prepare  # optional: called with the compiled kernel before its first launch (clusters)
        self.extra = None  # the owner's per-launch constants

    def __call__(self, *args):
        c = self.compiled
        if c is not None and not _hooks_set():
            g = self.grid
            c.run(g[0], g[1], g[2], self.stream_of(), c.function, c.packed_metadata, None, None, None,
                  *args, *self.tail)
            return
        self._jit(args)

    def _jit(self, args):
        k = self.kernel
        if self.prepare is not None and not interpreting():
            compiled = k.warmup(*args, grid=self.grid, **self.kwargs)
            if hasattr(compiled, "result"):
                compiled = compiled.result()
            self.prepare(compiled)
        compiled = k[self.grid](*args, **self.kwargs)
        if compiled is None or interpreting() or _hooks_set() or not hasattr(compiled, "packed_metadata"):
            return
        tail = _tail(k, len(args), self.kwargs)
        if tail is None:
            return
        compiled._init_handles()
        from triton.runtime import driver
        dev = driver.active.get_current_device()
        get_stream = driver.active.get_current_stream
        self.stream_of = lambda: get_stream(dev)
        self.tail = tail
        self.compiled = compiled


def _tail(kernel, n_pos: int, kwargs: dict):
    """The kernel's parameters after the first `n_pos` (positional) ones, from `kwargs` or their defaults, in
    order; None where they cannot be laid out so (a keyword for a positional parameter)."""
    params = getattr(kernel, "params", None)
    if params is None:
        return None
    out = []
    for p in params[n_pos:]:
        name = p.name
        if name in kwargs:
            out.append(kwargs[name])
        elif getattr(p, "has_default", False):
            out.append(p.default)
        else:
            return None
    return tuple(out)


__all__ = ["CALL_CACHE", "CallCache", "Launch", "clear", "enabled", "set_call_cache"]
