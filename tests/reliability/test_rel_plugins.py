"""Guarantee 6: broken and hostile plugin distributions are reported by name, and only a
callback in the user's own list can stop training.

The fake distributions live in tests/data/fake_dists (dist-info directories + modules). The
in-process tests put that directory on ``sys.path`` (importlib.metadata then finds them as
installed distributions); ``test_fresh_venv_with_fake_dists_installed`` installs them into a
new virtual environment and runs the CLI and a training there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import warnings
from pathlib import Path

import pytest

from trainbus.exceptions import PluginConflictError, PluginLoadError
from trainbus.testing import HookRecorder, train_tiny

pytestmark = pytest.mark.timeout(120)

FAKE_DISTS = Path(__file__).resolve().parents[1] / "data" / "fake_dists"
FAKE_NAMES = ["FakeBrokenImport", "FakeMissing", "FakeDuplicated", "FakeOverride", "FakeRaising", "FakeGoodCallback"]


def _forget() -> None:
    import trainbus.callbacks as C
    from trainbus.bus import manager as _manager, registry as _registry

    _registry.clear_cache()
    _manager._load_ambient_cached.cache_clear()
    for n in FAKE_NAMES:
        vars(C).pop(n, None)
    for m in [m for m in sys.modules if m.startswith("trainbus_fake_")]:
        del sys.modules[m]


@pytest.fixture()
def fake_dists(monkeypatch):
    monkeypatch.delenv("TRAINBUS_STRICT_PLUGINS", raising=False)
    monkeypatch.delenv("TRAINBUS_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    sys.path.insert(0, str(FAKE_DISTS))
    _forget()
    yield
    sys.path.remove(str(FAKE_DISTS))
    _forget()


def test_name_resolution_errors_name_the_distribution(fake_dists):
    import trainbus.callbacks as C

    with pytest.raises(PluginLoadError, match=r"trainbus-fake-importerror 0\.1\.0.*RuntimeError.*deliberately broken"):
        C.FakeBrokenImport
    with pytest.raises(PluginLoadError, match=r"trainbus-fake-importerror 0\.1\.0"):
        from trainbus.callbacks import FakeBrokenImport  # noqa: F401
    with pytest.raises(PluginLoadError, match=r"trainbus-fake-missing 0\.1\.0.*NoSuchClass"):
        C.FakeMissing
    with pytest.raises(PluginConflictError) as ei:
        C.FakeDuplicated
    assert "trainbus-fake-dup-a 0.1.0" in str(ei.value) and "trainbus-fake-dup-b 0.1.0" in str(ei.value)
    with pytest.raises(PluginLoadError, match=r"trainbus-fake-override 0\.1\.0.*overrides Callback\.trigger_epoch\(\)"):
        C.FakeOverride
    assert C.FakeGoodCallback.__module__ == "trainbus_fake_good"  # the healthy one still resolves


def _messages(record) -> str:
    return "\n".join(str(w.message) for w in record)


def test_hostile_ambient_plugins_cannot_break_or_stop_training(fake_dists, logdir, no_leaks):
    import trainbus.callbacks as C
    import trainbus_fake_good

    good = C.FakeGoodCallback()
    rec = HookRecorder()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        tr = train_tiny(callbacks=[good, rec], max_epoch=3, steps_per_epoch=2)
    text = _messages(record)
    assert tr.global_step == 6 and good.epochs == 3 and rec.hooks()[-1] == "after_train"
    # each broken plugin is reported, naming its distribution
    assert "trainbus-fake-importerror 0.1.0" in text and "deliberately broken" in text
    assert "trainbus-fake-missing 0.1.0" in text and "no_such_object" in text
    assert "'fake_dup' is provided by more than one distribution" in text
    assert "trainbus-fake-dup-a 0.1.0" in text and "trainbus-fake-dup-b 0.1.0" in text
    assert "a duplicated ambient plugin must not be loaded" not in text  # neither was loaded
    assert "trainbus-fake-unknownhook 0.1.0" in text and "unknown hook(s) trigger_epochs" in text
    raising = "trainbus-fake-raising 0.1.0"
    for hook, what in [("before_train", "RuntimeError"), ("trigger_epoch", "KeyError"), ("after_train", "OSError")]:
        assert f"{raising} (fake_raising = trainbus_fake_raising:_ambient) raised in {hook}(): {what}" in text
    assert f"{raising} (fake_raising = trainbus_fake_raising:_ambient) tried to stop training in trigger_step() (StopTraining" in text
    assert f"{raising} (fake_raising = trainbus_fake_raising:_ambient) tried to stop training in after_epoch() (SystemExit" in text
    # the healthy ambient plugin ran every hook
    assert trainbus_fake_good.EVENTS == ["before_train"] + ["trigger_epoch"] * 3 + ["after_train"]


def test_ambient_plugin_cannot_stop_training_through_the_run_context(fake_dists, logdir, no_leaks):
    """An ambient plugin's ``run_context.request_stop()`` in before_run/after_run is a
    warning naming its distribution; a listed callback's request still stops training."""
    import trainbus_fake_stopper

    from trainbus.callbacks import Callback

    rec = HookRecorder()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        tr = train_tiny(callbacks=[rec], max_epoch=3, steps_per_epoch=4)
    text = _messages(record)
    assert tr.global_step == 12 and rec.hooks().count("trigger_epoch") == 3
    calls = trainbus_fake_stopper._ambient.calls
    assert calls == {"before_run": 12, "after_run": 12}
    who = "trainbus-fake-stopper 0.1.0 (fake_stopper = trainbus_fake_stopper:_ambient)"
    assert f"{who} tried to stop training in before_run() (run_context.request_stop())" in text
    assert f"{who} tried to stop training in after_run() (run_context.request_stop())" in text

    class ListedStopper(Callback):
        def _after_run(self, ctx, values):
            if self.global_step >= 4:  # already counts the step that just ran
                ctx.request_stop()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tr = train_tiny(callbacks=[ListedStopper()], max_epoch=3, steps_per_epoch=4)
    assert tr.global_step == 4


