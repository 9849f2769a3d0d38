"""kiln.Config: LoaderConfig's fields, and the KILN_* variables through from_env."""

import pathlib

import pytest

import kiln

FIELDS = ["artifact_path", "cache_dir", "mirrors", "index_sha256", "tuf_root", "ca_bundle",
          "offline", "disable_jit", "allow_stale", "use_installed_store", "installed_store",
          "log_level", "api_log", "log_file", "nvrtc_library", "cuda_home"]


def test_config_has_exactly_loader_configs_fields():
    assert kiln.Config.fields() == FIELDS
    c = kiln.Config()
    for f in FIELDS:
        getattr(c, f)
    assert "offline=False" in repr(c)


def test_config_reads_no_environment_and_from_env_does(monkeypatch, tmp_path):
    monkeypatch.setenv("KILN_OFFLINE", "1")
    monkeypatch.setenv("KILN_ARTIFACT_PATH", f"{tmp_path}/a:{tmp_path}/b")
    monkeypatch.setenv("KILN_MIRRORS", "https://m1.example https://m2.example")
    assert kiln.Config().offline is False
    env = kiln.Config.from_env()
    assert env.offline is True
    assert env.artifact_path == (f"{tmp_path}/a", f"{tmp_path}/b")
    assert env.mirrors == ("https://m1.example", "https://m2.example")
    # Explicit fields win over the variables.
    assert kiln.Config.from_env(offline=False).offline is False


def test_fields_take_paths_and_lists_of_paths(tmp_path):
    c = kiln.Config(artifact_path=[tmp_path / "s1", str(tmp_path / "s2")], cache_dir=tmp_path,
                    api_log=2, offline=True)
    assert c.artifact_path == (str(tmp_path / "s1"), str(tmp_path / "s2"))
    assert c.cache_dir == str(tmp_path)
    assert (c.api_log, c.offline) == (2, True)
    d = c.replace(offline=False)
    assert (d.offline, c.offline) == (False, True)


def test_unknown_field_is_a_usage_error_listing_the_fields():
    with pytest.raises(kiln.UsageError) as e:
        kiln.Config(ofline=True)
    assert e.value.setting == "ofline"
    assert "artifact_path" in str(e.value) and e.value.exit_code == 2


def test_wrongly_typed_field_is_a_usage_error_naming_it():
    with pytest.raises(kiln.UsageError) as e:
        kiln.Config(api_log="loud")
    assert e.value.setting == "api_log"
    with pytest.raises(kiln.UsageError) as e:
        kiln.Config(artifact_path="/one/string")
    assert e.value.setting == "artifact_path" and "list" in str(e.value)


def test_bad_variable_is_a_usage_error_naming_variable_and_value(monkeypatch):
    monkeypatch.setenv("KILN_OFFLINE", "maybe")
    with pytest.raises(kiln.UsageError) as e:
        kiln.Config.from_env()
    assert (e.value.variable, e.value.value) == ("KILN_OFFLINE", "maybe")
    assert e.value.kind == "usage"
