"""kiln.load against the contract of kiln._installed (python/README.md; the module itself is the
wheel work's, tested with real installed wheels there): what load does with what
find_installed returns. The installed-package lookup is stood in for by a module of the
contract's shape; the description and the store are a real `kiln build`'s."""

import dataclasses
import pathlib
import sys
import types
import warnings

import pytest

import kiln


@dataclasses.dataclass
class Installed:
    name: str
    version: str
    description: pathlib.Path
    stores: list
    stale: list


@pytest.fixture
def installed(monkeypatch):
    found = {}

    def find_installed(name):
        if name not in found:
            raise LookupError(f"no package wheel of {name} is installed (looked for the "
                              f"distribution {name} and its target wheels)")
        return found[name]

    module = types.ModuleType("kiln._installed")
    module.find_installed = find_installed
    module.installed_packages = lambda: list(found.values())
    monkeypatch.setitem(sys.modules, "kiln._installed", module)
    monkeypatch.setattr(kiln, "_installed", module, raising=False)
    return found


def test_load_puts_the_target_wheels_stores_first_and_loads_from_them(
        stand_in, installed, tiny_package, tmp_path):
    installed["pyt-kernels"] = Installed("pyt-kernels", "1.0.0", tiny_package.description,
                                         [tiny_package.store], [])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loader = kiln.load("pyt-kernels", cache_dir=str(tmp_path / "cache"), offline=True,
                           artifact_path=[str(tmp_path / "mine")])
    assert loader.package.name == "pyt-kernels"
    loader.get("scale_dtype_f32")  # the target wheels' stores are ordered at the first use
    assert loader.config.artifact_path == (str(tiny_package.store), str(tmp_path / "mine"))
    assert str(tiny_package.store) in loader.get("scale_dtype_f32").origin


def test_load_warns_for_each_stale_target_wheel_and_goes_on(stand_in, installed, tiny_package,
                                                           tmp_path):
    message = ("pyt_kernels_cu13_sm90 1.0.1 is installed for pyt-kernels 1.0.0: skipped; "
               "pip install pyt_kernels_cu13_sm90==1.0.0")
    installed["pyt-kernels"] = Installed("pyt-kernels", "1.0.0", tiny_package.description, [],
                                         [message])
    with pytest.warns(kiln.StaleWarning, match="pip install pyt_kernels_cu13_sm90==1.0.0"):
        loader = kiln.load("pyt-kernels", config=kiln.Config(cache_dir=str(tmp_path / "c"),
                                                             offline=True, disable_jit=True))
    # No target store: the loader's next tiers (here the description's own store) decide.
    assert loader.resolve("scale_dtype_f32", cc=90)["chosen"]["tier"] == "store"


def test_load_of_a_package_not_installed_is_not_found_naming_what_was_looked_for(installed):
    with pytest.raises(kiln.NotFoundError) as e:
        kiln.load("acme-kernels")
    assert e.value.package == "acme-kernels"
    assert "looked for the distribution acme-kernels" in str(e.value)
