"""The runtime wheel as pip installed it: where kiln comes from, its tag, what it exports."""

import os
import pathlib
import re
import subprocess
import sys
import zipfile

import kiln
from kiln import _kiln

WHEEL = pathlib.Path(os.environ["KILN_TEST_RUNTIME_WHEEL"])


def test_kiln_is_imported_from_the_venv_not_the_source_tree():
    module = pathlib.Path(kiln.__file__).resolve()
    assert module.is_relative_to(pathlib.Path(sys.prefix).resolve()), (module, sys.prefix)
    assert "site-packages" in module.parts
    assert pathlib.Path(_kiln.__file__).name == "_kiln.abi3.so"


def test_wheel_is_one_abi3_manylinux_wheel_of_this_version():
    m = re.fullmatch(r"kiln-(.+)-cp312-abi3-manylinux_(\d+)_(\d+)_x86_64\.whl", WHEEL.name)
    assert m, WHEEL.name
    assert m.group(1) == kiln.__version__
    source = pathlib.Path(os.environ["KILN_TEST_SOURCE_DIR"])
    assert kiln.__version__ == (source / "VERSION").read_text().strip()
    with zipfile.ZipFile(WHEEL) as z:
        meta = z.read(f"kiln-{kiln.__version__}.dist-info/METADATA").decode()
        names = z.namelist()
    # The distribution's floor: 3.10 and 3.11 have wheels of their own (docs/wheels.md, "The
    # runtime wheels"); the abi3 tag is what keeps this one to 3.12 and later.
    assert "Requires-Python: >=3.10" in meta
    assert "kiln/_kiln.abi3.so" in names
    # Only the runtime: no packager, no package wheel's files.
    assert not [n for n in names if n.startswith("kiln/") and n.endswith((".json", ".cu"))]


def test_auditwheel_show_finds_it_consistent_with_a_manylinux_policy():
    tools = pathlib.Path(os.environ["KILN_TEST_PYBUILD"])
    out = subprocess.run([str(tools / "bin" / "auditwheel"), "show", str(WHEEL)],
                         capture_output=True, text=True, check=True).stdout
    out = " ".join(out.split())  # auditwheel wraps its sentences
    assert 'consistent with the following platform tag: "manylinux_' in out, out


def _dynamic(flag: str) -> str:
    return subprocess.run(["readelf", "--wide", flag, _kiln.__file__], capture_output=True,
                          text=True, check=True).stdout


def test_extension_exports_only_its_init_function():
    syms = subprocess.run(["nm", "-D", "--defined-only", _kiln.__file__], capture_output=True,
                          text=True, check=True).stdout.split("\n")
    exported = sorted(line.split()[-1] for line in syms if line.strip() and " T " in line)
    assert exported == ["PyInit__kiln"], exported


def test_extension_loads_libcurl_and_libarchive_lazily_and_libstdcxx_statically():
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", _dynamic("-d"))
    assert not [n for n in needed if n.startswith(("libcurl", "libarchive", "libstdc++",
                                                    "libpython", "libcuda"))], needed
    assert "libc.so.6" in needed


def test_build_facts_name_the_formats_this_runtime_reads():
    facts = kiln.build_facts()
    assert facts["version"] == kiln.__version__
    assert facts["manifest_format"] >= 1 and facts["index_format"] >= 1
    assert facts["package_description_format"] == 1
    assert re.fullmatch(r"\d+\.\d+\.\d+", facts["cuda"])
