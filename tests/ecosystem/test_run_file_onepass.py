"""A run file's mistakes are reported in ONE pass: what the checker sees (names, signatures,
loop options) and what the constructors reject (wrong types, values out of range, unsorted
schedules), each with the line of the argument at fault."""

from __future__ import annotations

import pathlib

import pytest

from trainbus.runfile import RunConfigError, load_run_file

HERE = pathlib.Path(__file__).resolve().parent / "runfiles"

FOUR = """\
[model]
class = "tinyrun:LinearNet"

[data]
function = "tinyrun:make_data"

[[callbacks]]
name = "ModelSaver"
args = { max_to_keep = "x" }

[[callbacks]]
name = "PeriodicTrigger"
args = { triggerable = { callback = "ModelSaver" }, every_k_steps = -1 }

[[callbacks]]
name = "ScheduledHyperParamSetter"
args = { param = "learning_rate", schedule = [[3, 0.01], [1, 0.1]] }

[train]
max_epoch = "two"
steps_per_epoch = 4
"""


@pytest.fixture()
def rundir(tmp_path, monkeypatch):
    (tmp_path / "tinyrun.py").write_text((HERE / "tinyrun.py").read_text())
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _problems(path: pathlib.Path) -> list:
    with pytest.raises(RunConfigError) as err:
        load_run_file(path)
    return err.value.problems


