"""WandbMonitor: real trainings logged to offline W&B runs (no network, no account), read back
from each run's ``.wandb`` file with W&B's own record protobuf (``wandb_internal_pb2.Record``)."""

from __future__ import annotations

import json
import struct
import sys
import time
import zlib

import numpy as np
import pytest
from lazymod import lazy  # tests/_support

import trainbus.callbacks
from trainbus.callbacks import Callback
from trainbus.testing import train_tiny

# W&B takes seconds to import: only the worker that runs these tests imports it
wandb = lazy("wandb")
wandb_internal_pb2 = lazy("wandb.proto.wandb_internal_pb2")

HIST_DATA = [0.5, 1.0, 1.0, 2.0, 3.5, -1.0]


@pytest.fixture()
def wandb_home(tmp_path, monkeypatch):
    """W&B offline, silent, with every one of its directories under ``tmp_path``."""
    # a W&B session an earlier test of this process left (a WandbMonitor built elsewhere) would
    # keep its own settings: this test's environment applies to a new one
    wandb.teardown()
    home = tmp_path / "wandb-home"
    for var, sub in (("WANDB_DIR", "runs"), ("WANDB_CONFIG_DIR", "config"), ("WANDB_CACHE_DIR", "cache"),
                     ("WANDB_DATA_DIR", "data")):
        (home / sub).mkdir(parents=True)
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONSOLE", "off")  # no test leaves W&B's console capture behind
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    yield home / "runs"
    wandb.teardown()  # the next test's environment applies to a new W&B session


# ---------------------------------------------------------------------- reading runs back
def _records(path):
    """The records of a ``.wandb`` file: a W&B header (``:W&B``, magic 0xBEE1, version), then
    LevelDB-log chunks (crc32, length, type) in 32 KiB blocks; each record is a
    ``wandb_internal_pb2.Record``."""
    data = path.read_bytes()
    ident, magic, _version = struct.unpack("<4sHB", data[:7])
    assert (ident, magic) == (b":W&B", 0xBEE1), f"{path}: not a W&B run file"
    block, pos, parts, out = 32768, 7, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a chunk header is padding
            pos += block - pos % block
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        assert zlib.crc32(bytes([kind]) + chunk) == crc, f"{path}: damaged chunk at byte {pos}"
        if kind == 1:  # full
            out.append(chunk)
        elif kind == 2:  # first
            parts = chunk
        elif kind == 3:  # middle
            parts += chunk
        elif kind == 4:  # last
            out.append(parts + chunk)
    return [wandb_internal_pb2.Record.FromString(r) for r in out]


class OfflineRun:
    def __init__(self, directory):
        self.dir = directory
        (self.file,) = directory.glob("run-*.wandb")
        self.records = _records(self.file)
        self.run = next(r.run for r in self.records if r.WhichOneof("record_type") == "run")
        self.id = self.run.run_id
        exits = [r.exit for r in self.records if r.WhichOneof("record_type") == "exit"]
        self.exit_code = exits[-1].exit_code if exits else None
        self.rows: dict[int, dict] = {}
        for r in self.records:
            if r.WhichOneof("record_type") != "history":
                continue
            row: dict = {}
            for item in r.history.item:
                path = [item.key] if item.key else list(item.nested_key)
                node = row
                for p in path[:-1]:
                    node = node.setdefault(p, {})
                node[path[-1]] = json.loads(item.value_json)
            assert row["_step"] == r.history.step.num
            assert r.history.step.num not in self.rows, "one history row per step"
            self.rows[r.history.step.num] = row

    def series(self, key):
        return [(step, row[key]) for step, row in sorted(self.rows.items()) if key in row]


def offline_runs(wandb_dir, deadline=60.0):
    """The offline runs under a W&B directory, in the order they started, once their files are complete.

    ``run.finish()`` returns when W&B's service process has the run's last record, which it
    writes to the file a moment later: stop the service (``wandb.teardown``, the next
    ``wandb.init`` starts a new one), then wait for every file to end with its exit record."""
    wandb.teardown()
    dirs = sorted(d for d in (wandb_dir / "wandb").glob("offline-run-*") if d.is_dir())
    end = time.monotonic() + deadline
    while True:
        try:
            runs = [OfflineRun(d) for d in dirs]
            if all(r.exit_code is not None for r in runs):
                # directory names hold the start time in whole seconds: order by the exact one
                return sorted(runs, key=lambda r: r.run.start_time.ToNanoseconds())
            problem = "no exit record in " + ", ".join(str(r.file) for r in runs if r.exit_code is None)
        except (AssertionError, ValueError, StopIteration) as e:  # a file still being written
            problem = f"{type(e).__name__}: {e}"
        if time.monotonic() > end:
            raise AssertionError(f"the offline runs under {wandb_dir} were not complete after {deadline} s: {problem}")
        time.sleep(0.1)


