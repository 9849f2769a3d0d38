"""kiln's errors as Python exceptions (docs/python.md "Errors", docs/exit-codes.md).

Every failure of the loader is a `kiln.Error` carrying what `kiln::Error` carries: the kind
("integrity", "stale", ...), the CLI's exit code for it, the message, and the context fields
(`uri`, `target`, `attack`, ...), readable as attributes (None when absent). One subclass per
kind, so `except kiln.IntegrityError:` picks one.
"""

from __future__ import annotations

import errno as _errno
from typing import Any

# The context field names in use (docs/exit-codes.md), readable as attributes even when a given
# error lacks them (then None); `argument` names a bad argument of the Python API.
KNOWN_FIELDS = (
    "variable", "value", "setting", "uri", "package", "version", "target", "path", "file",
    "field", "expected", "actual", "index", "attack", "mirror", "store", "argument",
)


class Error(Exception):
    """A kiln failure: .kind, .exit_code, .message, .fields (dict) and the fields as attributes."""

    kind: str = "internal"
    exit_code: int = 1

    def __init__(self, message: str, fields: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fields = dict(fields or {})

    def __getattr__(self, name: str) -> str | None:
        # Only reached when normal lookup fails: context fields by name.
        fields = self.__dict__.get("fields", {})
        if name in fields:
            return fields[name]
        if name in KNOWN_FIELDS:
            return None
        raise AttributeError(f"{type(self).__name__} has no attribute or context field {name!r}")

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, fields={self.fields!r})"

    def to_json(self) -> dict[str, Any]:
        """The `{"error": {...}}` object `kiln --json` prints for the same failure."""
        return {"error": {"kind": self.kind, "exit_code": self.exit_code,
                          "message": self.message, "fields": dict(self.fields)}}


class InternalError(Error):
    kind, exit_code = "internal", 1


class UsageError(Error):
    """A mistake in the call: every one raised is also the built-in a Python caller catches,
    through one of the subclasses below (TypeError, ValueError, AttributeError);
    `except kiln.UsageError` catches them all. (A file the call names that does not exist is
    a MissingFileError: a NotFoundError and a FileNotFoundError.)"""

    kind, exit_code = "usage", 2


class UsageTypeError(UsageError, TypeError):
    """A usage error of type: an argument or field of the wrong type."""


class UsageValueError(UsageError, ValueError):
    """A usage error of value: an argument or field of the right type but a bad value, or an
    object used in a state that does not allow it (a closed Loader)."""


class UsageAttributeError(UsageError, AttributeError):
    """An attribute that cannot be set (kiln.Config is immutable: use replace)."""


class IntegrityError(Error):
    kind, exit_code = "integrity", 3


class StaleError(Error):
    kind, exit_code = "stale", 4


class UnsupportedError(Error):
    kind, exit_code = "unsupported", 5


class NotFoundError(Error):
    kind, exit_code = "not-found", 6


class CompileError(Error):
    kind, exit_code = "compile", 7


class NetworkError(Error):
    kind, exit_code = "network", 8


class IoError(Error):
    kind, exit_code = "io", 9


class FormatError(Error):
    kind, exit_code = "format", 10


class DriverError(Error):
    kind, exit_code = "driver", 11


class LimitError(Error):
    kind, exit_code = "limit", 12


class MissingFileError(NotFoundError, FileNotFoundError):
    """A file the call names does not exist (.path, also .filename, names it; .errno ENOENT)."""

    def __init__(self, message: str, fields: dict[str, str] | None = None) -> None:
        super().__init__(message, fields)
        self.errno = _errno.ENOENT
        self.strerror = message
        self.filename = self.fields.get("path")


class StaleWarning(UserWarning):
    """An installed target wheel of another version than its package (kiln.load): skipped."""


ERROR_CLASSES = {
    cls.kind: cls
    for cls in (InternalError, UsageError, IntegrityError, StaleError, UnsupportedError,
                NotFoundError, CompileError, NetworkError, IoError, FormatError, DriverError,
                LimitError)
}


def _from_native(kind: str, exit_code: int, message: str, fields: list[tuple[str, str]]) -> Error:
    """The exception for a kiln::Error (called by the extension's exception translator)."""
    cls = ERROR_CLASSES.get(kind, Error)
    python = dict(fields).get("python", "")  # python/src/python_errors.hpp
    fields = [(n, v) for n, v in fields if n != "python"]
    if cls is UsageError:
        # The native side checks values (a Python type mistake is caught before it): a usage
        # error from it is a ValueError unless it says otherwise.
        cls = UsageTypeError if python == "type" else UsageValueError
    elif cls is NotFoundError and python == "missing-file":
        cls = MissingFileError
    message = _python_names(message)
    merged: dict[str, str] = {}
    for name, value in fields:
        merged.setdefault(name, value)  # the first field of a name, as kiln::Error::field()
    err = cls(message, merged)
    if cls is Error:  # a kind this module does not know (a newer libkiln): keep what it said
        err.kind, err.exit_code = kind, exit_code
    return err


def _python_names(message: str) -> str:
    """A native message as Python spells its names: the typed ops are kiln.ops.NAME there, not
    kiln::ops::NAME (the C++ API's name)."""
    return message.replace("kiln::ops::", "kiln.ops.").replace("kiln::Loader", "kiln.Loader")


def usage(message: str, argument: str, builtin: type[Exception] = ValueError,
          **fields: str) -> UsageError:
    """A UsageError naming the Python argument at fault: a UsageValueError, or the subclass of
    `builtin` (TypeError, AttributeError)."""
    cls = {TypeError: UsageTypeError, ValueError: UsageValueError,
           AttributeError: UsageAttributeError}[builtin]
    return cls(message, {"argument": argument, **fields})
