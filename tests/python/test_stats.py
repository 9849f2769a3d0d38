"""kiln.Loader.stats() and the line at exit at KILN_LOG=info, over a package built by the real
`kiln build` and the stand-in driver (conftest.py)."""

import shutil
import textwrap

import pytest

import kiln
from conftest import STAND_IN, isolated_config, run_child

REASONS = {"internal", "usage", "integrity", "stale", "unsupported", "not-found", "compile",
           "network", "io", "format", "driver", "limit"}


def artifact(store, uri):
    (path,) = list(store.rglob(f"{uri}.fatbin"))
    return path


def test_a_store_get_is_one_store_hit_with_its_bytes_then_in_process_hits(stand_in, tiny_package,
                                                                          tmp_path):
    loader = kiln.Loader(description=tiny_package.description, config=isolated_config(tmp_path))
    before = loader.stats()
    assert before["stats_format"] == 1
    assert before["hits"] == {"memory": 0, "store": 0, "mirror": 0, "jit": 0}
    loader.get("scale_dtype_f32")
    loader.get("scale_dtype_f32")
    s = loader.stats()
    size = artifact(tiny_package.store, "scale_dtype_f32").stat().st_size
    assert s["hits"] == {"memory": 1, "store": 1, "mirror": 0, "jit": 0}
    assert s["misses"] == 0
    assert s["bytes"] == {"read": size, "verified": size, "fetched": 0}
    assert s["time_ns"]["store"] > 0 and s["time_ns"]["jit"] == 0
    assert s["jit_compiles"] == 0
    assert set(s["rejected"]) == REASONS and sum(s["rejected"].values()) == 0
    # The counters only grow: the work in between is the difference.
    loader.get("scale_dtype_f32")
    assert loader.stats()["hits"]["memory"] - s["hits"]["memory"] == 1


def test_a_refused_candidate_is_counted_by_its_reason(stand_in, tiny_package, tmp_path):
    # A copy of the store, first on the artifact path, with the artifact's bytes changed (same
    # size): refused for integrity; the installed store beside the description serves.
    bad = tmp_path / "bad-store"
    shutil.copytree(tiny_package.store, bad)
    a = artifact(bad, "scale_dtype_f32")
    data = bytearray(a.read_bytes())
    data[-1] ^= 0xFF
    a.write_bytes(bytes(data))
    loader = kiln.Loader(description=tiny_package.description,
                         config=isolated_config(tmp_path, artifact_path=[str(bad)]))
    loader.get("scale_dtype_f32")
    s = loader.stats()
    assert s["hits"]["store"] == 1
    assert s["rejected"]["integrity"] == 1
    assert s["bytes"]["read"] == 2 * len(data) and s["bytes"]["verified"] == len(data)


def test_a_get_no_tier_serves_is_a_miss(stand_in, tiny_package, tmp_path):
    loader = kiln.Loader(description=tiny_package.description,
                         config=isolated_config(tmp_path, use_installed_store=False))
    with pytest.raises(kiln.NotFoundError):
        loader.get("scale_dtype_f32")
    s = loader.stats()
    assert s["misses"] == 1 and sum(s["hits"].values()) == 0


def test_a_closed_loader_has_no_statistics(stand_in, tiny_package, tmp_path):
    loader = kiln.Loader(description=tiny_package.description, config=isolated_config(tmp_path))
    loader.close()
    with pytest.raises(kiln.UsageValueError):
        loader.stats()


def test_a_loader_not_yet_started_reports_zeros_without_starting(tiny_package, tmp_path):
    # kiln.load's loaders start at their first use (_arrange); asking for statistics is none.
    loader = kiln.Loader(description=tiny_package.description, config=isolated_config(tmp_path),
                         _arrange=lambda config: config)
    s = loader.stats()
    assert loader._native_loader is None
    assert sum(s["hits"].values()) == 0 and s["misses"] == 0
    assert set(s["rejected"]) == REASONS


CHILD = """
import ctypes, kiln
ctypes.CDLL({stand_in!r}, mode=ctypes.RTLD_GLOBAL)
config = kiln.Config(cache_dir={cache!r}, offline=True, disable_jit=True, log_level={level!r})
loader = kiln.Loader(description={description!r}, config=config)
loader.get("scale_dtype_f32")
loader.get("scale_dtype_f32")
"""


@pytest.mark.skipif(STAND_IN is None, reason="the child loads the stand-in driver")
def test_the_process_ends_with_one_summary_line_at_info_and_none_below(tiny_package, tmp_path):
    line = ("kiln [info] loader statistics at exit (1 loader): 2 gets; hits: memory 1, store 1, "
            "mirror 0, jit 0; misses 0; bytes read ")
    for level in ("info", "warn"):
        r = run_child(CHILD.format(stand_in=str(STAND_IN), cache=str(tmp_path / "cache"),
                                   level=level, description=str(tiny_package.description)))
        assert r.returncode == 0, r.stderr
        if level == "info":
            assert r.stderr.count("loader statistics at exit") == 1, r.stderr
            assert line in r.stderr, r.stderr
        else:
            assert "loader statistics" not in r.stderr, r.stderr


def test_a_process_that_made_no_loader_writes_nothing_at_exit():
    r = run_child(textwrap.dedent("""
        import kiln
        kiln.Config(log_level="info")
    """), {"KILN_LOG": "info"})
    assert r.returncode == 0, r.stderr
    assert "loader statistics" not in r.stderr, r.stderr
