"""``bench/bench_startup.py``'s judgement of the startup target and its pooling of saved runs.

The benchmark's times are not tested (they are measured, not asserted); what is tested here is
what it concludes from given times: the verdict on the overhead target, the bootstrap interval,
and ``--from-json`` pooling runs written by ``--json``. The children are started only to check
that each workload's trainbus and bare-loop children reach their first step and report their
marks (forked from the zygote: TensorFlow is not imported again)."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "bench_startup.py")


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, os.path.dirname(os.path.abspath(BENCH)))  # for its `from _mlp import ...`
    try:
        spec = importlib.util.spec_from_file_location("bench_startup_under_test", BENCH)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.pop(0)


def test_the_interval_is_of_the_median_and_the_same_for_the_same_rounds(bench):
    diffs = [0.030, 0.041, 0.044, 0.047, 0.052, 0.055, 0.061, 0.070, 0.120]
    lo, hi = bench.median_interval(diffs)
    assert lo <= 0.052 <= hi  # the sample's median lies inside
    assert 0.030 <= lo and hi <= 0.120
    assert bench.median_interval(list(diffs)) == (lo, hi)  # a fixed seed: one answer per set of rounds
    assert bench.median_interval([0.02] * 7) == (0.02, 0.02)


def test_the_target_is_met_only_when_the_whole_interval_is_under_it(bench):
    assert bench.verdict([0.010, 0.015, 0.020, 0.022, 0.025, 0.030, 0.035]).startswith("met (90% interval")
    assert bench.verdict([0.070, 0.080, 0.085, 0.090, 0.095, 0.100, 0.130]).startswith("NOT met (90% interval")
    undecided = bench.verdict([0.000, 0.020, 0.040, 0.050, 0.060, 0.080, 0.100])
    assert undecided.startswith("not decided by this run") and "run more rounds" in undecided
    assert bench.verdict([0.01, 0.01, 0.01]).startswith("not decided: 3 rounds are too few")
    # the bound is inclusive: an interval ending exactly at the target meets it
    assert bench.verdict([0.05] * 6, target=0.05).startswith("met")


def _marks(after_tf: float, t0: float = 1000.0) -> dict:
    """A child's marks whose first step comes ``after_tf`` seconds after ``import tensorflow``."""
    return {"tf": [t0, 1.0], "import": [t0 + 0.01, 1.01], "graph": [t0 + 0.1, 1.1], "setup0": [t0 + 0.1, 1.1],
            "setup1": [t0 + 0.11, 1.11], "writer": [t0 + 0.11, 1.11], "session": [t0 + 0.14, 1.14],
            "first": [t0 + after_tf, 1.0 + after_tf], "rss_kb": 600000}


#: when each synthetic child was "started": every run's own (a run is known by them)
_SPAWNED = itertools.count(1000)


def _run_file(path, overheads: list[float], kinds=("trainbus", "bare", "bare, same logging", "bare, same graph"),
              workload: str | None = None):
    """A file as ``--json`` writes it: trainbus ``overheads[i]`` slower than each bare loop in round i."""
    runs = {k: [] for k in kinds}
    for i, extra in enumerate(overheads):
        for k in kinds:
            after = 0.2 + 0.001 * i + (extra if k == "trainbus" else 0.0)
            runs[k].append({"spawned": next(_SPAWNED), "marks": _marks(after), "rss_kb": 600000})
    data = {"format": 1, "rounds": len(overheads), "load": [1.0, 1.0, 1.0],
            "kinds": [[k, sys.executable, k] for k in kinds], "runs": runs,
            "star": {"trainbus": [["0.08", "0.08"]] * len(overheads), "tensorpack": []},
            "imports": [["0.003", "0.003", "False"]] * len(overheads), "plugins_cmd": [0.12] * len(overheads),
            "note": "", "tp_note": "not measured: no --tensorpack-python given", "heavy": {"trainbus": "none"}}
    if workload is not None:  # files written before --workload have no such key: the defaults workload
        data["workload"] = workload
    path.write_text(json.dumps(data))
    return str(path)


def _report(*paths: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, BENCH, "--from-json", *paths], capture_output=True, text=True, timeout=120)


