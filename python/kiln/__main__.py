"""python -m kiln: `doctor [--json]` (what this machine offers a Python user of kiln) and
`install ...` (kiln._install: choose and pip-install a package's target wheel)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = ("usage: python -m kiln doctor [--json]\n"
             "       python -m kiln install PACKAGE [options]  (python -m kiln install --help)\n")
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(usage)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "doctor":
        from kiln._doctor import main as doctor

        return doctor(rest)
    if command == "install":
        try:
            from kiln import _install
        except ImportError as e:
            sys.stderr.write(f"kiln: error (unsupported): this kiln runtime has no installer "
                             f"(kiln._install: {e})\n")
            return 5
        return _install.main(rest)
    sys.stderr.write(f"kiln: error (usage): unknown command {command!r}\n{usage}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
