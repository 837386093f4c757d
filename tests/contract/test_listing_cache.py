"""The entry-point listing kept between processes (``trainbus.bus.listcache``): a later process
of the same environment reads it instead of listing ``sys.path``, and lists again as soon as a
distribution is installed, removed or its ``entry_points.txt`` edited; a cache that is damaged,
cannot be written or is turned off changes nothing but the time.

Each test runs real processes with a ``sys.path`` of its own (the standard library, trainbus's
core and a folder of fake distributions), so that no other test installing distributions
meanwhile changes what they see."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import trainbus
from fakedist import make_dist

CORE_SRC = os.path.dirname(os.path.dirname(os.path.abspath(trainbus.__file__)))
PAST = 1_600_000_000  # a time long settled (2020)

SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path[:] = [p for p in sys.path if p.startswith(sys.base_prefix) and "site-packages" not in p] + \\
        json.loads(sys.argv[1])
    from trainbus.bus import registry
    if len(sys.argv) > 2:  # what clear_cache() does to the next scan
        registry.scan()
        registry.clear_cache()
    scan = registry.scan()
    eps = sorted([g, ep.name, ep.value, registry.dist_name_version(ep)[0]]
                 for g, group in scan.groups.items() for ep in group)
    print(json.dumps({"source": registry._listing_source, "eps": eps}))
""")


def _settle(*paths):
    for p in paths:
        os.utime(p, (PAST, PAST))


def _scan(folders, cache_dir, *extra, off=None, cwd=None):
    """Run a process whose sys.path ends with ``folders``; returns (where its listing came from,
    the trainbus entry points it found). ``off``: the value of TRAINBUS_METADATA_CACHE."""
    env = dict(os.environ, TRAINBUS_CACHE_DIR=str(cache_dir))
    env.pop("TRAINBUS_METADATA_CACHE", None)
    if off is not None:
        env["TRAINBUS_METADATA_CACHE"] = off
    res = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps([CORE_SRC, *map(str, folders)]), *extra],
                         capture_output=True, text=True, env=env, cwd=str(cwd or cache_dir.parent / "cwd"), timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stderr == "", res.stderr  # nothing said about the cache, whatever happened to it
    out = json.loads(res.stdout.strip().splitlines()[-1])
    return out["source"], [tuple(e) for e in out["eps"]]


@pytest.fixture
def env_dirs(tmp_path):
    """(a folder of one fake plugin distribution, settled; the cache folder)."""
    root = make_dist(tmp_path / "site", "trainbus-cachedemo", "1.0",
                     {"trainbus.callbacks": {"DemoCallback": "demo_mod:Demo"}}, {"demo_mod": "class Demo: pass\n"})
    (tmp_path / "cwd").mkdir()
    _settle(root, tmp_path / "cwd", root / "trainbus_cachedemo-1.0.dist-info" / "entry_points.txt")
    return root, tmp_path / "cache"


def _files(cache_dir):
    return sorted(p.name for p in cache_dir.iterdir()) if cache_dir.exists() else []


def test_a_later_process_reads_the_listing_from_the_cache(env_dirs):
    root, cache = env_dirs
    first = _scan([root], cache)
    assert first[0] == "listing"
    assert ("trainbus.callbacks", "DemoCallback", "demo_mod:Demo", "trainbus-cachedemo") in first[1]
    assert len(_files(cache)) == 1 and _files(cache)[0].startswith("entry-points-")
    second = _scan([root], cache)
    assert second == ("cache", first[1])  # the same entry points, each with its distribution


def test_installing_or_removing_a_distribution_is_seen_by_the_next_process(env_dirs):
    root, cache = env_dirs
    _scan([root], cache)
    make_dist(root, "trainbus-cachelater", "2.0", {"trainbus.callbacks": {"LaterCallback": "later_mod:Later"}},
              {"later_mod": "class Later: pass\n"})
    source, eps = _scan([root], cache)
    assert source == "listing"
    assert ("trainbus.callbacks", "LaterCallback", "later_mod:Later", "trainbus-cachelater") in eps
    # the folder changed just now: that listing was not written; once settled, it is
    assert _scan([root], cache)[0] == "listing"
    _settle(root, root / "trainbus_cachelater-2.0.dist-info" / "entry_points.txt")
    assert _scan([root], cache)[0] == "listing"
    assert _scan([root], cache) == ("cache", eps)
    # removing a distribution changes the folder too
    import shutil

    shutil.rmtree(root / "trainbus_cachelater-2.0.dist-info")
    source, eps = _scan([root], cache)
    assert source == "listing" and not [e for e in eps if e[1] == "LaterCallback"]


