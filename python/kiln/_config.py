"""kiln.Config: a loader's configuration, immutable (docs/decisions.md, "kiln.Config is
immutable"). Its fields are kiln::LoaderConfig's (kiln/config.hpp); every field is checked when a
Config is made, so a bad value fails where it is written, not at the first get. The native
config (kiln._kiln.Config) is made from it when a loader needs one."""

from __future__ import annotations

import os
from typing import Any

from kiln import _kiln
from kiln._errors import usage

_PATH_LISTS = ("artifact_path", "mirrors")
_PATHS = ("cache_dir", "tuf_root", "ca_bundle", "installed_store", "log_file", "nvrtc_library",
          "cuda_home")
_BOOLS = ("offline", "disable_jit", "allow_stale", "use_installed_store")
LOG_LEVELS = ("error", "warn", "info", "debug")
FIELDS = ("artifact_path", "cache_dir", "mirrors", "index_sha256", "tuf_root", "ca_bundle",
          "offline", "disable_jit", "allow_stale", "use_installed_store", "installed_store",
          "log_level", "api_log", "log_file", "nvrtc_library", "cuda_home")


def _type_name(value: object) -> str:
    return type(value).__name__


def _path(field: str, value: object) -> str:
    if isinstance(value, (str, os.PathLike)):
        p = os.fspath(value)
        if isinstance(p, str):
            return p
    raise usage(f"Config.{field} takes a path (str or os.PathLike), not a {_type_name(value)}",
                field, TypeError, setting=field)


def _check(field: str, value: Any) -> Any:
    """`value` as the field holds it; a UsageTypeError or UsageValueError naming the field."""
    if field in _PATH_LISTS:
        what = "URLs" if field == "mirrors" else "directories"
        if isinstance(value, (str, bytes, os.PathLike)) or not isinstance(value, (list, tuple)):
            raise usage(f"Config.{field} takes a list of {what}, not a {_type_name(value)}",
                        field, TypeError, setting=field)
        items = []
        for i, item in enumerate(value):
            if field == "mirrors" and not isinstance(item, str):
                raise usage(f"Config.mirrors[{i}]: a URL is a str, not a {_type_name(item)}",
                            field, TypeError, setting=field)
            p = item if field == "mirrors" else _path(f"{field}[{i}]", item)
            if not p:
                raise usage(f"Config.{field}[{i}] is empty", field, setting=field)
            items.append(p)
        return tuple(items)
    if field in _BOOLS:
        if not isinstance(value, bool):
            raise usage(f"Config.{field} takes True or False, not {value!r}", field, TypeError,
                        setting=field)
        return value
    if field in _PATHS:
        return _path(field, value)
    if field == "index_sha256":
        if not isinstance(value, str):
            raise usage(f"Config.index_sha256 takes a str, not a {_type_name(value)}", field,
                        TypeError, setting=field)
        if value and (len(value) != 64 or value.strip("0123456789abcdef")):
            raise usage(f"Config.index_sha256: {value!r} is not a SHA-256 digest (64 lowercase "
                        "hex digits, or '' for none)", field, setting=field, value=value)
        return value
    if field == "log_level":
        if not isinstance(value, str):
            raise usage(f"Config.log_level takes a str, not a {_type_name(value)}", field,
                        TypeError, setting=field)
        if value not in LOG_LEVELS:
            raise usage(f"Config.log_level: {value!r} is not a log level: one of "
                        f"{', '.join(LOG_LEVELS)}", field, setting=field, value=value)
        return value
    if field == "api_log":
        if isinstance(value, bool) or not isinstance(value, int):
            raise usage(f"Config.api_log takes an int, not a {_type_name(value)}", field,
                        TypeError, setting=field)
        if not 0 <= value <= 3:
            raise usage(f"Config.api_log: {value} is not an API log level: 0, 1, 2 or 3", field,
                        setting=field, value=str(value))
        return value
    raise usage(f"Config has no field {field!r}; its fields: {', '.join(FIELDS)}", field,
                TypeError, setting=field)


