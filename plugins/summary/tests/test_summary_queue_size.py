"""QueueInput records the statistic ``QueueInput/queue_size``, as tensorpack does: a moving
average (decay 0.5) of the queue's size, updated at every step and written with the other
summaries at the end of each epoch (by this distribution's ``MergeAllSummaries``). Sources
without a queue of their own record none."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import tensorflow as tf

from trainbus.callbacks import Callback, MergeAllSummaries
from trainbus.dataflow import DataFlow
from trainbus.input_source import FeedInput, QueueInput, StagingInput, ZMQInput
from trainbus.testing import RecordingMonitor, TinyModel, tiny_dataflow
from trainbus.train import SimpleTrainer, TrainConfig, launch_train_with_config

tf1 = tf.compat.v1
STEPS = 8


def _train(src, callbacks=(), max_epoch=2):
    mon = RecordingMonitor()
    trainer = SimpleTrainer()
    # MergeAllSummaries writes the summaries at each epoch's end
    launch_train_with_config(TrainConfig(model=TinyModel(), data=src, max_epoch=max_epoch, steps_per_epoch=STEPS,
                                         callbacks=list(callbacks), extra_callbacks=[MergeAllSummaries()],
                                         monitors=[mon]), trainer)
    return trainer, mon


def _queue_stats(mon):
    return [(v, step) for name, v, step in mon.scalars if name == "QueueInput/queue_size"]


class EmaEachStep(Callback):
    """The state of the moving average after every step (a variable of no collection: checkpoints
    do not depend on the input source)."""

    def _setup_graph(self):
        op = self.graph.get_operation_by_name("QueueInput/queue_size_biased")
        # a resource variable's handle is read by its Read op; a ref variable's output is its value
        read = [c for c in op.outputs[0].consumers() if c.type == "ReadVariableOp"]
        self._ema = read[0].outputs[0] if read else op.outputs[0]
        self.values = []

    def _trigger_step(self):
        self.values.append(float(self.trainer.sess.run(self._ema)))


class RefillAfterEachStep(Callback):
    """Waits after each step until the input thread has refilled the queue (capacity 50): the
    queue is full at every step however loaded the machine is."""

    def __init__(self, src):
        self.src = src

    def _setup_graph(self):
        self._size = self.src.queue.size()

    def _trigger_step(self):
        import time

        deadline = time.monotonic() + 60
        while self.trainer.sess.run(self._size) < 50:
            assert time.monotonic() < deadline, "the input thread did not refill the queue"


@pytest.mark.parametrize("wrap", [False, True], ids=["QueueInput", "StagingInput"])
def test_queue_input_records_the_moving_average_of_its_size_each_epoch(logdir, wrap):
    src = QueueInput(tiny_dataflow())
    ema = EmaEachStep()
    trainer, mon = _train(StagingInput(src) if wrap else src, callbacks=[ema, RefillAfterEachStep(src)])
    stats = _queue_stats(mon)
    assert [step for _, step in stats] == [STEPS, 2 * STEPS]
    # the queue (capacity 50) is full before every step: the average is close to 50
    assert all(0 < v <= 50 for v, _ in stats)
    assert stats[-1][0] > 20
    assert trainer.monitors.get_history("QueueInput/queue_size") == [(s, v) for v, s in stats]
    # updated at every step, not only when the summary is written
    assert len(ema.values) == 2 * STEPS and len(set(ema.values)) > 2
    # nothing is added to what a checkpoint saves
    assert not [v.op.name for v in trainer.graph.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES)
                if "queue_size" in v.op.name]


class Slow(DataFlow):
    """A dataflow slower than the model: each datapoint waits for the step before it."""

    def __init__(self):
        self.df = tiny_dataflow()
        self.go = threading.Semaphore(1)
        self.src = None

    def __len__(self):
        return len(self.df)

    def __iter__(self):
        for dp in self.df:
            while not self.go.acquire(timeout=0.05):
                if self.src.thread.stopped():   # training ended: let the enqueue thread finish
                    return
            yield dp


class Release(Callback):
    def __init__(self, df):
        self.df = df

    def _trigger_step(self):
        self.df.go.release()


def test_an_empty_queue_shows_as_a_small_size(logdir):
    """A dataflow that produces one datapoint per step keeps the queue near empty."""
    df = Slow()
    df.src = QueueInput(df)
    trainer, mon = _train(df.src, callbacks=[Release(df)])
    stats = _queue_stats(mon)
    assert len(stats) == 2 and all(v < 2.0 for v, _ in stats)


def test_sources_without_their_own_queue_record_no_queue_size(logdir, tmp_path):
    trainer, mon = _train(FeedInput(tiny_dataflow()))
    assert _queue_stats(mon) == [] and mon.scalars   # other statistics are written
    # ZMQInput reads through a queue too, but like tensorpack's it records no queue_size
    with tf.Graph().as_default():
        cbs = ZMQInput(f"ipc://{tmp_path}/pipe", hwm=4).setup(TinyModel().inputs())
    assert [str(cb) for cb in cbs] == ["QueueInputCallback"]
    assert not np.isnan(mon.scalars[0][1])


def test_the_queue_closes_cleanly_at_the_end_no_cancelled_enqueue_is_logged(tmp_path):
    """TensorFlow logs "Local rendezvous is aborting with status: CANCELLED" for each enqueue a
    close cancels; at the end of training the queue makes room for the blocked enqueue first."""
    import subprocess
    import sys

    script = ("from trainbus.testing import train_tiny\n"
              "train_tiny(max_epoch=2, steps_per_epoch=3, feed=False)\n"
              "print('TRAINED')\n")
    env = {**__import__("os").environ, "TF_CPP_MIN_LOG_LEVEL": "0"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env,
                          cwd=str(tmp_path))
    assert proc.returncode == 0 and "TRAINED" in proc.stdout, proc.stderr[-3000:]
    assert "Local rendezvous" not in proc.stderr and "CANCELLED" not in proc.stderr, proc.stderr[-3000:]
