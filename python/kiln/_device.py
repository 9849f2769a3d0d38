"""Devices and compute capabilities, as every Python GPU library names them: a *device* is an
ordinal (0, 1, ...), a *compute capability* is `cc` (kiln.ComputeCapability(9, 0), or 90,
"9.0", "sm_90" where one is taken). An argument of the other kind is refused with a message
naming the right one."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

from kiln import _kiln
from kiln._errors import usage


class ComputeCapability(NamedTuple):
    """A device's compute capability, as (major, minor): ComputeCapability(9, 0) is 9.0.
    Compares as a tuple: `cc >= (8, 0)`."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


class Device(NamedTuple):
    """A CUDA device as the driver reports it."""

    ordinal: int  # the device's index, as torch.device("cuda", ordinal) and CuPy name it
    name: str
    cc: ComputeCapability
    target: str  # the SASS target of that capability, "sm_90"


def _cc(value: int) -> ComputeCapability:
    return ComputeCapability(value // 10, value % 10)


def devices() -> list[Device]:
    """The CUDA devices through the driver (starts it); kiln.UnsupportedError when
    libcuda.so.1 does not load or initialise."""
    return [Device(o, n, _cc(cc), t) for o, n, cc, t in _kiln.devices()]


def cc_value(cc: object, name: str = "cc") -> int:
    """A compute capability as the native side takes it (90 for 9.0), from a ComputeCapability
    or a (major, minor) pair, 90, "9.0" or a target name ("sm_90")."""
    if isinstance(cc, tuple):
        if len(cc) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in cc):
            raise usage(f"{name}: {cc!r} is no compute capability: a (major, minor) pair of "
                        "ints, as kiln.ComputeCapability(9, 0)", name, TypeError)
        major, minor = cc
        if not (1 <= major <= 99 and 0 <= minor <= 9):
            raise usage(f"{name}: {cc!r} is no compute capability", name, value=str(cc))
        return major * 10 + minor
    if isinstance(cc, bool) or not isinstance(cc, (int, str)):
        raise usage(f"{name}: a {type(cc).__name__} is no compute capability: give 90 (for "
                    "9.0), \"9.0\", \"sm_90\" or kiln.ComputeCapability(9, 0)", name, TypeError)
    return int(_kiln.parse_cc(cc))


def ordinal(device: object, name: str = "device") -> int:
    """A device ordinal (operator.index); a string or a pair is a compute capability given in
    the wrong place, refused naming cc=."""
    if isinstance(device, (str, tuple)):
        raise usage(f"{name}= is a device ordinal (0, 1, ...); {device!r} is a compute "
                    f"capability: pass it as cc={device!r}", name, TypeError, value=str(device))
    if isinstance(device, bool):
        raise usage(f"{name}= is a device ordinal (0, 1, ...), not {device!r}", name, TypeError)
    try:
        return operator.index(device)  # type: ignore[arg-type]
    except TypeError:
        raise usage(f"{name}= is a device ordinal (0, 1, ...), not a {type(device).__name__}",
                    name, TypeError) from None


def cc_of_device(device: object, name: str = "device") -> int:
    """The compute capability (90 for 9.0) of device ordinal `device` (starts the driver)."""
    n = ordinal(device, name)
    found = _kiln.devices()
    for o, _, cc, _ in found:
        if o == n:
            return int(cc)
    hint = (f"; for compute capability {n // 10}.{n % 10} pass cc={n}"
            if 10 <= n <= 999 else "")
    raise usage(f"{name}={n}: no such device: the driver reports {len(found)} device"
                f"{'' if len(found) == 1 else 's'}{hint}", name, value=str(n))


def _choice_cc(cc: object, device: object) -> int | None:
    if cc is not None and device is not None:
        raise usage("give device= (an ordinal) or cc= (a compute capability), not both", "cc",
                    TypeError)
    if device is not None:
        return cc_of_device(device)
    return None if cc is None else cc_value(cc)


def choose_target(available: Sequence[str], cc: object = None, *,
                  device: int | None = None) -> str | None:
    """The best of `available` (target names such as "sm_90a", "compute_80") by kiln's one
    target-choice rule, or None when none runs there.

    available: the target names to choose from.
    cc: the compute capability to choose for: 90, "9.0", "sm_90" or ComputeCapability(9, 0).
    device: a device ordinal to choose for instead (starts the driver).
    With neither: device 0.
    """
    return _kiln.choose_target(list(available), _choice_cc(cc, device))


def target_choice(available: Sequence[str], cc: object = None, *,
                  device: int | None = None) -> dict[str, Any]:
    """The whole decision of choose_target: {"cc": ComputeCapability, "target": the device's
    SASS target, "candidates": [(target, why)] best first, "rejected": [(target, why)]}.

    available, cc, device: as choose_target's (the targets, a compute capability or a device
    ordinal; with neither, device 0).
    """
    d = dict(_kiln.target_choice(list(available), _choice_cc(cc, device)))
    return {"cc": _cc(int(d["cc"])), "target": d["device"], "candidates": d["candidates"],
            "rejected": d["rejected"]}
