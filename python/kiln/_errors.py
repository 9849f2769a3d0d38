"""kiln's errors as Python exceptions (docs/python.md "Errors", docs/exit-codes.md).

Every failure of the loader is a `kiln.Error` carrying what `kiln::Error` carries: the kind
("integrity", "stale", ...), the CLI's exit code for it, the message, and the context fields
(`uri`, `target`, `attack`, ...), readable as attributes (None when absent). One subclass per
kind, so `except kiln.IntegrityError:` picks one.
"""

from __future__ import annotations

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
    kind, exit_code = "usage", 2


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
    merged: dict[str, str] = {}
    for name, value in fields:
        merged.setdefault(name, value)  # the first field of a name, as kiln::Error::field()
    err = cls(message, merged)
    if cls is Error:  # a kind this module does not know (a newer libkiln): keep what it said
        err.kind, err.exit_code = kind, exit_code
    return err


def usage(message: str, argument: str, **fields: str) -> UsageError:
    """A UsageError naming the Python argument at fault."""
    return UsageError(message, {"argument": argument, **fields})