def test_an_entry_points_file_edited_in_place_is_read_again(env_dirs):
    root, cache = env_dirs
    _scan([root], cache)
    ep_file = root / "trainbus_cachedemo-1.0.dist-info" / "entry_points.txt"
    ep_file.write_text("[trainbus.callbacks]\nDemoCallback = demo_mod:Renamed\n")
    _settle(root)  # the folder itself did not change: only the file's own stamp tells
    source, eps = _scan([root], cache)
    assert source == "listing"
    assert ("trainbus.callbacks", "DemoCallback", "demo_mod:Renamed", "trainbus-cachedemo") in eps


def test_a_new_folder_on_sys_path_is_another_cache(env_dirs, tmp_path):
    root, cache = env_dirs
    other = make_dist(tmp_path / "other", "trainbus-cacheother", "1.0",
                      {"trainbus.callbacks": {"OtherCallback": "other_mod:Other"}}, {})
    _settle(other, other / "trainbus_cacheother-1.0.dist-info" / "entry_points.txt")
    _scan([root], cache)
    source, eps = _scan([root, other], cache)
    assert source == "listing" and ("trainbus.callbacks", "OtherCallback", "other_mod:Other", "trainbus-cacheother") in eps
    assert len(_files(cache)) == 2
    assert _scan([root], cache)[0] == "cache"  # the first sys.path's file is still good


def test_a_damaged_cache_file_is_listed_again_and_replaced(env_dirs):
    root, cache = env_dirs
    _, eps = _scan([root], cache)
    (name,) = _files(cache)
    for damage in ("{not json", json.dumps({"format": 999}), json.dumps({"format": 1, "folders": "x"}), ""):
        (cache / name).write_text(damage)
        assert _scan([root], cache) == ("listing", eps)
        assert _scan([root], cache) == ("cache", eps)


def test_a_cache_that_cannot_be_written_changes_nothing_but_the_time(env_dirs):
    root, cache = env_dirs
    cache.parent.joinpath("a-file").write_text("not a folder")
    blocked = cache.parent / "a-file" / "cache"  # ENOTDIR: nothing can be created there
    cwd = cache.parent / "cwd"
    first = _scan([root], blocked, cwd=cwd)
    assert first[0] == "listing"
    assert _scan([root], blocked, cwd=cwd) == first  # listed again, silently, with the same result


@pytest.mark.parametrize("off", ["0", "off", "false"])
def test_the_cache_can_be_turned_off(env_dirs, off):
    root, cache = env_dirs
    assert _scan([root], cache, off=off)[0] == "listing"
    assert _scan([root], cache, off=off)[0] == "listing"
    assert _files(cache) == []


def test_clear_cache_makes_the_next_scan_list_the_folders(env_dirs):
    root, cache = env_dirs
    _, eps = _scan([root], cache)
    assert _scan([root], cache, "clear") == ("listing", eps)  # the file said "unchanged"; clear_cache wins


def test_a_zip_archive_on_sys_path_is_left_to_importlib_metadata_and_not_cached(env_dirs, tmp_path):
    import zipfile

    root, cache = env_dirs
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("trainbus_zipped-1.5.dist-info/METADATA", "Metadata-Version: 2.1\nName: trainbus-zipped\nVersion: 1.5\n")
        z.writestr("trainbus_zipped-1.5.dist-info/entry_points.txt", "[trainbus.callbacks]\nZipped = zipped_mod:Z\n")
    _settle(archive)
    import importlib_metadata

    backport = os.path.dirname(os.path.dirname(importlib_metadata.__file__))  # what that search needs
    source, eps = _scan([root, archive, backport], cache)
    assert source == "importlib_metadata"  # its own search, which reads inside the archive
    assert ("trainbus.callbacks", "Zipped", "zipped_mod:Z", "trainbus-zipped") in eps
    assert _files(cache) == []


def test_at_most_max_files_cache_files_are_kept_the_oldest_go(env_dirs, tmp_path):
    from trainbus.bus import listcache

    root, cache = env_dirs
    cache.mkdir()
    for i in range(listcache.MAX_FILES + 5):  # older files of other sys.paths
        old = cache / f"entry-points-{i:08x}.json"
        old.write_text("{}")
        os.utime(old, (PAST + i, PAST + i))
    (cache / "unrelated.txt").write_text("not ours")
    _scan([root], cache)
    names = _files(cache)
    ours = [n for n in names if n.startswith("entry-points-")]
    assert len(ours) == listcache.MAX_FILES
    assert "entry-points-00000000.json" not in names and "entry-points-00000005.json" not in names
    assert f"entry-points-{listcache.MAX_FILES + 4:08x}.json" in names  # the newest old one stays
    assert "unrelated.txt" in names
    assert _scan([root], cache)[0] == "cache"  # the new file was kept