class Config:
    """A loader's configuration: kiln::LoaderConfig's fields (docs/loader.md "Settings").

    Config(**fields) starts from the built-in defaults and reads no environment;
    Config.from_env(**fields) starts from the KILN_* variables; explicit fields win in both.
    A Config is immutable and compares by value: config.replace(**fields) is a changed copy.
    The path lists (artifact_path, mirrors) are tuples. A field of the wrong type is a
    kiln.UsageTypeError, a bad value a kiln.UsageValueError, both naming it (.setting).

    Parameters (all keyword-only): artifact_path (store directories, searched first),
    cache_dir, mirrors (URLs), index_sha256 (the digest pinning a mirror's index), tuf_root,
    ca_bundle, offline, disable_jit, allow_stale, use_installed_store, installed_store,
    log_level ("error", "warn", "info" or "debug"), api_log (0 to 3), log_file, nvrtc_library,
    cuda_home.
    """

    __slots__ = FIELDS
    artifact_path: tuple[str, ...]
    cache_dir: str
    mirrors: tuple[str, ...]
    index_sha256: str
    tuf_root: str
    ca_bundle: str
    offline: bool
    disable_jit: bool
    allow_stale: bool
    use_installed_store: bool
    installed_store: str
    log_level: str
    api_log: int
    log_file: str
    nvrtc_library: str
    cuda_home: str

    def __init__(self, **fields: Any) -> None:
        self._set_all(_from_native(_kiln.Config()), fields)

    def _set_all(self, base: dict[str, Any], fields: dict[str, Any]) -> None:
        values = dict(base)
        for name, value in fields.items():
            values[name] = _check(name, value)
        for name in FIELDS:
            object.__setattr__(self, name, values[name])

    @classmethod
    def from_env(cls, **fields: Any) -> Config:
        """The KILN_* variables (docs/loader.md "Settings"), then `fields`; a bad variable is a
        kiln.UsageValueError naming it (.variable, .value)."""
        self = cls.__new__(cls)
        self._set_all(_from_native(_kiln.Config.from_env()), fields)
        return self

    @staticmethod
    def fields() -> list[str]:
        """The field names, in order."""
        return list(FIELDS)

    def replace(self, **fields: Any) -> Config:
        """A copy with `fields` changed (each checked as Config() checks it)."""
        new = Config.__new__(Config)
        new._set_all(self._asdict(), fields)
        return new

    def _asdict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FIELDS}

    def _native(self) -> Any:
        """The kiln._kiln.Config (kiln::LoaderConfig) a native loader takes."""
        d = self._asdict()
        for name in _PATH_LISTS:
            d[name] = list(d[name])
        return _kiln.Config(**d)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in FIELDS:
            raise usage(f"kiln.Config is immutable: config.replace({name}=...) makes a changed "
                        "copy (a loader keeps the config it was made with)", name,
                        AttributeError, setting=name)
        raise usage(f"kiln.Config has no field {name!r}; its fields: {', '.join(FIELDS)}", name,
                    AttributeError, setting=name)

    def __delattr__(self, name: str) -> None:
        self.__setattr__(name, None)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Config):
            return NotImplemented
        return self._asdict() == other._asdict()

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, name) for name in FIELDS))

    def __repr__(self) -> str:
        return "kiln.Config(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in FIELDS) + ")"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (self._asdict(),))


def _restore(fields: dict[str, Any]) -> Config:
    return Config(**fields)


def _from_native(native: Any) -> dict[str, Any]:
    d = {name: getattr(native, name) for name in FIELDS}
    for name in _PATH_LISTS:
        d[name] = tuple(d[name])
    return d


def as_config(config: object, argument: str = "config") -> Config:
    """`config` if it is a kiln.Config; a UsageTypeError naming `argument` otherwise."""
    if isinstance(config, Config):
        return config
    hint = " (kiln.Config(**that_dict) makes one)" if isinstance(config, dict) else ""
    raise usage(f"{argument}= takes a kiln.Config, not a {_type_name(config)}{hint}", argument,
                TypeError)