# ---------------------------------------------------------------------- trainings
class PutStats(Callback):
    """A scalar every step; per epoch a scalar, an image, a batch of images (epoch 2) and two
    histograms: one from a graph ``tf.compat.v1.summary.histogram`` op, one TF 2 style tensor."""

    def _setup_graph(self):
        import tensorflow as tf

        self._hist_op = tf.compat.v1.summary.histogram("weights", tf.constant(HIST_DATA, dtype=tf.float32))

    def _trigger_step(self):
        self.trainer.monitors.put_scalar("train/step_cost", 0.1 * self.trainer.global_step)

    def _trigger(self):
        from tensorboard.plugins.histogram import summary_v2

        m, e = self.trainer.monitors, self.trainer.epoch_num
        m.put_scalar("val-error", 1.0 / e)
        m.put_image("sample", np.full((3, 4, 3), 50 * e, dtype=np.uint8))
        if e == 2:
            m.put_image("batch", np.zeros((2, 5, 6, 1), dtype=np.float32))
        m.put_summary(self.trainer.sess.run(self._hist_op))
        m.put_summary(summary_v2.histogram_pb("acts", np.arange(10.0), buckets=5))


class PutError(Callback):
    def _trigger(self):
        self.trainer.monitors.put_scalar("val-error", 1.0 / self.trainer.epoch_num)


class FailAtEpoch(Callback):
    def __init__(self, epoch):
        self.epoch = epoch

    def _trigger(self):
        if self.trainer.epoch_num == self.epoch:
            raise RuntimeError("deliberate failure")


def test_scalars_images_histograms_at_the_global_step(logdir, wandb_home):
    mon = trainbus.callbacks.WandbMonitor(project="tiny", name="first", tags=["trainbus"], config={"lr": 0.1})
    assert mon.hooks_used() >= {"process_scalar", "process_image", "process_summary"}
    train_tiny(callbacks=[PutStats()], monitors=[mon], max_epoch=3, steps_per_epoch=2)
    (run,) = offline_runs(wandb_home)
    assert run.id == mon.run_id and mon.run is None
    assert (run.run.project, run.run.display_name, list(run.run.tags)) == ("tiny", "first", ["trainbus"])
    assert run.exit_code == 0
    # scalars at the global step they were put at
    assert [(s, round(v, 6)) for s, v in run.series("train/step_cost")] == [(s, round(0.1 * s, 6)) for s in range(1, 7)]
    assert run.series("val-error") == [(2, 1.0), (4, 0.5), (6, pytest.approx(1 / 3))]
    # images: one per epoch, a batch of two at epoch 2; the PNG files are in the run's media
    images = run.series("sample")
    assert [s for s, _ in images] == [2, 4, 6]
    for _, img in images:
        assert (img["_type"], img["width"], img["height"]) == ("image-file", 4, 3)
        assert (run.dir / "files" / img["path"]).is_file()
    ((step, batch),) = run.series("batch")
    assert step == 4 and batch["count"] == 2 and batch["_type"] == "images/separated"
    # histograms: the graph op's (HistogramProto) and the TF 2 tensor's
    # (the callback's graph ops are made in its name scope: the tag is "<scope>/weights")
    (tag,) = {k for row in run.rows.values() for k in row if k.endswith("weights")}
    hists = run.series(tag)
    assert [s for s, _ in hists] == [2, 4, 6]
    for _, h in hists:
        assert h["_type"] == "histogram"
        assert sum(h["values"]) == len(HIST_DATA)
        assert (h["bins"][0], h["bins"][-1]) == (min(HIST_DATA), max(HIST_DATA))
        assert len(h["bins"]) == len(h["values"]) + 1 and h["bins"] == sorted(h["bins"])
    for _, h in run.series("acts"):
        assert h["_type"] == "histogram" and h["values"] == [2, 2, 2, 2, 2] and len(h["bins"]) == 6
        assert h["bins"][0] == 0 and h["bins"][-1] == 9
    # the config, and the run id kept in the log directory
    assert {c.key: json.loads(c.value_json) for c in run.run.config.update}["lr"] == 0.1
    assert json.loads((logdir / "wandb-run.json").read_text())["run_id"] == run.id
    assert mon.run_file == str(logdir / "wandb-run.json")


