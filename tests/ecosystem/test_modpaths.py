"""tensorpack's module paths under trainbus: facade modules, plugin-declared module paths,
out-of-scope names, and ``trainbus.compat``."""

import importlib
import sys

import pytest

import trainbus
from trainbus.bus import modpaths as _modpaths, registry as _registry
from trainbus.exceptions import PluginConflictError, PluginLoadError

from fakedist import make_dist, on_path


def test_facade_module_holds_the_package_objects():
    import trainbus.train.trainers as trainers
    from trainbus.train import SimpleTrainer, SyncMultiGPUTrainerReplicated

    assert trainers.SimpleTrainer is SimpleTrainer
    assert trainers.SyncMultiGPUTrainerReplicated is SyncMultiGPUTrainerReplicated
    assert trainbus.train.trainers is trainers  # bound on the parent package like any submodule
    assert "HorovodTrainer" in trainers.__all__ and "SimpleTrainer" in trainers.__all__
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        trainers.Nope


def test_star_import_of_a_facade_binds_its_names():
    ns: dict = {}
    exec("from trainbus.callbacks.saver import *", ns)
    from trainbus.callbacks import MaxSaver, MinSaver, ModelSaver

    assert (ns["ModelSaver"], ns["MinSaver"], ns["MaxSaver"]) == (ModelSaver, MinSaver, MaxSaver)
    assert sorted(k for k in ns if not k.startswith("__")) == ["MaxSaver", "MinSaver", "ModelSaver"]


def test_facade_name_whose_plugin_is_missing_says_what_to_install(monkeypatch):
    real_index = _registry.index

    def without_horovod(group):
        found = dict(real_index(group))
        found.pop("HorovodTrainer", None)
        return found

    monkeypatch.setattr(_registry, "index", without_horovod)
    monkeypatch.delitem(trainbus.train.__dict__, "HorovodTrainer", raising=False)
    import trainbus.train.trainers as trainers

    monkeypatch.delitem(trainers.__dict__, "HorovodTrainer", raising=False)
    assert "HorovodTrainer" not in trainers.__all__  # absent from *, not an error
    assert "SimpleTrainer" in trainers.__all__
    with pytest.raises(ModuleNotFoundError, match=r"provided by the 'trainbus-trainers-horovod' distribution.*"
                                                  r"\n    pip install trainbus-trainers-horovod"):
        from trainbus.train.trainers import HorovodTrainer  # noqa: F401


def test_out_of_scope_module_and_name_say_why():
    with pytest.raises(ModuleNotFoundError, match=r"trainbus.utils.loadcaffe is not provided by trainbus: .*Caffe"):
        import trainbus.utils.loadcaffe  # noqa: F401
    with pytest.raises(ImportError, match=r"trainbus.train.BytePSTrainer is not provided by trainbus: BytePS .*"
                                          r"HorovodTrainer"):
        from trainbus.train import BytePSTrainer  # noqa: F401
    with pytest.raises(ImportError, match=r"trainbus.train.trainers.BytePSTrainer is not provided by trainbus"):
        from trainbus.train.trainers import BytePSTrainer  # noqa: F401,F811
    import trainbus.train.trainers as trainers

    assert "BytePSTrainer" not in trainers.__all__
    # an unknown path is an ordinary ModuleNotFoundError
    with pytest.raises(ModuleNotFoundError, match="No module named 'trainbus.callbacks.nosuch'"):
        import trainbus.callbacks.nosuch  # noqa: F401


def _package_dist(root, dist, pkg, paths, files):
    make_dist(root, dist, "0.3.1", {_modpaths.MODULE_GROUP: paths}, {})
    for rel, src in files.items():
        f = root / pkg / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(src)
    return root


def _forget(*prefixes):
    for m in [m for m in sys.modules if m.startswith(prefixes)]:
        del sys.modules[m]
    for path in [p for p in _modpaths._ALIASED if p.startswith(prefixes)]:
        del _modpaths._ALIASED[path]


def test_plugin_declared_module_path_is_the_real_module_with_its_submodules(tmp_path):
    root = _package_dist(tmp_path / "site", "trainbus-fakemods", "fakemods_pkg",
                         {"trainbus.dataflow.fakemods": "fakemods_pkg"},
                         {"__init__.py": "from fakemods_pkg.inner import Thing\n__all__ = ['Thing']\n",
                          "inner.py": "class Thing:\n    pass\n",
                          "extra.py": "VALUE = 41 + 1\n"})
    try:
        with on_path(root):
            import trainbus.dataflow.fakemods as mod
            import fakemods_pkg

            assert mod is fakemods_pkg
            assert mod.__spec__.name == "fakemods_pkg"  # the module keeps its own spec
            from trainbus.dataflow.fakemods.extra import VALUE
            import fakemods_pkg.extra

            assert VALUE == 42
            # one module under two names: no second copy of the file (and of its classes)
            assert sys.modules["trainbus.dataflow.fakemods.extra"] is fakemods_pkg.extra
            from trainbus.dataflow.fakemods.inner import Thing

            assert Thing is fakemods_pkg.Thing
    finally:
        _forget("trainbus.dataflow.fakemods", "fakemods_pkg")


def test_module_path_declared_twice_names_both_distributions(tmp_path):
    site = tmp_path / "site"
    _package_dist(site, "trainbus-twin-a", "twin_a", {"trainbus.dataflow.twin": "twin_a"}, {"__init__.py": ""})
    _package_dist(site, "trainbus-twin-b", "twin_b", {"trainbus.dataflow.twin": "twin_b"}, {"__init__.py": ""})
    try:
        with on_path(site):
            with pytest.raises(PluginConflictError) as err:
                import trainbus.dataflow.twin  # noqa: F401
            assert "trainbus-twin-a 0.3.1" in str(err.value) and "trainbus-twin-b 0.3.1" in str(err.value)
    finally:
        _forget("trainbus.dataflow.twin", "twin_a", "twin_b")


def test_module_path_whose_module_is_broken_names_the_distribution(tmp_path):
    root = _package_dist(tmp_path / "site", "trainbus-brokenmod", "brokenmod_pkg",
                         {"trainbus.dataflow.brokenmod": "brokenmod_pkg"},
                         {"__init__.py": "import a_module_that_is_not_there\n"})
    try:
        with on_path(root):
            with pytest.raises(PluginLoadError, match=r"trainbus.dataflow.brokenmod is the module brokenmod_pkg "
                                                      r"\(declared by trainbus-brokenmod 0.3.1.*a_module_that_is_not"):
                import trainbus.dataflow.brokenmod  # noqa: F401
    finally:
        _forget("trainbus.dataflow.brokenmod", "brokenmod_pkg")


def test_compat_tfv1_and_is_tfv2():
    import tensorflow as tf

    from trainbus import tfv1
    from trainbus.compat import is_tfv2, tfv1 as tfv1_again

    assert tfv1 is tfv1_again
    # the tf.compat.v1 API (TensorFlow may hand out a new module wrapper object for the same API)
    assert tfv1.get_variable is tf.compat.v1.get_variable and tfv1.placeholder is tf.compat.v1.placeholder
    assert is_tfv2() is True  # TensorFlow 2.x with its default behaviour
    from trainbus.compat.tensor_spec import TensorSpec

    assert TensorSpec is tf.TensorSpec


def test_core_names_resolve_at_top_level_like_tensorpacks():
    import trainbus.models
    import trainbus.utils

    assert trainbus.Conv2D is trainbus.models.Conv2D
    assert trainbus.logger is trainbus.utils.logger
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchName'"):
        trainbus.NoSuchName
    importlib.import_module("trainbus.graph_builder")