def test_from_json_pools_the_rounds_of_several_runs_and_judges_them_together(tmp_path):
    scattered = _run_file(tmp_path / "scattered.json", [0.01, 0.02, 0.03, 0.09, 0.10])
    alone = _report(scattered)
    assert alone.returncode == 0, alone.stderr
    assert "median of 5 interleaved rounds" in alone.stdout
    assert "not decided by this run" in alone.stdout  # 5 rounds scattered around the target
    a = _run_file(tmp_path / "a.json", [0.010] * 5)
    b = _run_file(tmp_path / "b.json", [0.030] * 5)
    c = _run_file(tmp_path / "c.json", [0.045] * 5)
    pooled = _report(a, b, c)
    assert pooled.returncode == 0, pooled.stderr
    out = pooled.stdout
    assert "median of 15 interleaved rounds" in out
    assert f"pooled from 3 runs: {a}, {b}, {c}" in out
    over_bare = out.split("trainbus over 'bare':", 1)[1].split("\n", 3)
    # the rounds of all three files, and only theirs: none of the files alone has this median and these quartiles
    assert "median +0.030 (quartiles +0.010 to +0.045) s" in over_bare[1]
    assert over_bare[2].strip().startswith("target <= 0.05 s: met (90% interval")
    # each overhead line ends with the ratio of the medians after import tensorflow: 0.232 s over 0.202 s
    assert over_bare[0].endswith("peak RSS +0 MB; 1.15x its time after import tensorflow"), over_bare[0]
    assert "its own machinery" in out.split("trainbus over 'bare, same graph':", 1)[1].split("\n", 1)[0]
    assert "from trainbus import * after TensorFlow: 0.080 s" in out


def _set_times(path, after) -> str:
    """Rewrite a file of ``_run_file``: each kind's round i reaches its first step ``after(kind, i)`` seconds
    after import tensorflow."""
    data = json.loads(path.read_text())
    for kind, rounds in data["runs"].items():
        for i, rnd in enumerate(rounds):
            rnd["marks"] = _marks(after(kind, i))
    path.write_text(json.dumps(data))
    return str(path)


def test_the_rounds_own_ratio_is_the_median_of_each_rounds_ratio_not_the_ratio_of_the_medians(tmp_path):
    path = tmp_path / "ratios.json"
    _run_file(path, [0.0] * 5)
    # the bare loops' medians come from round 2 (0.3 s), trainbus's from round 0 (0.5 s): the ratio of the
    # medians is 0.5 / 0.3 = 1.67x; the rounds' own ratios are 5.0, 2.0, 1.5, 1.5, 1.4, median 1.5x
    bare, ours = [0.1, 0.2, 0.3, 0.4, 0.5], [0.5, 0.4, 0.45, 0.6, 0.7]
    run = _report(_set_times(path, lambda kind, i: (ours if kind == "trainbus" else bare)[i]))
    assert run.returncode == 0, run.stderr
    line, under = run.stdout.split("trainbus over 'bare':", 1)[1].split("\n", 2)[:2]
    assert line.endswith("; 1.67x its time after import tensorflow"), line
    ratio = under.split("the rounds' own ratio: median ", 1)[1]
    assert ratio.startswith("1.50x (90% interval "), under
    lo, hi = (float(x.rstrip("x)")) for x in ratio.split("interval ", 1)[1].split(" to "))
    assert 1.4 <= lo <= 1.5 <= hi <= 5.0
    # too few rounds for an interval: the median alone (0.24 / 0.2, 0.241 / 0.201, 0.242 / 0.202)
    few = _report(_run_file(tmp_path / "few.json", [0.04] * 3))
    assert few.returncode == 0, few.stderr
    assert few.stdout.split("trainbus over 'bare':", 1)[1].split("\n", 2)[1].endswith(
        "the rounds' own ratio: median 1.20x"), few.stdout


#: the kinds of a run with --tensorpack-python: trainbus's four, tensorpack and its three bare loops
TP_KINDS = ("trainbus", "bare", "bare, same logging", "bare, same graph", "tensorpack", "bare (tp python)",
            "bare, same logging (tp python)", "bare, same graph (tp python)")