def _console_callbacks():
    """W&B's callbacks on writes to sys.stdout / sys.stderr (its console capture)."""
    from wandb.sdk.lib import console_capture

    return dict(console_capture._stdout_callbacks), dict(console_capture._stderr_callbacks)


def test_the_console_is_left_as_it_was(logdir, wandb_home, monkeypatch):
    """By default the monitor asks W&B for no console capture: nothing hooks sys.stdout or
    sys.stderr during the training, and both are the same objects afterwards."""
    monkeypatch.delenv("WANDB_CONSOLE")
    before = (sys.stdout, sys.stderr, sys.stdout.write, sys.stderr.write, _console_callbacks())
    during = []

    class Look(Callback):
        def _trigger_epoch(self):
            during.append(_console_callbacks())

    mon = trainbus.callbacks.WandbMonitor(project="tiny")
    train_tiny(callbacks=[Look(), PutStats()], monitors=[mon], max_epoch=2, steps_per_epoch=2)
    assert mon.run is None and offline_runs(wandb_home)
    assert during == [before[4]] * 2
    assert (sys.stdout, sys.stderr, sys.stdout.write, sys.stderr.write, _console_callbacks()) == before


def test_a_capture_asked_for_ends_with_the_run(logdir, wandb_home):
    """A user who asks W&B to capture the console gets it while training, and no hook remains
    after the run finished."""
    before = _console_callbacks()
    during = []

    class Look(Callback):
        def _trigger_epoch(self):
            during.append(_console_callbacks())

    mon = trainbus.callbacks.WandbMonitor(project="tiny", settings=wandb.Settings(console="wrap"))
    train_tiny(callbacks=[Look()], monitors=[mon], max_epoch=1, steps_per_epoch=2)
    assert len(during[0][0]) == len(before[0]) + 1
    assert _console_callbacks() == before


def test_a_missing_wandb_names_the_package_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError
    with pytest.raises(ImportError) as err:
        trainbus.callbacks.WandbMonitor(project="tiny")
    assert "WandbMonitor needs the wandb package" in str(err.value) and str(err.value).endswith("pip install wandb")
    assert "trainbus-monitor-wandb" not in str(err.value)


def test_a_non_chief_trainer_creates_no_run(logdir, wandb_home):
    from trainbus.train import SimpleTrainer

    tr = SimpleTrainer()
    tr.is_chief = False
    mon = trainbus.callbacks.WandbMonitor(project="tiny")
    train_tiny(callbacks=[PutError().set_chief_only(False)], monitors=[mon], trainer=tr, max_epoch=2,
               steps_per_epoch=1)
    assert tr.monitors.get_latest("val-error") == 0.5  # the stats were put on this worker
    assert mon.run_id is None and mon.run is None
    assert not (wandb_home / "wandb").exists() and not (logdir / "wandb").exists()
    assert not (logdir / "wandb-run.json").exists()


def _auto_resume_train(max_epoch, monitor):
    from trainbus import AutoResumeTrainConfig, launch_train_with_config
    from trainbus.input_source import FeedInput
    from trainbus.testing import TinyModel, tiny_dataflow
    from trainbus.train import SimpleTrainer

    cfg = AutoResumeTrainConfig(model=TinyModel(), data=FeedInput(tiny_dataflow()),
                                callbacks=[trainbus.callbacks.ModelSaver(), PutError()],
                                monitors=[trainbus.callbacks.JSONWriter(), monitor], max_epoch=max_epoch,
                                steps_per_epoch=2)
    launch_train_with_config(cfg, SimpleTrainer())


