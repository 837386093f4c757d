"""Input sources: the signature's placeholders exist by name under every source; TensorInput
with a tf.train queue pipeline (PTB style) trains, starts and stops its queue runners;
BatchQueueInput, remap_input_source, and the errors of bad input."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from trainbus.callbacks import Callback
from trainbus.input_source import (
    BatchQueueInput,
    DummyConstantInput,
    FeedfreeInput,
    FeedInput,
    InputSource,
    PlaceholderInput,
    QueueInput,
    StagingInput,
    TensorInput,
    TFDatasetInput,
    build_or_reuse_placeholder,
    remap_input_source,
)
from trainbus.testing import TinyModel, points_dataflow, tiny_dataflow
from trainbus.train import SimpleTrainer, TrainConfig, launch_train_with_config

tf1 = tf.compat.v1


def tiny_arrays(n=32):
    xs, ys = [], []
    for x, y in tiny_dataflow(n=n, batch=1):
        xs.append(x[0])
        ys.append(y[0])
    return np.stack(xs), np.stack(ys)


def make_sources():
    xs, ys = tiny_arrays()
    return {
        "FeedInput": lambda: FeedInput(tiny_dataflow()),
        "QueueInput": lambda: QueueInput(tiny_dataflow()),
        "StagingInput": lambda: StagingInput(QueueInput(tiny_dataflow())),
        "TFDatasetInput": lambda: TFDatasetInput(
            lambda: tf.data.Dataset.from_tensor_slices((xs, ys)).batch(4).repeat()),
        "DummyConstantInput": lambda: DummyConstantInput([[4, 4], [4]]),
        "TensorInput": lambda: TensorInput(lambda: [tf.ones([4, 4]), tf.zeros([4], tf.int32)], size=8),
        "BatchQueueInput": lambda: BatchQueueInput(points_dataflow([[x, y] for x, y in zip(xs, ys)]), 4),
    }


class FeedByName(Callback):
    """After training, feeds and fetches the signature placeholders by name."""

    def _after_train(self):
        arr = np.arange(8, dtype="float32").reshape(2, 4)
        self.x_back = self.trainer.sess.run("x:0", feed_dict={"x:0": arr})
        self.y_back = self.trainer.sess.run("y:0", feed_dict={"y:0": np.array([2, 1], "int32")})


@pytest.mark.parametrize("kind", list(make_sources()))
def test_signature_placeholders_exist_by_name_under_every_source(logdir, kind):
    src = make_sources()[kind]()
    cb = FeedByName()
    trainer = SimpleTrainer()
    launch_train_with_config(TrainConfig(model=TinyModel(), data=src, max_epoch=1, steps_per_epoch=2, callbacks=[cb],
                                         extra_callbacks=[], monitors=[]), trainer)
    g = trainer.graph
    x, y = g.get_tensor_by_name("x:0"), g.get_tensor_by_name("y:0")
    assert (x.op.type, x.dtype, x.shape.as_list()) == ("Placeholder", tf.float32, [None, 4])
    assert (y.op.type, y.dtype, y.shape.as_list()) == ("Placeholder", tf.int32, [None])
    assert src.input_placeholders == [x, y]
    np.testing.assert_array_equal(cb.x_back, np.arange(8, dtype="float32").reshape(2, 4))
    np.testing.assert_array_equal(cb.y_back, [2, 1])
    tower_inputs = trainer.towers.training()[0].inputs
    if kind == "FeedInput":
        assert tower_inputs == [x, y]          # the model reads the placeholders themselves
    else:
        assert x not in tower_inputs           # the model reads the queue/dataset/tensors
        assert isinstance(src, FeedfreeInput)
    assert trainer.global_step == 2


def test_tensor_input_starts_runners_of_queues_feeding_queues():
    with tf.Graph().as_default() as g:
        q1 = tf1.FIFOQueue(4, [tf.float32], shapes=[[]])
        tf1.train.add_queue_runner(tf1.train.QueueRunner(q1, [q1.enqueue([tf.constant(1.0)])]))
        q2 = tf1.FIFOQueue(4, [tf.float32], shapes=[[]])
        qr2 = tf1.train.QueueRunner(q2, [q2.enqueue([q1.dequeue() * 2])])
        tf1.train.add_queue_runner(qr2)
        unrelated = tf1.FIFOQueue(4, [tf.float32], shapes=[[]])
        tf1.train.add_queue_runner(tf1.train.QueueRunner(unrelated, [unrelated.enqueue([tf.constant(7.0)])]))
        src = TensorInput(lambda: [q2.dequeue()])
        src.setup([tf.TensorSpec([], tf.float32, "v")])
        (t,) = src.get_input_tensors()
        runners = src.queue_runners()
        assert len(runners) == 2 and runners[0] is qr2
        assert unrelated not in [r.queue for r in runners]
        with tf1.Session(graph=g) as sess:
            coord, threads = src._start_queue_runners(sess)
            assert [sess.run(t) for _ in range(3)] == [2.0, 2.0, 2.0]
            src._stop_queue_runners(coord, threads)
            assert not [th for th in threads if th.is_alive()]


def test_tensor_input_errors():
    with pytest.raises(TypeError, match="needs a function"):
        TensorInput([tf.constant(1)])
    with pytest.raises(ValueError, match="positive number of steps"):
        TensorInput(lambda: [], size=0)
    with pytest.raises(ValueError, match="created without size="):
        TensorInput(lambda: []).size()
    assert TensorInput(lambda: [], size=7).size() == 7
    spec = [tf.TensorSpec([None, 2], tf.float32, "a"), tf.TensorSpec([None], tf.int32, "b")]
    cases = [(lambda: tf.zeros([1, 2]), TypeError, "must return a list"),
             (lambda: [tf.zeros([1, 2])], ValueError, "returned 1 tensors but the model has 2 inputs"),
             (lambda: [tf.zeros([1, 2]), tf.zeros([1])], ValueError, "'b' wants int32"),
             (lambda: [tf.zeros([1, 3]), tf.zeros([1], tf.int32)], ValueError, "'a' wants shape")]
    for fn, err, match in cases:
        with tf.Graph().as_default():
            src = TensorInput(fn)
            src.setup(spec)
            with pytest.raises(err, match=match):
                src.get_input_tensors()


def test_build_or_reuse_placeholder():
    with tf.Graph().as_default() as g:
        spec = tf.TensorSpec([None, 3], tf.float32, "x")
        with tf1.name_scope("somewhere"):
            p = build_or_reuse_placeholder(spec)
        assert p.name == "x:0"
        assert build_or_reuse_placeholder(spec) is p
        narrower = build_or_reuse_placeholder(tf.TensorSpec([2, 3], tf.float32, "x"))
        assert narrower is not p and narrower.shape.as_list() == [2, 3]
        with pytest.raises(ValueError, match="incompatible with the input signature"):
            build_or_reuse_placeholder(tf.TensorSpec([None, 3], tf.int32, "x"))
        tf.constant(1.0, name="c")
        with pytest.raises(ValueError, match="of type Const"):
            build_or_reuse_placeholder(tf.TensorSpec([], tf.float32, "c"))
        assert [op.name for op in g.get_operations() if op.type == "Placeholder"] == ["x", "x_1"]


def test_batch_queue_input_dequeues_batches_of_single_datapoints():
    xs, ys = tiny_arrays(12)
    with tf.Graph().as_default() as g:
        src = BatchQueueInput(points_dataflow([[x, y] for x, y in zip(xs, ys)]), 3)
        assert src.size() == 4
        src.setup([tf.TensorSpec([None, 4], tf.float32, "x"), tf.TensorSpec([None], tf.int32, "y")])
        bx, by = src.get_input_tensors()
        assert bx.shape.as_list() == [3, 4] and by.shape.as_list() == [3]
        assert g.get_tensor_by_name("x-nobatch:0").shape.as_list() == [4]
        with tf1.Session(graph=g) as sess:
            src._start(sess)
            got = sess.run([bx, by])
            src._stop()
        np.testing.assert_array_equal(got[0], xs[:3])
        np.testing.assert_array_equal(got[1], ys[:3])
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="fully-defined other dimensions"):
            BatchQueueInput(tiny_dataflow(), 2).setup([tf.TensorSpec([None, None], tf.float32, "x")])
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        BatchQueueInput(tiny_dataflow(), 0)


def test_remap_input_source_feeds_some_inputs_and_leaves_the_others_placeholders(logdir):
    class ThreeInputs(TinyModel):
        def inputs(self):
            return super().inputs() + [tf.TensorSpec([None], tf.float32, "weight")]

        def build_graph(self, x, y, weight):
            self.got = (x, y, weight)
            return super().build_graph(x, y)

    model = ThreeInputs()
    src = remap_input_source(FeedInput(tiny_dataflow()), ["x", "y"])
    assert isinstance(src, InputSource) and "Remapped" in str(src)
    trainer = SimpleTrainer()
    launch_train_with_config(TrainConfig(model=model, data=src, max_epoch=1, steps_per_epoch=3, extra_callbacks=[],
                                         monitors=[]), trainer)
    assert [t.name for t in model.got] == ["x:0", "y:0", "weight:0"]
    assert trainer.global_step == 3
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=r"\['z'\] are not inputs of the model"):
            remap_input_source(PlaceholderInput(), ["x", "z"]).setup([tf.TensorSpec([None], tf.float32, "x")])


def test_zmq_input_trains_from_a_sender_process(logdir, tmp_path):
    import subprocess
    import sys

    from trainbus.input_source import ZMQInput

    addr = f"ipc://{tmp_path}/train-pipe"
    sender = subprocess.Popen([sys.executable, "-c", (
        "from trainbus_dataflow.remote import send_dataflow_zmq\n"
        "from trainbus.testing import tiny_dataflow\n"
        f"send_dataflow_zmq(tiny_dataflow(), {addr!r}, max_datapoints=24)\n")])
    try:
        src = ZMQInput(addr, hwm=10)
        with pytest.raises(ValueError, match="no size"):
            src.size()

        class FirstBatch(Callback):
            def _setup_graph(self):
                self._x = self.trainer.towers.training()[0]["x"]
                self.xs = []

            def _before_run(self, ctx):
                return [self._x]

            def _after_run(self, ctx, values):
                self.xs.append(values.results[0])

        rec = FirstBatch()
        trainer = SimpleTrainer()
        launch_train_with_config(TrainConfig(model=TinyModel(), data=src, max_epoch=2, steps_per_epoch=3,
                                             callbacks=[rec], extra_callbacks=[], monitors=[]), trainer)
        assert sender.wait(timeout=60) == 0
    finally:
        sender.kill()
    batches = [b[0] for b in tiny_dataflow()]
    assert len(rec.xs) == 6
    for got, want in zip(rec.xs, batches):
        np.testing.assert_array_equal(got, want)
    assert trainer.graph.get_tensor_by_name("x:0").op.type == "Placeholder"
    assert src.failure() is None and not src.thread.is_alive()
    with pytest.raises(ValueError, match="must be a ZMQ endpoint"):
        ZMQInput("localhost:5555", 10)


def test_zmq_input_to_dataset_reads_serialized_datapoints(tmp_path):
    import threading

    import zmq

    from trainbus.input_source import ZMQInput
    from trainbus.utils.serialize import dumps

    addr = f"ipc://{tmp_path}/ds-pipe"
    sent = [[np.full([2], i, "float32"), np.int32(i)] for i in range(3)]

    def send():
        ctx = zmq.Context()
        s = ctx.socket(zmq.PUSH)
        s.connect(addr)
        for dp in sent:
            s.send(dumps(dp))
        s.close(linger=-1)
        ctx.term()

    with tf.Graph().as_default():
        ds = ZMQInput(addr, hwm=5).to_dataset([tf.TensorSpec([2], tf.float32, "v"), tf.TensorSpec([], tf.int32, "i")])
        nxt = tf1.data.make_one_shot_iterator(ds.take(3)).get_next()
        th = threading.Thread(target=send, daemon=True)
        th.start()
        with tf1.Session() as sess:
            got = [sess.run(nxt) for _ in range(3)]
        th.join(timeout=10)
    assert [int(i) for _, i in got] == [0, 1, 2]
    np.testing.assert_array_equal(got[2][0], [2.0, 2.0])


def test_queue_input_names_the_component_whose_shape_does_not_match():
    """A datapoint of the wrong shape names the input source, the dataflow, the component and
    what the signature expects (instead of TensorFlow's bare 'Cannot feed value' from a thread)."""
    import re

    import pytest

    from trainbus.testing import TinyModel, batch_dataflow
    from trainbus.train import SimpleTrainer, TrainConfig, launch_train_with_config

    rng = np.random.RandomState(0)
    df = batch_dataflow([rng.rand(16, 4).astype("float32"), (np.arange(16) % 3).astype("int32")[:, None]], 4)
    # labels of shape (4, 1); the model wants (None,)
    config = TrainConfig(model=TinyModel(), data=QueueInput(df), max_epoch=1, steps_per_epoch=2, callbacks=[],
                         extra_callbacks=[], monitors=[])
    with pytest.raises(ValueError, match=re.escape("QueueInput: component 1 ('y') of a datapoint from the dataflow "
                                                   "Batches has shape (4, 1), but the input signature expects "
                                                   "(None,)")):
        launch_train_with_config(config, SimpleTrainer())


def _enqueue_thread_requests(monkeypatch):
    """The Session.run calls the QueueInput's enqueue thread makes, by what they fetch."""
    import threading

    calls = []
    real = tf.compat.v1.Session.run

    def run(self, fetches, *a, **k):
        if threading.current_thread().name == "QueueInput-EnqueueThread":
            calls.append(getattr(fetches, "name", repr(fetches)))
        return real(self, fetches, *a, **k)

    monkeypatch.setattr(tf.compat.v1.Session, "run", run)
    return calls


def test_queue_input_enqueues_through_a_callable_not_session_run(monkeypatch):
    """Each enqueue is a call of a TensorFlow callable (Session.make_callable with feeds would be
    a whole Session.run per datapoint): the thread's only Session.run may be the queue's close."""
    from trainbus.testing import train_tiny

    calls = _enqueue_thread_requests(monkeypatch)
    trainer = train_tiny(max_epoch=2, steps_per_epoch=4, feed=False)
    assert trainer.global_step == 8
    assert set(calls) <= {"QueueInput/input_queue_Close"}  # closing the queue at the end, if it ran it


def test_queue_input_enqueues_with_session_run_where_no_callable_can_be_made(monkeypatch):
    from trainbus.session import fastrun
    from trainbus.testing import train_tiny

    monkeypatch.setattr(fastrun, "make_plain_step", lambda *a, **k: None)
    calls = _enqueue_thread_requests(monkeypatch)
    trainer = train_tiny(max_epoch=2, steps_per_epoch=4, feed=False)
    assert trainer.global_step == 8
    assert calls.count("QueueInput/input_queue_enqueue") >= 8