def _with_tensorpack(path, ours: list[float], theirs: list[float], workload: str = "defaults") -> str:
    """A run beside tensorpack: in round i trainbus takes ``ours[i]`` more than its bare loop (0.2 s after
    import tensorflow), tensorpack ``theirs[i]`` more than its own (0.25 s)."""
    _run_file(path, [0.0] * len(ours), kinds=TP_KINDS, workload=workload)

    def after(kind: str, i: int) -> float:
        base = 0.25 if "tp python" in kind or kind == "tensorpack" else 0.2
        return base + {"trainbus": ours[i], "tensorpack": theirs[i]}.get(kind, 0.0)

    return _set_times(path, after)


def test_trainbus_overhead_is_set_against_tensorpacks_round_by_round(tmp_path):
    # the rounds' own differences: -0.30 -0.37 -0.26 -0.41 -0.33 +0.05 -0.12, median -0.30; the difference of
    # the two overheads' medians would be 0.10 - 0.42 = -0.32
    ours = [0.10, 0.08, 0.12, 0.09, 0.11, 0.10, 0.30]
    theirs = [0.40, 0.45, 0.38, 0.50, 0.44, 0.05, 0.42]
    run = _report(_with_tensorpack(tmp_path / "tp.json", ours, theirs))
    assert run.returncode == 0, run.stderr
    line, under = run.stdout.split("trainbus's overhead over 'bare' against tensorpack's over 'bare (tp python)', "
                                   "round by round after import tensorflow: ", 1)[1].split("\n", 2)[:2]
    assert line.startswith("median -0.300 (quartiles "), line
    assert line.endswith("s; trainbus's the smaller in 6 of 7 rounds"), line
    assert under.strip().startswith("proposed target, trainbus's overhead <= tensorpack's: met (90% interval"), under
    # tensorpack's the smaller in every round: not met
    worse = _report(_with_tensorpack(tmp_path / "worse.json", [0.2] * 6, [0.1, 0.12, 0.09, 0.11, 0.1, 0.1]))
    assert "trainbus's the smaller in 0 of 6 rounds" in worse.stdout
    assert "proposed target, trainbus's overhead <= tensorpack's: NOT met (90% interval" in worse.stdout
    # the queue workload is compared too, but judged against no target; without tensorpack there is no comparison
    queue = _report(_with_tensorpack(tmp_path / "q.json", ours, theirs, workload="queue")).stdout
    assert "trainbus's the smaller in 6 of 7 rounds" in queue and "proposed target" not in queue
    alone = _report(_run_file(tmp_path / "alone.json", [0.01] * 5)).stdout
    assert "against tensorpack's" not in alone and "proposed target" not in alone


def test_from_json_refuses_a_file_it_did_not_write_and_runs_of_other_kinds(tmp_path):
    a = _run_file(tmp_path / "a.json", [0.02] * 5)
    other = _run_file(tmp_path / "other.json", [0.02] * 5, kinds=("trainbus", "bare"))
    mixed = _report(a, other)
    assert mixed.returncode != 0
    assert f"--from-json: {other} measured other kinds (trainbus, bare) than {a}" in mixed.stderr
    assert "Traceback" not in mixed.stderr
    junk = tmp_path / "junk.json"
    junk.write_text(json.dumps({"rounds": 3}))
    bad = _report(str(junk))
    assert bad.returncode != 0 and f"--from-json: {junk} was not written by this benchmark's --json" in bad.stderr
    twice = _report(a, a)
    assert twice.returncode != 0
    assert f"--from-json: {a} holds the same run as {a}; pooling it twice would count its rounds twice" in twice.stderr
    copy = tmp_path / "copy.json"
    copy.write_text((tmp_path / "a.json").read_text())
    copied = _report(a, str(copy))
    assert copied.returncode != 0 and f"{copy} holds the same run as {a}" in copied.stderr
    with_run_flags = subprocess.run([sys.executable, BENCH, "--from-json", a, "--rounds", "9"],
                                    capture_output=True, text=True, timeout=120)
    assert with_run_flags.returncode == 2
    assert "--from-json reports runs already made and runs nothing: --rounds does not apply" in with_run_flags.stderr
    missing = _report(str(tmp_path / "nowhere.json"))
    assert missing.returncode != 0 and "--from-json: cannot read" in missing.stderr