def test_a_resumed_training_continues_the_same_run(logdir, wandb_home):
    first = trainbus.callbacks.WandbMonitor(project="tiny")
    _auto_resume_train(2, first)
    again = trainbus.callbacks.WandbMonitor(project="tiny")
    _auto_resume_train(4, again)  # restores global_step 4 and epoch 2 from the log directory
    assert again.run_id == first.run_id
    runs = offline_runs(wandb_home)
    assert [r.id for r in runs] == [first.run_id, first.run_id]
    assert runs[0].series("val-error") == [(2, 1.0), (4, 0.5)]
    assert runs[1].series("val-error") == [(6, pytest.approx(1 / 3)), (8, 0.25)]
    assert all(r.exit_code == 0 for r in runs)
    # resume=False starts a new run, which the log directory then names
    fresh = trainbus.callbacks.WandbMonitor(project="tiny", resume=False)
    _auto_resume_train(5, fresh)
    assert fresh.run_id != first.run_id
    assert [r.id for r in offline_runs(wandb_home)][-1] == fresh.run_id
    assert json.loads((logdir / "wandb-run.json").read_text())["run_id"] == fresh.run_id


def test_an_explicit_run_id_and_another_project(logdir, wandb_home):
    mon = trainbus.callbacks.WandbMonitor(project="tiny", run_id="given-id-1", log_images=False,
                                          log_histograms=False)
    assert not {"process_image", "process_summary"} & mon.hooks_used()
    train_tiny(callbacks=[PutError()], monitors=[mon], max_epoch=1, steps_per_epoch=1)
    assert [r.id for r in offline_runs(wandb_home)] == ["given-id-1"]
    # the directory's run belongs to project "tiny": a monitor of another project starts its own
    other = trainbus.callbacks.WandbMonitor(project="elsewhere")
    train_tiny(callbacks=[PutError()], monitors=[other], max_epoch=1, steps_per_epoch=1)
    assert other.run_id != "given-id-1"
    assert json.loads((logdir / "wandb-run.json").read_text()) == {
        "run_id": other.run_id, "project": "elsewhere", "entity": None}


def test_a_failed_training_finishes_the_run_as_failed(logdir, wandb_home):
    mon = trainbus.callbacks.WandbMonitor(project="tiny")
    with pytest.raises(RuntimeError, match="deliberate failure"):
        train_tiny(callbacks=[PutError(), FailAtEpoch(2)], monitors=[mon], max_epoch=3, steps_per_epoch=2)
    (run,) = offline_runs(wandb_home)
    assert run.exit_code == 1 and mon.run is None
    # what was put before the failure, also at the failing epoch's end, was sent
    assert run.series("val-error") == [(2, 1.0), (4, 0.5)]


def test_a_run_the_program_opened_itself_is_left_alone(logdir, wandb_home):
    own = wandb.init(project="mine", id="own-run-1")
    mon = trainbus.callbacks.WandbMonitor(project="tiny")
    train_tiny(callbacks=[PutError()], monitors=[mon], max_epoch=1, steps_per_epoch=1)
    own.log({"after-training": 1.0}, step=10)  # still open: the monitor finished only its own run
    own.finish()
    runs = {r.id: r for r in offline_runs(wandb_home)}
    assert set(runs) == {"own-run-1", mon.run_id}
    assert runs["own-run-1"].series("after-training") == [(10, 1.0)]
    assert "val-error" not in {k for row in runs["own-run-1"].rows.values() for k in row}
    assert runs[mon.run_id].series("val-error") == [(1, 1.0)]


def test_a_damaged_run_file_is_an_error_naming_it(logdir, wandb_home):
    (logdir / "wandb-run.json").write_text("{not json")
    with pytest.raises(RuntimeError, match=r"wandb-run\.json.*delete the file"):
        train_tiny(callbacks=[PutError()], monitors=[trainbus.callbacks.WandbMonitor(project="tiny")], max_epoch=1,
                   steps_per_epoch=1)
    assert not (wandb_home / "wandb").exists()


def test_bad_arguments_are_rejected_at_construction():
    with pytest.raises(ValueError, match="use run_id="):
        trainbus.callbacks.WandbMonitor(id="abc")
    with pytest.raises(ValueError, match="use wandb_dir="):
        trainbus.callbacks.WandbMonitor(dir="/tmp")
    with pytest.raises(TypeError, match=r"tags='a'.*wrap it"):
        trainbus.callbacks.WandbMonitor(tags="a")
    with pytest.raises(TypeError, match="config"):
        trainbus.callbacks.WandbMonitor(config=[1])
    with pytest.raises(TypeError, match="project"):
        trainbus.callbacks.WandbMonitor(project="")
    with pytest.raises(TypeError, match="resume='allow'"):
        trainbus.callbacks.WandbMonitor(resume="allow")


def test_conformance():
    from trainbus.testing import check_distribution

    check_distribution("trainbus-monitor-wandb")