def test_ambient_run_context_stop_is_an_error_in_strict_mode(fake_dists, logdir, monkeypatch):
    monkeypatch.setenv("TRAINBUS_STRICT_PLUGINS", "1")
    monkeypatch.setenv("TRAINBUS_DISABLE_PLUGINS", "fake_raising,fake_unknownhook,fake_dup,fake_importerror,fake_missing")
    with pytest.raises(PluginLoadError, match=r"trainbus-fake-stopper 0\.1\.0.*tried to stop training in after_run"):
        train_tiny(max_epoch=1, steps_per_epoch=1)


def test_hostile_contributions_to_the_defaults(fake_dists):
    from trainbus.callbacks.base import Callback
    from trainbus.train import DEFAULT_CALLBACKS, DEFAULT_MONITORS

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        cbs = DEFAULT_CALLBACKS()
        mons = DEFAULT_MONITORS()
    text = _messages(record)
    assert all(isinstance(c, Callback) for c in cbs + mons)
    assert "trainbus-fake-raising 0.1.0" in text and "default_callbacks failed on purpose" in text
    assert "gave no usable answer to default_monitors()" in text


def test_a_listed_plugin_callback_stops_training_and_is_named(fake_dists, logdir, no_leaks):
    import trainbus.callbacks as C

    rec = HookRecorder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="FakeRaising failed on purpose") as ei:
            train_tiny(callbacks=[C.FakeRaising(), rec], max_epoch=5, steps_per_epoch=2)
    notes = "\n".join(ei.value.__notes__)
    assert "[trainbus] raised in callback FakeRaising" in notes
    assert "distribution trainbus-fake-raising 0.1.0" in notes and "during trigger_epoch()" in notes
    assert rec.hooks()[-1] == "after_train" and rec.hooks().count("trigger_epoch") == 1


def test_strict_mode_turns_plugin_problems_into_errors(fake_dists, logdir, monkeypatch):
    monkeypatch.setenv("TRAINBUS_STRICT_PLUGINS", "1")
    with pytest.raises(PluginLoadError, match=r"trainbus-fake-\S+ 0\.1\.0.*TRAINBUS_STRICT_PLUGINS is set"):
        train_tiny(max_epoch=1, steps_per_epoch=1)


VENV_RUN = """
import os, sys, warnings
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
warnings.simplefilter("always")
from trainbus.cli import main  # what `python -m trainbus` runs
print("PLUGINS-RC", main(["plugins"]), flush=True)
print("STRICT-RC", main(["plugins", "--strict"]), flush=True)
import trainbus.callbacks as C
from trainbus.testing import train_tiny
from trainbus.utils import logger
logger.set_logger_dir(sys.argv[1], action="k")
good = C.FakeGoodCallback()
tr = train_tiny(callbacks=[good], max_epoch=2, steps_per_epoch=2)
print("FINISHED", tr.global_step, good.epochs)
"""


def test_fresh_venv_with_fake_dists_installed(tmp_path):
    """The fake distributions REALLY installed (copied into a new venv's site-packages, the
    dev environment reachable through a .pth): the ``trainbus plugins`` command reports each
    broken one by name (exit 0, and 2 with --strict), and a training run there finishes."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    dev_site = sysconfig.get_paths()["purelib"]
    # addsitedir also runs the dev environment's .pth files (editable installs)
    (site / "zz_trainbus_dev.pth").write_text(f"import site; site.addsitedir({dev_site!r})\n")
    for item in FAKE_DISTS.iterdir():
        if item.name.startswith("trainbus_fake_"):
            (shutil.copytree if item.is_dir() else shutil.copy2)(item, site / item.name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINBUS_", "PYTHONPATH"))}
    env["TRAINBUS_FAKE_GOOD_LOG"] = str(tmp_path / "good.log")
    # the fake dists are visible only inside the new venv
    assert subprocess.run([sys.executable, "-c", "import trainbus_fake_good"], capture_output=True).returncode != 0
    run = subprocess.run([str(py), "-c", VENV_RUN, str(tmp_path / "log")], capture_output=True, text=True,
                         env=env, timeout=150)
    assert run.returncode == 0, run.stderr[-3000:]
    text = run.stdout
    for dist in ["trainbus-fake-importerror", "trainbus-fake-missing", "trainbus-fake-dup-a", "trainbus-fake-dup-b",
                 "trainbus-fake-override", "trainbus-fake-raising", "trainbus-fake-unknownhook", "trainbus-fake-good"]:
        assert f"{dist} 0.1.0" in text, (dist, text)
    assert "deliberately broken" in text and "NoSuchClass" in text and "overrides Callback.trigger_epoch()" in text
    assert "FakeDuplicated" in text and "also provided by trainbus-fake-dup" in text
    assert "PLUGINS-RC 0" in text and "STRICT-RC 2" in text
    assert "FINISHED 4 2" in text
    assert "trainbus-fake-raising 0.1.0" in run.stderr and "trainbus-fake-importerror 0.1.0" in run.stderr
    assert (tmp_path / "good.log").read_text().split() == ["before_train", "trigger_epoch", "trigger_epoch", "after_train"]