def test_the_queue_workload_is_reported_as_such_and_not_judged_against_the_target(tmp_path):
    run = _report(_run_file(tmp_path / "q.json", [0.01] * 6, workload="queue"))
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "Startup on the queue workload (MLP 784-256-256-10, default callbacks and monitors, a QueueInput)" in out
    assert "reading its batch from a FIFOQueue" in out and "the same of the queue's size" in out
    over_bare = out.split("trainbus over 'bare':", 1)[1].split("\n", 1)[0]
    assert "after import tensorflow +0.010 s [CPU +0.010 s]; peak RSS +0 MB" in over_bare, over_bare
    assert "target <= 0.05 s:" not in out and "(target" not in over_bare  # the target is the defaults workload's
    assert "(the target <= 0.05 s is on the defaults workload: --workload defaults)" in out
    defaults = _report(_run_file(tmp_path / "d.json", [0.01] * 6, workload="defaults")).stdout
    assert "Startup on the defaults workload (MLP 784-256-256-10, default callbacks and monitors, a FeedInput)" \
        in defaults and "target <= 0.05 s: met" in defaults and "FIFOQueue" not in defaults


def test_runs_of_two_workloads_are_not_pooled(tmp_path):
    old = _run_file(tmp_path / "old.json", [0.02] * 5)  # written before --workload: the defaults
    same = _run_file(tmp_path / "same.json", [0.02] * 5, workload="defaults")
    assert _report(old, same).returncode == 0
    queue = _run_file(tmp_path / "queue.json", [0.02] * 5, workload="queue")
    mixed = _report(old, queue)
    assert mixed.returncode != 0 and "Traceback" not in mixed.stderr
    assert f"--from-json: {queue} measured the queue workload, {old} the defaults workload; " \
           "pool runs of one command line" in mixed.stderr
    flag = subprocess.run([sys.executable, BENCH, "--from-json", old, "--workload", "queue"],
                          capture_output=True, text=True, timeout=120)
    assert flag.returncode == 2 and "--workload does not apply" in flag.stderr


#: each child's time marks, in the order they are taken
MARKS = {"trainbus": ["tf", "import", "setup0", "setup1", "session", "first"],
         "bare": ["tf", "import", "graph", "session", "first"],
         "bare-graph": ["tf", "import", "graph", "writer", "session", "first"]}


def _child_marks(child: str, tmp_path, workload: str = "defaults", **env: str) -> dict:
    """Run the benchmark's ``child`` (forked from the zygote) and return the marks it reported."""
    import zygote  # tests/_support

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TMPDIR=str(tmp_path), **env)
    proc = zygote.run([sys.executable, os.path.abspath(BENCH), "--child", child, "--workload", workload],
                      cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("STARTUP ")]
    assert len(line) == 1, proc.stdout[-2000:]
    return json.loads(line[0].split(" ", 1)[1])


@pytest.mark.parametrize("workload", ["defaults", "queue"])
@pytest.mark.parametrize("child", ["trainbus", "bare", "bare-graph"])
def test_each_child_reaches_its_first_step_and_reports_its_marks(workload, child, tmp_path):
    marks = _child_marks(child, tmp_path, workload)
    order = MARKS[child]
    assert set(marks) == set(order) | {"rss_kb", "queue"} | ({"modules"} if child == "trainbus" else set()), marks
    assert marks["queue"] is (workload == "queue")  # the queue workload's step reads from a queue
    walls = [marks[m][0] for m in order]
    assert walls == sorted(walls), marks  # each phase ends after the one before
    assert marks["rss_kb"] > 100_000
    if child == "trainbus":
        # its import: the modules of trainbus's distributions and pluggy, and only those
        modules = marks["modules"]
        assert {"pluggy", "trainbus", "trainbus.train.base", "trainbus_summary"} <= set(modules), modules
        assert all(m.split(".")[0] == "pluggy" or m.startswith("trainbus") for m in modules), modules


