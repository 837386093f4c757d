"""TFEventWriter: event files of real training runs, read back with TensorBoard's own
EventAccumulator and with ``tf.compat.v1.train.summary_iterator``."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

import trainbus.callbacks
from trainbus.callbacks import Callback
from trainbus.exceptions import StopTraining
from trainbus.testing import train_tiny

ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator",
                         reason="tensorboard is a test dependency (tools/requirements-test.txt)")


class PutAll(Callback):
    """At every epoch end: a scalar, an image, a histogram + image summary, a run-metadata event."""

    def _setup_graph(self):
        import tensorflow as tf

        tf1 = tf.compat.v1
        w = self.get_tensors_maybe_in_tower(["W"])[0]
        img = tf.reshape(tf.cast(tf.abs(w) * 255.0, tf.uint8), [1, 4, 3, 1])
        self._merged = tf1.summary.merge([tf1.summary.histogram("W_hist", w, collections=[]),
                                          tf1.summary.image("W_image", img, collections=[])])

    def _trigger(self):
        import tensorflow as tf
        from tensorflow.core.util.event_pb2 import TaggedRunMetadata

        tr = self.trainer
        tr.monitors.put_scalar("epoch_sq", float(tr.epoch_num ** 2))
        tr.monitors.put_image("put_img", np.full((5, 6, 3), 40 * tr.epoch_num, dtype=np.uint8))
        tr.monitors.put_summary(tr.sess.run(self._merged))
        meta = tf.compat.v1.RunMetadata()
        tr.monitors.put_event(tf.compat.v1.Event(
            tagged_run_metadata=TaggedRunMetadata(tag=f"meta_epoch{tr.epoch_num}",
                                                               run_metadata=meta.SerializeToString())))


def load(logdir):
    acc = ea.EventAccumulator(str(logdir), size_guidance={ea.SCALARS: 0, ea.IMAGES: 0, ea.HISTOGRAMS: 0})
    acc.Reload()
    return acc


def iterate_events(logdir):
    import tensorflow as tf

    files = sorted(glob.glob(os.path.join(str(logdir), "events.out.tfevents.*")))
    assert files, f"no event file in {logdir}"
    out = []
    for f in files:
        out.extend(tf.compat.v1.train.summary_iterator(f))
    return files, out


def test_scalars_images_histograms_graph_and_events_read_back_by_tensorboard(logdir):
    train_tiny(callbacks=[PutAll()], monitors=[trainbus.callbacks.TFEventWriter()], max_epoch=3, steps_per_epoch=2)
    acc = load(logdir)
    tags = acc.Tags()
    assert "epoch_sq" in tags["scalars"]
    assert [(e.step, e.value) for e in acc.Scalars("epoch_sq")] == [(2, 1.0), (4, 4.0), (6, 9.0)]
    assert "put_img" in tags["images"], tags["images"]
    assert "PutAll/W_image/image/0" in tags["images"]  # summary ops live under the callback's name scope
    imgs = acc.Images("put_img")
    assert [(i.step, i.width, i.height) for i in imgs] == [(2, 6, 5), (4, 6, 5), (6, 6, 5)]
    from PIL import Image
    import io

    px = np.asarray(Image.open(io.BytesIO(imgs[-1].encoded_image_string)))
    assert px.shape == (5, 6, 3) and (px == 120).all()
    assert "PutAll/W_hist" in tags["histograms"]
    hist = acc.Histograms("PutAll/W_hist")
    assert [h.step for h in hist] == [2, 4, 6]
    assert all(h.histogram_value.num == 12 for h in hist)  # W is 4x3
    assert tags["graph"] is True
    names = {n.name for n in acc.Graph().node}
    assert {"W", "b", "cost", "logits"} <= names
    assert sorted(tags["run_metadata"]) == ["meta_epoch1", "meta_epoch2", "meta_epoch3"]

    # the same through TensorFlow's own reader
    files, events = iterate_events(logdir)
    assert len(files) == 1
    scalars = [(e.step, v.simple_value) for e in events for v in e.summary.value if v.tag == "epoch_sq"]
    assert scalars == [(2, 1.0), (4, 4.0), (6, 9.0)]
    assert sum(1 for e in events if e.HasField("graph_def")) == 1
    assert [e.step for e in events for v in e.summary.value if v.tag == "PutAll/W_hist"] == [2, 4, 6]


def test_split_files_loses_no_event_with_one_step_epochs(logdir):
    class PutEpoch(Callback):
        def _trigger(self):
            self.trainer.monitors.put_scalar("epoch", float(self.trainer.epoch_num))

    writer = trainbus.callbacks.TFEventWriter(split_files=True)
    train_tiny(callbacks=[PutEpoch()], monitors=[writer], max_epoch=6, steps_per_epoch=1)
    files, events = iterate_events(logdir)
    assert len(files) >= 6 and len(set(files)) == len(files)
    got = [(e.step, v.simple_value) for e in events for v in e.summary.value if v.tag == "epoch"]
    assert got == [(s, float(s)) for s in range(1, 7)]
    # each epoch landed in its own file
    per_file = []
    import tensorflow as tf

    for f in files:
        per_file.append([v.simple_value for e in tf.compat.v1.train.summary_iterator(f) for v in e.summary.value
                         if v.tag == "epoch"])
    assert [x for x in per_file if x] == [[float(s)] for s in range(1, 7)]
    acc = load(logdir)
    assert [(e.step, e.value) for e in acc.Scalars("epoch")] == [(s, float(s)) for s in range(1, 7)]
    assert acc.Tags()["graph"] is True


def test_explicit_logdir_without_logger_dir(tmp_path):
    class PutOne(Callback):
        def _trigger(self):
            self.trainer.monitors.put_scalar("x", 7.0)

    target = tmp_path / "tb"
    writer = trainbus.callbacks.TFEventWriter(logdir=str(target), max_queue=1, flush_secs=1)
    assert writer.enabled and writer.logdir == str(target)
    train_tiny(callbacks=[PutOne()], monitors=[writer], max_epoch=2, steps_per_epoch=1)
    assert [(e.step, e.value) for e in load(target).Scalars("x")] == [(1, 7.0), (2, 7.0)]


def test_without_any_logdir_it_is_ignored(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    writer = trainbus.callbacks.TFEventWriter()
    assert not writer.enabled
    assert writer.hooks_used() == frozenset({"setup_graph"})
    tr = train_tiny(monitors=[writer], max_epoch=1, steps_per_epoch=1)
    assert tr.global_step == 1
    assert list(tmp_path.iterdir()) == []


def test_bad_arguments_are_rejected_at_construction(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        trainbus.callbacks.TFEventWriter(logdir=str(f))
    with pytest.raises(ValueError, match="max_queue"):
        trainbus.callbacks.TFEventWriter(logdir=str(tmp_path), max_queue=0)
    with pytest.raises(ValueError, match="flush_secs"):
        trainbus.callbacks.TFEventWriter(logdir=str(tmp_path), flush_secs=-1)


def test_conformance():
    from trainbus.testing import check_distribution

    check_distribution("trainbus-monitor-tfevents")


def test_a_resumed_run_marks_its_restart_and_tensorboard_shows_one_curve(logdir):
    """Run 1 writes steps 1..4 but its last checkpoint is step 2 (as after a crash); run 2
    restores step 2 and writes 3..4 again. The second file starts with a START marker at
    step 3, and TensorBoard reads each step once, with run 2's values; run 1's file has no
    marker (it started from step 0)."""
    import tensorflow as tf

    from trainbus.callbacks import ModelSaver, PeriodicTrigger
    from trainbus.tfutils.sessinit import SaverRestore
    from tensorflow.core.util.event_pb2 import SessionLog

    class PutRun(Callback):
        def __init__(self, run):
            self.run = run

        def _trigger(self):
            self.trainer.monitors.put_scalar("val", 10.0 * self.run + self.trainer.global_step)

    saver = ModelSaver(max_to_keep=0)
    train_tiny(callbacks=[PeriodicTrigger(saver, every_k_epochs=2), PutRun(1)],
               monitors=[trainbus.callbacks.TFEventWriter()], max_epoch=4, steps_per_epoch=1)
    ckpt2 = str(logdir / "model-2")
    train_tiny(callbacks=[PutRun(2)], monitors=[trainbus.callbacks.TFEventWriter()], max_epoch=4,
               steps_per_epoch=1, starting_epoch=3, session_init=SaverRestore(ckpt2))
    files = sorted(glob.glob(os.path.join(str(logdir), "events.out.tfevents.*")))
    assert len(files) == 2
    marks = [[(e.step, e.session_log.msg) for e in tf.compat.v1.train.summary_iterator(f)
              if e.HasField("session_log") and e.session_log.status == SessionLog.START] for f in files]
    assert marks == [[], [(3, "resumed after global_step 2")]]
    acc = load(logdir)
    assert [(e.step, e.value) for e in acc.Scalars("val")] == [(1, 11.0), (2, 12.0), (3, 23.0), (4, 24.0)]


def test_the_whole_finalized_graph_is_written_off_the_training_thread_once_the_first_step_is_prepared(
        logdir, monkeypatch):
    """The graph is written in a thread of its own, started when the first step is prepared and
    about to run (not before: it would hold the graph's lock while the step is prepared), the
    graph finalized: every op the callbacks, the trainer and the session initializer made."""
    import threading

    import tensorflow as tf

    from trainbus.session import fastrun

    seen = []
    made = []  # the step callables made so far (the first step's is made just before it runs)
    started = []  # (thread name, callables made when it was started)
    original = tf.compat.v1.summary.FileWriter.add_graph
    make, start = fastrun.make_step_callable, threading.Thread.start

    def add_graph(self, graph, *a, **k):
        seen.append((threading.current_thread().name, graph.finalized, len(graph.get_operations())))
        return original(self, graph, *a, **k)

    def counted_make(*a, **k):
        fn = make(*a, **k)
        made.append(fn)
        return fn

    def recorded_start(self):
        started.append((self.name, len(made)))
        return start(self)

    class Fetches(Callback):  # a run hook: the steps go through _make_callable
        def _before_run(self, ctx):
            return None

    monkeypatch.setattr(tf.compat.v1.summary.FileWriter, "add_graph", add_graph)
    monkeypatch.setattr(fastrun, "make_step_callable", counted_make)
    monkeypatch.setattr(threading.Thread, "start", recorded_start)
    train_tiny(callbacks=[Fetches()], monitors=[trainbus.callbacks.TFEventWriter()], max_epoch=1, steps_per_epoch=4)
    assert [s[:2] for s in seen] == [("TFEventWriter-graph", True)]
    # started once the first step's callable was made, not before
    assert [n for n, _ in started if n == "TFEventWriter-graph"] == ["TFEventWriter-graph"]
    assert dict(started)["TFEventWriter-graph"] >= 1
    nodes = load(logdir).Graph().node
    assert {"W", "cost", "global_step"} <= {n.name for n in nodes}
    assert len(nodes) == seen[0][2]


def test_the_first_step_ready_waiters_are_called_once_with_the_plain_step_too():
    """``trainer.loop.on_first_step_ready``: called once, when the first step is prepared, on the
    plain path (no run hooks) as on the hooked one; a waiter added later is called at once."""
    calls = []

    class Watch(Callback):
        def _before_train(self):
            self.trainer.loop.on_first_step_ready(lambda: calls.append(("ready", self.trainer.loop.global_step)))

        def _trigger_step(self):
            calls.append(("step", self.trainer.loop.global_step))

        def _after_train(self):
            self.trainer.loop.on_first_step_ready(lambda: calls.append(("late", self.trainer.loop.global_step)))

    tr = train_tiny(callbacks=[Watch()], monitors=[], max_epoch=1, steps_per_epoch=3)
    assert not tr.hooked_sess._hooked  # no run hooks: the plain path ran the steps
    assert calls == [("ready", 0), ("step", 1), ("step", 2), ("step", 3), ("late", 3)]


def test_a_training_that_ends_before_its_first_step_still_writes_the_graph(logdir, monkeypatch):
    import threading

    import tensorflow as tf

    seen = []
    original = tf.compat.v1.summary.FileWriter.add_graph

    def add_graph(self, graph, *a, **k):
        seen.append(threading.current_thread().name)
        return original(self, graph, *a, **k)

    class StopAtOnce(Callback):
        def _before_epoch(self):
            raise StopTraining("stopped before the first step")

    monkeypatch.setattr(tf.compat.v1.summary.FileWriter, "add_graph", add_graph)
    train_tiny(callbacks=[StopAtOnce()], monitors=[trainbus.callbacks.TFEventWriter()], max_epoch=1, steps_per_epoch=3)
    assert seen == [threading.main_thread().name]  # written as the training ended, no step having run
    assert {"W", "cost", "global_step"} <= {n.name for n in load(logdir).Graph().node}


def test_a_graph_that_cannot_be_written_is_a_warning_and_training_goes_on(logdir, monkeypatch, caplog):
    import tensorflow as tf

    def add_graph(self, graph, *a, **k):
        raise ValueError("graph too large for this test")

    monkeypatch.setattr(tf.compat.v1.summary.FileWriter, "add_graph", add_graph)
    train_tiny(callbacks=[PutAll()], monitors=[trainbus.callbacks.TFEventWriter()], max_epoch=2, steps_per_epoch=2)
    warnings = [r.getMessage() for r in caplog.records if "writing the graph" in r.getMessage()]
    assert len(warnings) == 1 and "ValueError: graph too large for this test" in warnings[0]
    assert str(logdir) in warnings[0]
    acc = load(logdir)
    assert acc.Tags()["graph"] is False
    assert [(e.step, e.value) for e in acc.Scalars("epoch_sq")] == [(2, 1.0), (4, 4.0)]
