"""Startup: ``import trainbus`` stays light, the installed distributions' entry points are read
once per process (by listing ``sys.path``, the same distributions ``importlib_metadata`` finds),
and a training imports the plugin distributions its configuration uses and no other (nor the
input sources and session initializers it does not use), looking each ambient plugin through once.

The times themselves are measured by ``bench/bench_startup.py``, not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile

import importlib_metadata
import pytest

from fakedist import make_dist, on_path
from trainbus.bus import modpaths, registry


def _trainbus_eps(eps):
    """(group, name, value, distribution) of the entry points in trainbus groups, in order."""
    return [(ep.group, ep.name, ep.value, registry._dist_name(ep)) for ep in eps if ep.group.startswith("trainbus.")]


@pytest.fixture
def fresh_scan():
    registry.clear_cache()
    yield
    registry.clear_cache()


def test_import_trainbus_imports_no_tensorflow_pluggy_or_metadata_reader():
    code = textwrap.dedent("""
        import json, sys
        before = set(sys.modules)
        import trainbus
        from trainbus.bus import registry
        new = set(sys.modules) - before
        heavy = ("tensorflow", "numpy", "pluggy", "importlib_metadata", "importlib.metadata", "importlib.abc",
                 "importlib.resources", "email")
        print(json.dumps({"heavy": sorted(m for m in new if m.split(".")[0] in heavy or m in heavy),
                          "plugins": sorted(m for m in new if m.startswith("trainbus_")),
                          "scans": registry.scans, "hookimpl": type(trainbus.hookimpl).__name__}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["heavy"] == [] and res["plugins"] == [], res
    assert res["scans"] == 0  # no entry-point metadata read by the import
    assert res["hookimpl"] == "HookimplMarker"  # pluggy's marker, imported when first asked for


def test_every_lookup_of_a_process_is_served_by_one_scan(monkeypatch, fresh_scan):
    from trainbus.bus.manager import contribution_manager
    from trainbus.bus.report import plugin_report
    from trainbus.cli import version_text

    calls = {"listing": 0, "importlib_metadata": 0}
    listing, full = registry._path_listing, importlib_metadata.entry_points

    def counted_listing():
        calls["listing"] += 1
        return listing()

    def counted_full(**kw):
        calls["importlib_metadata"] += 1
        return full(**kw)

    monkeypatch.setattr(registry, "_path_listing", counted_listing)
    monkeypatch.setattr(importlib_metadata, "entry_points", counted_full)
    before = registry.scans
    groups = (*registry.NAME_GROUPS, registry.PLUGIN_GROUP, registry.API_GROUP, modpaths.MODULE_GROUP)
    for group in groups:
        for eps in registry.index(group).values():
            for ep in eps:
                registry.describe(ep)
                registry.declared_api(ep)
    registry.installed_names(registry.NAME_GROUPS)
    modpaths.declared_modules()
    assert registry.provider(("trainbus.callbacks",), "ModelSaver") is not None
    contribution_manager()
    report = plugin_report(try_load=False)
    text = version_text()
    assert registry.scans == before + 1
    assert calls == {"listing": 1, "importlib_metadata": 0}
    # each distribution's metadata file was read once, however many of its entry points were described
    dists = {id(ep.dist) for g in groups for eps in registry.index(g).values() for ep in eps}
    assert registry._dist_label.cache_info().misses == len(dists)
    assert {r["name"] for r in report} <= {line.split()[0] for line in text.splitlines()[1:-1]}
    assert "trainbus-saver" in {r["name"] for r in report}


def test_listing_finds_the_entry_points_importlib_metadata_finds(tmp_path, fresh_scan):
    src = {"dup_mod": "class Dup:\n    pass\n"}
    eps = {"trainbus.callbacks": {"DupCallback": "dup_mod:Dup"}}
    first = make_dist(tmp_path / "first", "trainbus-dup", "2.0", eps, src)
    second = make_dist(tmp_path / "second", "trainbus-dup", "1.0",
                       {"trainbus.callbacks": {"DupCallback": "dup_mod:Dup", "OnlyInOld": "dup_mod:Dup"}}, {})
    other = make_dist(tmp_path / "other", "unrelated-thing", "1.0", {"console_scripts": {"x": "dup_mod:Dup"}}, {})
    sys.path[:0] = [str(first), str(second), str(other)]
    try:
        fast = registry._path_distributions()
        assert fast is not None
        found = _trainbus_eps(ep for d in fast for ep in d.entry_points)
        assert found == _trainbus_eps(importlib_metadata.entry_points())
        # the first distribution of a name on sys.path hides the later one, as importlib_metadata has it
        assert ("trainbus.callbacks", "DupCallback", "dup_mod:Dup", "trainbus-dup") in found
        assert not [e for e in found if e[1] == "OnlyInOld"]
        # a distribution that declares no trainbus group is not parsed
        assert "unrelated-thing" not in {registry._dist_label(d)[0] for d in fast}
        assert registry.describe(registry.index("trainbus.callbacks")["DupCallback"][0]) == \
            "trainbus-dup 2.0 (DupCallback = dup_mod:Dup)"
    finally:
        for p in (first, second, other):
            sys.path.remove(str(p))


def test_a_zip_on_sys_path_is_read_by_importlib_metadata(tmp_path, fresh_scan):
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("trainbus_zipped-1.5.dist-info/METADATA", "Metadata-Version: 2.1\nName: trainbus-zipped\n"
                                                               "Version: 1.5\n")
        z.writestr("trainbus_zipped-1.5.dist-info/entry_points.txt",
                   "[trainbus.callbacks]\nZippedCallback = zipped_mod:Zipped\n")
        z.writestr("zipped_mod.py", "class Zipped:\n    pass\n")
    sys.path.insert(0, str(archive))
    try:
        assert registry._path_distributions() is None  # the listing leaves archives to importlib_metadata
        ep = registry.index("trainbus.callbacks")["ZippedCallback"][0]
        assert registry.describe(ep) == "trainbus-zipped 1.5 (ZippedCallback = zipped_mod:Zipped)"
        assert "ModelSaver" in registry.index("trainbus.callbacks")  # the installed ones are found too
    finally:
        sys.path.remove(str(archive))
        sys.modules.pop("zipped_mod", None)


def test_name_and_version_come_from_the_metadata_headers(tmp_path, fresh_scan):
    root = make_dist(tmp_path / "d", "trainbus-headers", "3.1", {"trainbus.callbacks": {"HeadCb": "head_mod:H"}}, {})
    info = root / "trainbus_headers-3.1.dist-info"
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: trainbus-headers\nVersion: 3.1\n"
                                   "Summary: s\n\nName: not-a-header\nVersion: 0\n")
    root2 = make_dist(tmp_path / "e", "trainbus-noversion", "0.0", {"trainbus.callbacks": {"NoVer": "m:N"}}, {})
    (root2 / "trainbus_noversion-0.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\n"
                                                                          "Name: trainbus-noversion\n")
    with on_path(root), on_path(root2):
        assert registry.describe(registry.index("trainbus.callbacks")["HeadCb"][0]) == \
            "trainbus-headers 3.1 (HeadCb = head_mod:H)"
        assert registry.describe(registry.index("trainbus.callbacks")["NoVer"][0]) == "trainbus-noversion ? (NoVer = m:N)"


# A tiny training of the defaults workload (default callbacks and monitors) in a fresh process:
# which plugin packages and core modules it imported, against the distributions of what its
# configuration names and of the ambient plugins, and how often entry points were read.
TRAIN = textwrap.dedent("""
    import json, sys, tempfile
    import numpy as np
    import tensorflow as tf
    from trainbus.bus import manager, registry
    from trainbus.dataflow import DataFromList
    from trainbus.input_source import FeedInput
    from trainbus.train import ModelDesc, SimpleTrainer, TrainConfig, launch_train_with_config
    from trainbus.tfutils.summary import add_moving_summary
    from trainbus.utils import logger

    tf1 = tf.compat.v1

    class Model(ModelDesc):
        def inputs(self):
            return [tf.TensorSpec([None, 3], tf.float32, "x"), tf.TensorSpec([None], tf.int32, "y")]

        def build_graph(self, x, y):
            w = tf1.get_variable("W", [3, 2])
            cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=tf.matmul(x, w)),
                                  name="cost")
            add_moving_summary(cost)
            return cost

        def optimizer(self):
            return tf1.train.GradientDescentOptimizer(0.1)

    looked = []  # the ambient plugins looked through and guarded, by description
    guard = manager._guard
    manager._guard = lambda pm, obj, who: looked.append(who) or guard(pm, obj, who)
    logger.set_logger_dir(tempfile.mkdtemp(prefix="startup-test-", dir="."), action="k")  # in the test's tmp_path
    rng = np.random.RandomState(0)
    dps = [[rng.rand(4, 3).astype("float32"), rng.randint(0, 2, size=4).astype("int32")] for _ in range(2)]
    source = DataFromList(dps, shuffle=False)
    trainer = SimpleTrainer()
    config = TrainConfig(model=Model(), data=FeedInput(source), max_epoch=1, steps_per_epoch=2)
    launch_train_with_config(config, trainer)

    named = [trainer, source, *trainer.plugin_manager.ordered]  # callbacks, defaults and monitors
    used = {type(x).__module__.split(".")[0] for x in named}
    ambient = {eps[0].module.split(".")[0] for eps in registry.index(registry.PLUGIN_GROUP).values()}
    print(json.dumps({
        "imported": sorted({m.split(".")[0] for m in sys.modules if m.startswith("trainbus_")}),
        "used": sorted(used), "ambient": sorted(ambient), "scans": registry.scans,
        "core": sorted(m for m in sys.modules if m.startswith("trainbus.")),
        "zmq": "zmq" in sys.modules, "steps": trainer.global_step,
        "sessinit": sorted(m for m in sys.modules if m.startswith("trainbus_sessinit")),
        "looked": looked,
        "loaded": [registry.describe(eps[0]) for eps in registry.index(registry.PLUGIN_GROUP).values()],
        "run_ambient": sorted(n for n, _ in trainer.plugin_manager.list_name_plugin() if n.startswith("plugin:")),
    }))
""")


def test_a_defaults_training_imports_only_the_plugins_its_configuration_uses(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", TRAIN], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                         env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["steps"] == 2
    # the default callbacks and monitors are there, from their plugins
    assert {"trainbus_summary", "trainbus_steps", "trainbus_graph", "trainbus_monitor_tfevents",
            "trainbus_monitor_json", "trainbus_monitor_stdout", "trainbus_dataflow"} <= set(res["used"]), res
    unused = sorted(set(res["imported"]) - set(res["used"]) - set(res["ambient"]))
    assert unused == [], f"imported {res['imported']}; the configuration uses {res['used']}; ambient: {res['ambient']}"
    for name in ("trainbus_misc", "trainbus_inference", "trainbus_param", "trainbus_saver", "trainbus_prof",
                 "trainbus_hooks", "trainbus_monitor_wandb", "trainbus_monitor_mlflow", "trainbus_monitor_comet",
                 "trainbus_trainers_multigpu", "trainbus_trainers_distributed", "trainbus_trainers_horovod"):
        assert name not in res["imported"], name
    # nor the core's parts this training has no use for, nor the dataflow plugin's process runners
    for module in ("trainbus.predict", "trainbus.models", "trainbus.port", "trainbus.runfile", "trainbus.contrib",
                   "trainbus.compose"):
        assert module not in res["core"], module
    for module in ("queue", "staging", "tensor", "tfdata", "zmq"):  # the input sources it does not use
        assert f"trainbus.input_source.{module}" not in res["core"], module
    assert not res["zmq"]
    # the ambient plugin sessinit answers SmartInit; a training that restores nothing imports
    # none of its session initializers
    assert res["sessinit"] == ["trainbus_sessinit", "trainbus_sessinit._plugin"], res["sessinit"]
    assert res["scans"] == 1  # entry points read once for the whole training
    # the ambient plugins, loaded by the contribution manager and by the training's manager, were
    # each looked through once
    assert sorted(res["looked"]) == sorted(res["loaded"]) and len(res["run_ambient"]) == len(res["loaded"]), res


def test_the_scan_reads_entry_points_files_as_importlib_metadata_does(tmp_path, fresh_scan):
    """The scan parses the ``entry_points.txt`` files itself: comments, blank lines, spaces,
    values with ``=`` in extras, other groups between trainbus ones all read as
    ``importlib_metadata`` reads them, and each entry point loads and knows its distribution."""
    root = make_dist(tmp_path / "odd", "trainbus-oddfmt", "0.3", {}, {"odd_mod": "class Odd:\n    pass\n"})
    info = next(root.glob("*.dist-info"))
    (info / "entry_points.txt").write_text(
        "# a comment before any group\n\n"
        "[console_scripts]\nodd-tool = odd_mod:Odd\n\n"
        "  [trainbus.callbacks]  \n"
        "   OddCallback   =   odd_mod:Odd   \n"
        "# a comment = with an equals sign\n"
        "\n"
        "OddExtra = odd_mod:Odd [fast]\n"
        "[trainbus.plugins]\n"
        "oddplug=odd_mod\n")
    sys.path.insert(0, str(root))
    try:
        found = _trainbus_eps(ep for g in registry.scan().groups.values() for ep in g)
        ours = [e for e in found if e[3] == "trainbus-oddfmt"]
        theirs = [e for e in _trainbus_eps(importlib_metadata.entry_points()) if e[3] == "trainbus-oddfmt"]
        assert ours == theirs
        assert {e[1] for e in ours} == {"OddCallback", "OddExtra", "oddplug"}
        ep = registry.index("trainbus.callbacks")["OddCallback"][0]
        assert ep.load().__name__ == "Odd"
        assert registry.describe(ep) == "trainbus-oddfmt 0.3 (OddCallback = odd_mod:Odd)"
    finally:
        sys.path.remove(str(root))
        sys.modules.pop("odd_mod", None)


def test_an_unreadable_entry_point_line_names_the_distribution(tmp_path, fresh_scan):
    root = make_dist(tmp_path / "broken", "trainbus-brokenfmt", "0.1", {}, {})
    info = next(root.glob("*.dist-info"))
    (info / "entry_points.txt").write_text("[trainbus.callbacks]\nthis line has no equals sign\n")
    sys.path.insert(0, str(root))
    try:
        with pytest.raises(registry.PluginLoadError) as err:
            registry.scan()
        msg = str(err.value)
        assert str(info) in msg and "'this line has no equals sign'" in msg and "[trainbus.callbacks]" in msg
        assert "Reinstall or uninstall" in msg
    finally:
        sys.path.remove(str(root))


def test_the_scan_makes_standard_library_objects_without_the_backport():
    """After ``import tensorflow`` (which imports ``importlib.metadata``), the scan imports no
    ``importlib_metadata`` backport: its objects are the standard library's."""
    code = textwrap.dedent("""
        import json, sys
        from trainbus.bus import registry
        registry.scan()
        ep = registry.index(registry.PLUGIN_GROUP)["steps"][0]
        print(json.dumps({"backport": sorted(m for m in sys.modules if m.split(".")[0] in ("importlib_metadata", "zipp")),
                          "ep": type(ep).__module__, "dist": type(ep.dist).__module__,
                          "label": registry.dist_name_version(ep)[0]}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res == {"backport": [], "ep": "importlib.metadata", "dist": "importlib.metadata", "label": "trainbus-steps"}