def test_the_child_imported_beforehand_starts_its_clock_after_the_modules_a_trainbus_child_named(tmp_path):
    named = _child_marks("trainbus", tmp_path)["modules"]
    assert len(named) > 20, named
    # given every module the trainbus child named, the child imports none of them after its clock started
    full = _child_marks("trainbus-preloaded", tmp_path, BENCH_STARTUP_PRELOAD=",".join(named))
    assert full["modules"] == [], full["modules"]
    walls = [full[m][0] for m in MARKS["trainbus"]]
    assert walls == sorted(walls), full
    # given a part of them, the rest is imported after it (and reported: what the preloading missed shows)
    part = _child_marks("trainbus-preloaded", tmp_path, BENCH_STARTUP_PRELOAD="pluggy")
    assert "pluggy" not in part["modules"] and "trainbus.train.base" in part["modules"], part["modules"]


def test_the_import_is_the_difference_to_the_child_imported_beforehand_and_only_trainbus_is_judged(tmp_path):
    preloaded = "trainbus, imported beforehand"
    path = _run_file(tmp_path / "p.json", [0.08] * 6, kinds=("trainbus", "bare", "bare, same logging",
                                                             "bare, same graph", preloaded))
    data = json.loads((tmp_path / "p.json").read_text())
    for i, (tb, pre) in enumerate(zip(data["runs"]["trainbus"], data["runs"][preloaded])):
        tb["marks"]["modules"] = ["pluggy", "trainbus", "trainbus.train"]
        pre["marks"]["modules"] = []
        pre["marks"]["first"] = [1000.0 + 0.2 + 0.001 * i + 0.03, 1.0 + 0.2 + 0.001 * i + 0.03]
    (tmp_path / "p.json").write_text(json.dumps(data))
    run = _report(path)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "trainbus's import: trainbus over 'trainbus, imported beforehand', the rounds' differences after " \
           "import tensorflow: median +0.050" in out
    assert "(3 modules of trainbus's distributions and pluggy, imported before the clock started; none of them " \
           "imported after it)" in out
    pre_line = out.split("trainbus, imported beforehand over 'bare':", 1)[1].split("\n", 2)
    assert "after import tensorflow +0.030 s" in pre_line[0] and "(target" not in pre_line[0]
    assert not pre_line[2].strip().startswith("target <=")  # only trainbus itself is judged
    assert out.count("target <= 0.05 s: NOT met") == 2  # trainbus over the plain and the same-logging loops
    phases = out.split("Phases, median s [CPU s]", 1)[1].splitlines()[0]
    assert phases.split() == ["trainbus", "trainbus,", "imported", "beforehand", "bare", "bare,", "same",
                              "logging", "bare,", "same", "graph"]


