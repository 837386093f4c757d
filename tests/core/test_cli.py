"""The ``trainbus`` command line: fast without TensorFlow where TensorFlow is not needed,
``--version`` from metadata, and every mistake reported in one or two lines (status 2)."""

from __future__ import annotations

import json
import os
import pathlib
import shlex
import subprocess
import sys
import textwrap

import pytest
import zygote  # tests/_support

from trainbus import __version__
from trainbus.cli import main

# A subprocess in which any import of TensorFlow raises; it runs trainbus.cli.main(argv) and
# prints, as the last line, JSON with the exit status, the CPU time of main() alone, and
# whether a tensorflow module or a plugin module got imported.
BLOCKED = textwrap.dedent("""
    import json, sys, time

    class NoTensorFlow:
        def find_spec(self, name, path=None, target=None):
            if name == "tensorflow" or name.startswith("tensorflow."):
                raise ImportError(f"TensorFlow is blocked in this test (import of {name})")
            return None

    sys.meta_path.insert(0, NoTensorFlow())
    from trainbus.cli import main

    argv = json.loads(sys.argv[1])
    t0 = time.process_time()
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's --version/--help
        rc = e.code
    elapsed = time.process_time() - t0
    sys.stdout.flush()
    tf = sorted(m for m in sys.modules if m == "tensorflow" or m.startswith("tensorflow."))
    plugins = sorted(m for m in sys.modules if m.startswith("trainbus_") and sys.modules[m] is not None)
    print(json.dumps({"rc": rc, "elapsed": elapsed, "tf": tf, "plugins": plugins}))
""")

# main() is timed inside the subprocess (interpreter start-up is not counted), in CPU time so
# that a machine busy with other work does not fail the test; it takes about 0.1 s. The limit is
# the 1 s the command promises: importing TensorFlow alone takes several seconds of CPU, so a
# regression cannot hide under it.
LIMIT_S = 1.0


def _blocked(argv: list[str], cwd: pathlib.Path | None = None, env: dict | None = None):
    r = subprocess.run([sys.executable, "-c", BLOCKED, json.dumps(argv)], capture_output=True, text=True,
                       cwd=cwd, env=env, timeout=120)
    assert r.stdout.strip(), r.stderr
    *out, last = r.stdout.rstrip("\n").split("\n")
    return json.loads(last), "\n".join(out), r.stderr


def _with_a_plugin(tmp_path: pathlib.Path) -> dict:
    """The environment of a subprocess that also sees an installed plugin distribution
    (``trainbus-clitest`` 0.4.0: a callback and a trainer), whatever else is installed."""
    from fakedist import make_dist

    root = make_dist(tmp_path / "site", "trainbus-clitest", "0.4.0",
                     {"trainbus.plugin_api": {"1": "trainbus_clitest"},
                      "trainbus.callbacks": {"CliTestCallback": "trainbus_clitest:CliTestCallback"},
                      "trainbus.train": {"CliTestTrainer": "trainbus_clitest:CliTestTrainer"}},
                     {"trainbus_clitest": "raise RuntimeError('listing the plugins imported trainbus_clitest')\n"})
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}


def test_plugins_lists_without_tensorflow_in_under_a_second(tmp_path: pathlib.Path) -> None:
    info, out, err = _blocked(["plugins"], env=_with_a_plugin(tmp_path))
    assert info["rc"] == 0, err
    assert info["tf"] == [] and info["plugins"] == [], info
    assert "trainbus-clitest 0.4.0  [bundle: -]  [plugin API 1]" in out
    assert "    trainbus.callbacks.CliTestCallback" in out
    assert "    trainbus.train.CliTestTrainer" in out
    assert "ERROR" not in out, out
    assert "Traceback" not in err and "tensorflow" not in err.lower(), err
    assert info["elapsed"] < LIMIT_S, info


def test_version_reads_metadata_only(tmp_path: pathlib.Path) -> None:
    info, out, err = _blocked(["--version"], env=_with_a_plugin(tmp_path))
    assert info["rc"] == 0, err
    assert info["tf"] == [] and info["plugins"] == [], info
    lines = out.splitlines()
    assert lines[0] == f"trainbus {__version__} (plugin API 1)"
    assert "  trainbus-clitest 0.4.0 (plugin API 1)" in lines
    from importlib.metadata import version

    assert lines[-1] == f"TensorFlow: tensorflow {version('tensorflow')}"
    assert info["elapsed"] < LIMIT_S, info


