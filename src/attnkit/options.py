"""Tuning switches and integer options: a keyword argument or an ``ATTNKIT_...`` environment variable.

Resolution: an explicit argument beats the environment; an empty variable counts as unset; otherwise
the default. Grammar (after ONNX Runtime's review): a switch is exactly "0" or "1" ("00", "01", "-0",
"+1", " 1", "1 ", "true", "2" are rejected); an integer is a whole canonical decimal ("0" or a
digit string without leading zeros or sign) within its range. A bad value raises ``ValueError``
naming the option and where it came from, when the op is configured, never a silent default.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

_CANON_INT = re.compile(r"(0|[1-9][0-9]*)\Z")

_ENVIRON = os.environ
_STORE = getattr(_ENVIRON, "_data", None)  # CPython's own store behind os.environ (POSIX: bytes -> bytes)
_ENCODE = getattr(_ENVIRON, "encodekey", None)
_DECODE = getattr(_ENVIRON, "decodevalue", None)
_FAST = isinstance(_STORE, dict) and callable(_ENCODE) and callable(_DECODE) and os.name == "posix"
_KEYS: dict = {}


def getenv(name: str) -> str:
    """``os.environ.get(name, "")``, read live on every call, without os.environ's per-read key encoding: a dict
    lookup in the store os.environ keeps (its value decoded only when set). An op resolves 20-50 options per call,
    which through os.environ.get took about a third of the wrapper's host time. Where os.environ has been replaced
    or the store is not the expected one, os.environ.get itself."""
    if not _FAST or os.environ is not _ENVIRON:
        return os.environ.get(name, "")
    key = _KEYS.get(name)
    if key is None:
        key = _KEYS[name] = _ENCODE(name)
    raw = _STORE.get(key)
    return "" if raw is None else _DECODE(raw)


def env_snapshot(names: tuple[str, ...]):
    """A function returning the raw values of the environment variables `names` (unset: None), read live on every
    call: one C-level map over os.environ's store (a call cache's key, attnkit._callcache); where os.environ has
    been replaced or the store is not the expected one, getenv per name."""
    keys = tuple(_ENCODE(n) for n in names) if _FAST else ()
    get = _STORE.get if _FAST else None

    def snap() -> tuple:
        if _FAST and os.environ is _ENVIRON:
            return tuple(map(get, keys))
        return tuple(getenv(n) for n in names)
    return snap


@dataclass(frozen=True)
class Switch:
    name: str  # keyword argument
    env: str  # environment variable
    default: bool | None  # None: decided by a rule at launch
    what: str

    def resolve(self, value=None, environ=None) -> bool | None:
        if value is not None:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value in ("0", "1"):
                return value == "1"
            raise ValueError(f"{self.name}: must be True / False or exactly '0' / '1', got {value!r}")
        raw = getenv(self.env) if environ is None else environ.get(self.env, "")
        if raw == "":
            return self.default
        if raw not in ("0", "1"):
            raise ValueError(f"{self.name}: environment variable {self.env}={raw!r} must be exactly '0' or '1'")
        return raw == "1"


@dataclass(frozen=True)
class IntOption:
    name: str
    env: str
    default: int | None  # None: decided by a rule at launch
    lo: int
    hi: int
    what: str

    def _check(self, v: int, src: str) -> int:
        if not self.lo <= v <= self.hi:
            raise ValueError(f"{self.name}: {src} {v} is outside [{self.lo}, {self.hi}]")
        return v

    def resolve(self, value=None, environ=None) -> int | None:
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                raise ValueError(f"{self.name}: must be an int, got {value!r}")
            if isinstance(value, str):
                if not _CANON_INT.match(value):
                    raise ValueError(f"{self.name}: {value!r} is not a whole decimal integer")
                value = int(value)
            return self._check(value, "value")
        raw = getenv(self.env) if environ is None else environ.get(self.env, "")
        if raw == "":
            return self.default
        if not _CANON_INT.match(raw):
            raise ValueError(f"{self.name}: environment variable {self.env}={raw!r} is not a whole decimal integer")
        return self._check(int(raw), f"environment variable {self.env}=")