def _line(path: pathlib.Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_a_type_error_and_three_constructor_mistakes_in_one_report(rundir) -> None:
    p = rundir / "four.toml"
    p.write_text(FOUR)
    problems = _problems(p)
    got = [(pr.line, pr.where) for pr in problems]
    assert got == [(_line(p, 'max_to_keep = "x"'), "callbacks[0].args.max_to_keep"),
                   (_line(p, "every_k_steps = -1"), "callbacks[1].args.every_k_steps"),
                   (_line(p, "schedule = "), "callbacks[2].args.schedule"),
                   (_line(p, 'max_epoch = "two"'), "train.max_epoch")], got
    msgs = [pr.message for pr in problems]
    assert "max_to_keep = 'x' is a string, but ModelSaver takes int | None" in msgs[0]  # the annotation
    assert "every_k_steps must be a positive integer" in msgs[1]
    assert "strictly increasing" in msgs[2]
    assert "max_epoch must be an integer >= 1, got 'two'" in msgs[3]


def test_fixing_the_reported_mistakes_leaves_none(rundir) -> None:
    p = rundir / "four.toml"
    p.write_text(FOUR.replace('"x"', "2").replace("-1", "5").replace("[[3, 0.01], [1, 0.1]]", "[[1, 0.1], [3, 0.01]]")
                 .replace('"two"', "2")
                 # the ModelSavers need a log directory to write into (else the check says so)
                 .replace("steps_per_epoch = 4", f'steps_per_epoch = 4\nlogdir = "{rundir / "log"}"\n'
                                                 'logdir_action = "k"'))
    plan = load_run_file(p)
    assert [c.name for c in plan.callbacks] == ["ModelSaver", "PeriodicTrigger", "ScheduledHyperParamSetter"]


def test_checker_and_constructor_problems_together_without_follow_up_noise(rundir) -> None:
    """An unknown name inside a nested component is reported once: its parent is not built
    (no second, confusing error about a missing argument)."""
    p = rundir / "mixed.toml"
    p.write_text(
        '[model]\nclass = "tinyrun:LinearNet"\n'
        '[data]\nfunction = "tinyrun:make_data"\n'
        '[[callbacks]]\nname = "PeriodicTrigger"\n'
        'args = { triggerable = { callback = "ModelSavr" }, every_k_steps = 2 }\n'
        '[[callbacks]]\nname = "ModelSaver"\n'
        'args = { keep_checkpoint_every_n_hours = -3 }\n'
        '[[monitors]]\nname = "TFEventWriter"\n'
        'args = { max_queue = 0 }\n'
        '[train]\nstarting_epoch = 5\nmax_epoch = 3\nresume = "yes"\n')
    problems = _problems(p)
    got = {(pr.line, pr.where) for pr in problems}
    assert got == {(7, "callbacks[0].args.triggerable.callback"),
                   (10, "callbacks[1].args.keep_checkpoint_every_n_hours"),
                   (13, "monitors[0].args.max_queue"), (16, "train.max_epoch"), (17, "train.resume")}, problems
    text = "\n".join(pr.message for pr in problems)
    assert "Did you mean ModelSaver" in text
    assert "max_epoch (3) is smaller than starting_epoch (5)" in text
    assert "resume must be true or false" in text


def test_model_constructor_errors_are_reported_too(rundir) -> None:
    (rundir / "pickymodel.py").write_text(
        "from tinyrun import LinearNet\n\n"
        "class Picky(LinearNet):\n"
        "    def __init__(self, lr=0.1):\n"
        "        if not isinstance(lr, float):\n"
        "            raise TypeError(f'Picky: lr must be a float, got {lr!r}')\n"
        "        super().__init__(lr)\n")
    p = rundir / "m.toml"
    p.write_text('[model]\nclass = "pickymodel:Picky"\nargs = { lr = "fast" }\n'
                 '[data]\nfunction = "tinyrun:make_data"\n'
                 '[[callbacks]]\nname = "ModelSaver"\nargs = { max_to_keep = -1 }\n')
    problems = _problems(p)
    assert [(pr.line, pr.where) for pr in problems] == [(3, "model.args.lr"), (8, "callbacks[0].args.max_to_keep")]
    assert "TypeError: Picky: lr must be a float, got 'fast'" in problems[0].message


def test_log_directory_mistakes_are_in_the_same_report(rundir) -> None:
    full = rundir / "full"
    full.mkdir()
    (full / "model-4.index").write_text("x")
    (rundir / "afile").write_text("x")
    p = rundir / "q.toml"
    base = '[model]\nclass = "tinyrun:LinearNet"\n[data]\nfunction = "tinyrun:make_data"\n' \
           '[[callbacks]]\nname = "ModelSaver"\nargs = { max_to_keep = "many" }\n'
    p.write_text(base + f'[train]\nlogdir = "{full}"\nlogdir_action = "q"\n')
    problems = _problems(p)
    assert [(pr.line, pr.where) for pr in problems] == [(7, "callbacks[0].args.max_to_keep"),
                                                        (10, "train.logdir_action")]
    assert "logdir_action = \"q\" says to quit" in problems[1].message
    p.write_text(base + f'[train]\nlogdir = "{rundir / "afile"}"\nlogdir_action = "k"\n')
    problems = _problems(p)
    assert [(pr.line, pr.where) for pr in problems][1] == (9, "train.logdir")
    assert "is not a directory" in problems[1].message
    assert sorted(x.name for x in full.iterdir()) == ["model-4.index"]


def test_dry_run_says_what_happens_to_the_log_directory(rundir) -> None:
    log = rundir / "log"
    p = rundir / "v.toml"
    text = (HERE / "valid.toml").read_text().replace("LOGDIR", str(log))
    p.write_text(text)
    out = load_run_file(p).dry_run()
    assert f"{log}: does not exist; created when training starts" in out
    assert not log.exists()
    log.mkdir()
    (log / "old.txt").write_text("x")
    out = load_run_file(p).dry_run()
    assert f'{log}: not empty; kept (logdir_action = "k"): the run resumes from its newest checkpoint' in out
    p.write_text(text.replace('logdir_action = "k"', 'logdir_action = "d"\nresume = false'))
    out = load_run_file(p).dry_run()
    assert f'{log}: not empty; its content is deleted when training starts (logdir_action = "d")' in out
    assert sorted(x.name for x in log.iterdir()) == ["old.txt"]


def test_values_of_the_wrong_type_for_annotated_parameters(rundir) -> None:
    """A value whose TOML type fits no annotation of its parameter is a mistake of the file
    even when the constructor would take it (and fail only later, during training)."""
    p = rundir / "types.toml"
    p.write_text(
        '[model]\nclass = "tinyrun:LinearNet"\n'                                               # 1-2
        '[data]\nfunction = "tinyrun:make_data"\nargs = { n = "64" }\n'                        # 3-5
        '[[callbacks]]\nname = "EarlyStopping"\n'                                              # 6-7
        'args = { monitor_stat = "cost", patience = "3", min_delta = 1, restore_best = 1 }\n'  # 8
        '[[callbacks]]\nname = "ModelSaver"\n'                                                 # 9-10
        'args = { var_collections = ["variables"], checkpoint_dir = 5 }\n'                     # 11
        '[[monitors]]\nname = "TFEventWriter"\nargs = { flush_secs = 10 }\n')                  # 12-14
    problems = _problems(p)
    assert [(pr.line, pr.where) for pr in problems] == [
        (5, "data.args.n"), (8, "callbacks[0].args.patience"), (8, "callbacks[0].args.restore_best"),
        (11, "callbacks[1].args.checkpoint_dir")]
    assert problems[1].message.startswith("EarlyStopping: patience = '3' is a string, but EarlyStopping takes int")
    assert "checkpoint_dir = 5 is an integer, but ModelSaver takes str | None" in problems[3].message
    # an integer for a float parameter, an array for a Sequence, are fine
    fixed = p.read_text().replace('"64"', "64").replace('"3"', "3").replace("restore_best = 1", "restore_best = true")
    p.write_text(fixed.replace("checkpoint_dir = 5", 'checkpoint_dir = "ckpt"'))
    assert len(load_run_file(p).callbacks) == 2


def test_a_real_run_builds_each_component_once(rundir) -> None:
    """Checking does not cost a second construction: a callback (and the object in its
    arguments) is built once by ``train_from_file``; ``load_run_file`` builds a throwaway one."""
    from trainbus.runfile import train_from_file
    from trainbus.utils import logger

    (rundir / "counted.py").write_text(
        "from trainbus.callbacks import Callback\n\n"
        "def _count(name):\n"
        "    with open('built.txt', 'a') as f:\n"
        "        f.write(name + '\\n')\n\n"
        "class Counted(Callback):\n"
        "    def __init__(self, tag: str = 'cb') -> None:\n"
        "        _count(tag)\n\n"
        "def make_tag() -> str:\n"
        "    _count('tag')\n"
        "    return 'cb'\n")
    p = rundir / "run.toml"
    p.write_text('[model]\nclass = "tinyrun:LinearNet"\n[data]\nfunction = "tinyrun:make_data"\nargs = { n = 16 }\n'
                 '[[callbacks]]\nname = "PeriodicTrigger"\n'
                 'args = { triggerable = { object = "counted:Counted", args = { tag = { object = "counted:make_tag", '
                 'args = {} } } }, every_k_steps = 1 }\n'
                 f'[train]\nmax_epoch = 1\nlogdir = "{rundir / "log"}"\nlogdir_action = "k"\ndefault_callbacks = false\n')
    try:
        train_from_file(p)
    finally:
        logger._reset_for_tests()
    assert (rundir / "built.txt").read_text().split() == ["tag", "cb"]
    load_run_file(p)
    assert (rundir / "built.txt").read_text().split() == ["tag", "cb", "tag", "cb"]


STATE_KEYS = """\
[model]
class = "tinyrun:LinearNet"

[data]
function = "tinyrun:make_data"

[[callbacks]]
name = "ModelSaver"

[[callbacks]]
name = "MinSaver"
state_key = 3
args = { monitor_stat = "cost" }

[[callbacks]]
name = "MinSaver"
state_key = "  "
args = { monitor_stat = "cost", filename = "other" }

[[callbacks]]
name = "MaxSaver"
state_key = "best"
args = { monitor_stat = "cost" }

[[callbacks]]
name = "MaxSaver"
state_key = "best"
args = { monitor_stat = "accuracy" }

[[callbacks]]
name = "MinSaver"
args = { monitor_stat = "val" }

[[callbacks]]
name = "MinSaver"
args = { monitor_stat = "val" }

[[callbacks]]
name = "PeriodicTrigger"
args = { every_k_steps = 1, triggerable = { callback = "MinSaver", state_key = "inner" } }

[[monitors]]
name = "JSONWriter"
state_key = "json"
state_keys = "typo"

[train]
max_epoch = "two"
steps_per_epoch = 4
"""


@pytest.mark.parametrize("how", ["load", "train"])
def test_bad_state_keys_are_reported_with_the_other_mistakes(rundir, how) -> None:
    """A non-string or blank ``state_key``, two entries given one key, two stateful callbacks
    whose default keys are equal and a key inside an argument: each reported at its line, in the same pass as
    a bad loop option and an unknown key; nothing trains."""
    from trainbus.runfile import train_from_file

    p = rundir / "keys.toml"
    # [train] is the last table: a log directory for its savers (else the check reports them too)
    p.write_text(STATE_KEYS + f'logdir = "{rundir / "log"}"\nlogdir_action = "k"\n')
    if how == "load":
        problems = _problems(p)
    else:
        with pytest.raises(RunConfigError) as err:
            train_from_file(p)
        problems = err.value.problems
    got = {(pr.line, pr.where): pr.message for pr in problems}
    text = p.read_text().splitlines()
    assert (_line(p, "state_key = 3"), "callbacks[1].state_key") in got
    assert "state_key must be a non-empty string" in got[(_line(p, "state_key = 3"), "callbacks[1].state_key")]
    assert (_line(p, 'state_key = "  "'), "callbacks[2].state_key") in got
    second_best = [i for i, line in enumerate(text, 1) if line == 'state_key = "best"'][1]
    msg = got[(second_best, "callbacks[4].state_key")]
    assert "'best' is also the state_key of callbacks[3]" in msg and f"line {second_best - 5}" in msg
    second_val = [i for i, line in enumerate(text, 1) if line == "[[callbacks]]"][6]
    msg = got[(second_val, "callbacks[6]")]
    assert "'MinSaver(val)'" in msg and f"callbacks[5] (line {second_val - 4})" in msg and "add state_key" in msg
    assert (_line(p, "state_keys"), "monitors[0].state_keys") in got
    assert "did you mean 'state_key'" in got[(_line(p, "state_keys"), "monitors[0].state_keys")]
    inner = got[(_line(p, 'state_key = "inner"'), "callbacks[7].args.triggerable.state_key")]
    assert "move it next to name" in inner
    assert (_line(p, "max_epoch"), "train.max_epoch") in got
    assert len(problems) == 7, "\n".join(pr.format(p.name) for pr in problems)