def test_order_and_new_plugin_without_tensorflow(tmp_path: pathlib.Path) -> None:
    (tmp_path / "tfless_cbs.py").write_text(
        "from trainbus.callbacks import Callback\n"
        "class First(Callback):\n    def _before_train(self): pass\n"
        "class Second(Callback):\n    def _before_train(self): pass\n"
        "def callbacks():\n    return [First(), Second()]\n")
    info, out, err = _blocked(["order", "tfless_cbs:callbacks"], cwd=tmp_path)
    assert info["rc"] == 0, err
    assert info["tf"] == [], info
    before = out.split("before_train", 1)[1]
    assert before.index("First") < before.index("Second"), out
    assert info["elapsed"] < LIMIT_S, info

    info, out, err = _blocked(["new-plugin", "grad-stats", "--dir", str(tmp_path / "gs")])
    assert info["rc"] == 0, err
    assert info["tf"] == [], info
    assert (tmp_path / "gs" / "pyproject.toml").is_file()
    # the next step is a command that works as printed: the test extra, then pytest in its directory
    gs = tmp_path / "gs"
    assert f"next: pip install -e {shlex.quote(f'{gs}[test]')} && (cd {shlex.quote(str(gs))} && pytest)" in out, out
    assert info["elapsed"] < LIMIT_S, info


# ---- errors: one or two lines on stderr, status 2, no traceback ----------------------------

def _one_error(capsys, argv: list[str], *expected: str) -> str:
    assert main(argv) == 2
    cap = capsys.readouterr()
    lines = cap.err.strip("\n").splitlines()
    assert 1 <= len(lines) <= 2, cap.err
    assert "Traceback" not in cap.err
    for text in expected:
        assert text in cap.err, cap.err
    return cap.err