def test_the_floor_is_the_hand_written_defaults_work_over_the_bare_loop_and_the_room_it_leaves(tmp_path):
    # round i: the bare loop 0.2 s after import tensorflow, the same-logging loop `logging[i]` more, the
    # same-graph loop `graph[i]` more; trainbus 0.1 s more than the bare loop. The rounds' own differences
    # have medians 0.030 and 0.060, and an interval of the median inside [0.020, 0.040] and [0.055, 0.070]
    logging = [0.020, 0.025, 0.030, 0.030, 0.035, 0.040, 0.030]
    graph = [0.055, 0.060, 0.060, 0.065, 0.070, 0.058, 0.062]
    straddling = [0.030, 0.040, 0.050, 0.060, 0.070, 0.045, 0.055]  # its interval holds the target
    path = tmp_path / "floor.json"
    _run_file(path, [0.0] * 7, kinds=TP_KINDS)

    def after(kind: str, i: int) -> float:
        extra = {"bare, same logging": logging[i], "bare, same graph": graph[i], "trainbus": 0.1,
                 # tensorpack's interpreter: its same-graph loop at the target or above in every round
                 "bare, same logging (tp python)": straddling[i], "bare, same graph (tp python)": 0.05 + 0.002 * i,
                 "tensorpack": 0.3}.get(kind, 0.0)
        return 0.2 + extra

    _set_times(path, after)
    data = json.loads(path.read_text())
    data["least"] = [["0.0040", "0.0090"], ["0.0035", "0.0070"], ["0.0050", "0.0100"]]  # (pluggy, with the scan)
    path.write_text(json.dumps(data))
    run = _report(str(path))
    assert run.returncode == 0, run.stderr
    section = run.stdout.split("The target's floor: the defaults' own work done by hand, no framework imported, "
                               "over the bare loop", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    # one line per hand-written loop, of both interpreters, in this order; none of the frameworks
    assert [ln.split(": median", 1)[0].strip() for ln in section[:4]] == [
        "'bare, same logging' over 'bare'", "'bare, same graph' over 'bare'",
        "'bare, same logging (tp python)' over 'bare (tp python)'",
        "'bare, same graph (tp python)' over 'bare (tp python)'"], section

    def interval(line: str) -> tuple[float, float]:
        lo, hi = line.split("(90% interval ", 1)[1].split(" s)", 1)[0].split(" to ")
        return float(lo), float(hi)

    assert ": median +0.030 s (90% interval " in section[0]
    lo, hi = interval(section[0])
    assert 0.020 <= lo <= 0.030 <= hi <= 0.040
    # the room is the target less the interval, the upper end from the lower
    assert section[0].endswith(f"room left by the target: {0.05 - hi:+.3f} to {0.05 - lo:+.3f} s"), section[0]
    assert ": median +0.060 s" in section[1]
    lo, hi = interval(section[1])
    assert 0.055 <= lo <= 0.060 <= hi <= 0.070
    assert section[1].endswith("room left by the target: none: the work by hand is at or above the target in the "
                               "whole interval; a framework meets the target only by doing it faster than by hand"), \
        section[1]
    lo, hi = interval(section[2])
    assert lo < 0.05 < hi  # some room, or none: the room's interval runs from below 0 to above it
    assert section[2].endswith(f"room left by the target: {0.05 - hi:+.3f} to {0.05 - lo:+.3f} s"), section[2]
    assert section[3].endswith("only by doing it faster than by hand"), section[3]  # its rounds: 0.05 to 0.062
    # the least import: the medians of the "least" children, set against the room over the same-graph loop
    most = 0.05 - interval(section[1])[0]
    assert section[4] == ("  the least a framework on pluggy and entry points imports after TensorFlow (medians of 3 "
                          "fresh interpreters): pluggy 0.0040 s; pluggy, trainbus's registry and one entry-point scan "
                          f"0.0090 s; the room over 'bare, same graph' is at most {most:+.3f} s")
    # without tensorpack, trainbus's two loops; with too few rounds, no interval; the queue workload has no floor
    alone = _report(_run_file(tmp_path / "alone.json", [0.01] * 5)).stdout
    assert "over 'bare (tp python)'" not in alone.split("The target's floor", 1)[1]
    # a run written before the least import was measured says so, and pooled with one that has it, counts its lines
    assert "the least a framework on pluggy and entry points imports after TensorFlow: not measured in these runs" \
        in alone
    pooled = _report(_run_file(tmp_path / "older.json", [0.01] * 5, kinds=TP_KINDS), str(path)).stdout
    assert "imports after TensorFlow (medians of 3 fresh interpreters): pluggy 0.0040 s;" in pooled
    few = _report(_run_file(tmp_path / "few.json", [0.01] * 3)).stdout
    assert "'bare, same graph' over 'bare': median +0.000 s; 3 rounds are too few for an interval (run at least 5)" \
        in few
    queue = _report(_run_file(tmp_path / "q.json", [0.01] * 6, workload="queue")).stdout
    assert "The target's floor" not in queue


def test_the_least_child_times_pluggys_import_and_then_the_entry_point_scan(tmp_path):
    import zygote  # tests/_support

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TMPDIR=str(tmp_path))
    proc = zygote.run([sys.executable, os.path.abspath(BENCH), "--child", "least"], cwd=tmp_path, env=env,
                      timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seconds = [ln.split()[1:] for ln in proc.stdout.splitlines() if ln.startswith("SECONDS ")]
    assert len(seconds) == 1, proc.stdout
    alone, with_scan = (float(x) for x in seconds[0])
    assert 0 < alone < with_scan < 5, seconds  # the scan's time includes pluggy's