@pytest.fixture
def in_tmp(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRAINBUS_DEBUG", raising=False)
    return tmp_path


def test_order_missing_module(in_tmp, capsys) -> None:
    _one_error(capsys, ["order", "nosuch_module_xyz:thing"], "trainbus order:", "no module named 'nosuch_module_xyz'")


def test_order_missing_attribute(in_tmp, capsys) -> None:
    (in_tmp / "has_some.py").write_text("callbacks = []\n")
    _one_error(capsys, ["order", "has_some:config"], "has_some has no attribute 'config'")


def test_order_not_a_config_or_list(in_tmp, capsys) -> None:
    (in_tmp / "wrong_kind.py").write_text("config = 42\n")
    _one_error(capsys, ["order", "wrong_kind:config"], "wrong_kind:config is a int (42)", "expected a TrainConfig")


def test_order_spec_without_colon(in_tmp, capsys) -> None:
    _one_error(capsys, ["order", "just_a_module"], "SPEC must look like module:attr")


def test_order_module_that_raises(in_tmp, capsys) -> None:
    (in_tmp / "raises_on_import.py").write_text("raise RuntimeError('bad configuration value')\n")
    _one_error(capsys, ["order", "raises_on_import:config"],
               "importing 'raises_on_import' failed: RuntimeError: bad configuration value", "TRAINBUS_DEBUG=1")


def test_train_missing_run_file(in_tmp, capsys) -> None:
    _one_error(capsys, ["train", "absent.toml"], "the run file absent.toml does not exist")
    _one_error(capsys, ["train", "--dry-run", "absent.toml"], "does not exist")


def test_train_unreadable_run_file(in_tmp, capsys) -> None:
    (in_tmp / "adir.toml").mkdir()
    _one_error(capsys, ["train", "adir.toml"], "the run file adir.toml is not a file")
    (in_tmp / "binary.toml").write_bytes(b"\xff\xfe\x00model")
    _one_error(capsys, ["train", "binary.toml"], "cannot read the run file binary.toml: it is not UTF-8 text")


def test_new_plugin_bad_name(in_tmp, capsys) -> None:
    _one_error(capsys, ["new-plugin", "Bad Name"], "trainbus new-plugin:", "'Bad Name'")


def _argparse_error(capsys, argv: list[str]) -> str:
    """The one line of a command-line mistake that argparse finds (status 2, no usage block)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    cap = capsys.readouterr()
    assert cap.out == "" and "Traceback" not in cap.err and "usage:" not in cap.err, cap.err
    lines = cap.err.splitlines()
    assert len(lines) == 1, cap.err
    return lines[0]


TOP = "(valid: plugins, order, train, show, port, new-plugin, -h/--help, --version)"


def test_argparse_errors_are_one_line_naming_the_valid_ones(in_tmp, capsys) -> None:
    assert _argparse_error(capsys, ["order"]) == \
        "trainbus order: the following arguments are required: SPEC (valid: SPEC, -h/--help)"
    assert _argparse_error(capsys, ["new-plugin"]) == \
        "trainbus new-plugin: the following arguments are required: NAME (valid: NAME, -h/--help, --dir)"
    assert _argparse_error(capsys, []) == f"trainbus: a command is required {TOP}"


def test_unknown_subcommand_is_one_line_with_the_commands(in_tmp, capsys) -> None:
    assert _argparse_error(capsys, ["bogus"]) == f"trainbus: unknown command 'bogus' {TOP}"
    assert _argparse_error(capsys, ["tarin", "run.toml"]) == \
        f"trainbus: unknown command 'tarin'; did you mean train? {TOP}"
    assert _argparse_error(capsys, ["--bogus"]) == f"trainbus: unknown argument --bogus {TOP}"


def test_unknown_argument_is_one_line_with_the_subcommands_options(in_tmp, capsys) -> None:
    assert _argparse_error(capsys, ["plugins", "--bogus"]) == \
        "trainbus plugins: unknown argument --bogus (valid: -h/--help, --load, --no-load, --strict)"
    assert _argparse_error(capsys, ["train", "--dryrun", "run.toml"]) == \
        "trainbus train: unknown argument --dryrun (valid: RUN.toml, -h/--help, --dry-run, --set)"
    assert _argparse_error(capsys, ["train", "a.toml", "b.toml"]) == \
        "trainbus train: unknown argument b.toml (valid: RUN.toml, -h/--help, --dry-run, --set)"
    assert _argparse_error(capsys, ["order", "m:x", "--dir", "d"]) == \
        "trainbus order: unknown arguments --dir d (valid: SPEC, -h/--help)"
    assert not list(in_tmp.iterdir())  # nothing was run


def test_unknown_argument_from_the_console_script_is_one_line() -> None:
    """The installed ``trainbus`` command (a subprocess): one line, status 2, nothing on stdout."""
    r = subprocess.run([sys.executable, "-m", "trainbus", "plugins", "--loud"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    assert r.stderr == "trainbus plugins: unknown argument --loud (valid: -h/--help, --load, --no-load, --strict)\n"


def test_debug_shows_the_traceback(in_tmp) -> None:
    env = dict(os.environ, TRAINBUS_DEBUG="1", TF_CPP_MIN_LOG_LEVEL="3")
    (in_tmp / "raises_on_import.py").write_text("raise RuntimeError('bad configuration value')\n")
    # forked from the worker's zygote (tests/_support/zygote.py): `trainbus order` imports TensorFlow
    r = zygote.run([sys.executable, "-m", "trainbus", "order", "raises_on_import:config"], cwd=in_tmp, env=env,
                   timeout=120)
    assert r.returncode != 0
    assert "Traceback" in r.stderr and "bad configuration value" in r.stderr
    env["TRAINBUS_DEBUG"] = "0"
    r = zygote.run([sys.executable, "-m", "trainbus", "order", "nosuch_module_xyz:thing"], cwd=in_tmp, env=env,
                   timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) <= 2, r.stderr


def _broken_dist(site: pathlib.Path) -> None:
    """``trainbus-brokenimport``: its module raises when imported (a broken install)."""
    (site / "trainbus_brokenimport.py").write_text("raise ImportError('this plugin module is deliberately broken')\n")
    info = site / "trainbus_brokenimport-0.2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: trainbus-brokenimport\nVersion: 0.2.0\n"
                                   "Keywords: trainbus-plugin\n")
    (info / "entry_points.txt").write_text("[trainbus.plugin_api]\n1 = trainbus_brokenimport\n"
                                           "[trainbus.callbacks]\nBrokenCallback = trainbus_brokenimport:Broken\n"
                                           "[trainbus.train]\nGoneTrainer = trainbus_gone_module:GoneTrainer\n")


def test_plugins_reports_broken_distributions_and_strict_is_status_2(tmp_path: pathlib.Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _broken_dist(site)
    env = dict(os.environ, PYTHONPATH=str(site), TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TRAINBUS_DEBUG", None)
    # without --load: the missing module is found from metadata, nothing is imported, status 0
    info, out, err = _blocked(["plugins"], env=env)
    assert info["rc"] == 0, err
    assert info["plugins"] == [], info
    block = out.split("trainbus-brokenimport 0.2.0", 1)[1].split("\ntrainbus-", 1)[0]
    assert "ERROR trainbus.train.GoneTrainer: " in block and "No module named 'trainbus_gone_module'" in block
    assert "deliberately broken" not in block
    assert info["elapsed"] < LIMIT_S, info
    # --strict imports each entry point: the import error is reported, then two lines on stderr, status 2
    r = zygote.run([sys.executable, "-m", "trainbus", "plugins", "--strict"], env=env, timeout=180)  # zygote.py
    assert r.returncode == 2, r.stderr[-2000:]
    block = r.stdout.split("trainbus-brokenimport 0.2.0", 1)[1].split("\ntrainbus-", 1)[0]
    assert "ERROR trainbus.callbacks.BrokenCallback: " in block and "deliberately broken" in block
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith(("trainbus plugins:", "  "))]
    assert lines[0] == "trainbus plugins: 1 plugin distribution(s) do not load cleanly: trainbus-brokenimport", \
        r.stderr[-2000:]
    assert "Traceback" not in r.stderr


def test_closed_output_pipe_is_no_traceback() -> None:
    """``trainbus plugins | head -1``: the reader goes away before the listing is written."""
    for argv in (["plugins"], ["--version"]):
        # a new interpreter: its own flush of stdout at exit is what must not print a traceback
        p = subprocess.Popen([sys.executable, "-m", "trainbus", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.close()  # nobody reads: every write to stdout fails with EPIPE
        err = p.stderr.read().decode()
        p.wait(timeout=120)
        assert "Traceback" not in err and "BrokenPipeError" not in err, err
        assert p.returncode == 1, (argv, p.returncode, err)


# Plugin modules that import TensorFlow when imported (``trainbus plugins --load`` then imports
# it). Each is a place to fix; none may be added. (``trainbus.plugin_api`` gives ``tf``/``tf1``
# lazily, so the plugins that import only it - graph, param, saver, summary - are not here.)
TF_AT_IMPORT = {
    "trainbus_hooks",  # _hooks.py:7 import tensorflow; CallbackToHook subclasses tf1.train.SessionRunHook
    "trainbus_inference",  # _runner.py:9 import tensorflow; :13-14 trainbus.input_source, trainbus.tfutils.tower
    "trainbus_trainers_multigpu",  # trainers.py:7 import tensorflow
    "trainbus_trainers_horovod",  # trainer.py:11 import tensorflow
    "trainbus_trainers_distributed",  # trainers.py:11 import tensorflow
}

WHICH_IMPORT_TF = textwrap.dedent("""
    import importlib, json, sys
    from importlib_metadata import entry_points

    class NoTensorFlow:
        def find_spec(self, name, path=None, target=None):
            if name == "tensorflow" or name.startswith("tensorflow."):
                raise ImportError("TENSORFLOW-BLOCKED")
            return None

    sys.meta_path.insert(0, NoTensorFlow())
    modules = sorted({ep.module for g in ("trainbus.callbacks", "trainbus.train", "trainbus.tfutils.sessinit",
                                          "trainbus.dataflow", "trainbus.plugins") for ep in entry_points(group=g)})
    found = {}
    for m in modules:
        try:
            importlib.import_module(m)
        except ImportError as e:
            if "TENSORFLOW-BLOCKED" in str(e):
                found[m.split(".")[0]] = m
    print(json.dumps(sorted(found)))
""")


def test_no_new_plugin_module_imports_tensorflow_at_import_time() -> None:
    r = subprocess.run([sys.executable, "-c", WHICH_IMPORT_TF], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    found = set(json.loads(r.stdout.strip().splitlines()[-1]))
    assert found <= TF_AT_IMPORT, f"these plugin modules now import TensorFlow when imported: {found - TF_AT_IMPORT}"
    assert "trainbus_steps" not in found and "trainbus_monitor_json" not in found  # the check sees them
    # the plugins that reach TensorFlow only through trainbus.plugin_api (lazy) stay TensorFlow-free
    assert not found & {"trainbus_graph", "trainbus_param", "trainbus_saver", "trainbus_summary", "trainbus_sessinit"}, found


def test_plugins_with_none_installed_prints_both_install_forms(monkeypatch, capsys) -> None:
    """The hint when no plugin distribution is installed: the standard bundle, from an index and
    from a checkout's wheelhouse (tests/ecosystem/test_wheelhouse.py follows it in a fresh venv)."""
    import trainbus.cli as cli

    monkeypatch.setattr(cli, "plugin_report", lambda **kw: [])
    assert main(["plugins"]) == 0
    assert capsys.readouterr().out == (
        "no trainbus plugin distributions are installed; the standard bundle: pip install 'trainbus[standard]' "
        "(from a trainbus checkout: tools/build_wheels.sh, then pip install --find-links dist 'trainbus[standard]')\n")
