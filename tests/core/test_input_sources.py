"""Input sources: the signature's placeholders exist by name under every source; TensorInput
with a tf.train queue pipeline (PTB style) trains, starts and stops its queue runners;
BatchQueueInput, remap_input_source, and the errors of bad input."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import trainbus
from trainbus.callbacks import Callback, InferenceRunner, ModelSaver, ScalarStats
from trainbus.dataflow import DataFromList
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
from trainbus.testing import TinyModel, tiny_dataflow
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
        "BatchQueueInput": lambda: BatchQueueInput(DataFromList([[x, y] for x, y in zip(xs, ys)], shuffle=False), 4),
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


def test_offline_predictor_of_the_trained_model_feeds_x_by_name(logdir):
    trainer = SimpleTrainer()
    launch_train_with_config(TrainConfig(model=TinyModel(), data=QueueInput(tiny_dataflow()), max_epoch=1,
                                         steps_per_epoch=4, callbacks=[ModelSaver()], extra_callbacks=[],
                                         monitors=[]), trainer)
    ckpt = tf.train.latest_checkpoint(str(logdir))
    reader = tf.train.load_checkpoint(ckpt)
    w, b = reader.get_tensor("W"), reader.get_tensor("b")
    assert not np.allclose(w, 0)
    pred = trainbus.OfflinePredictor(trainbus.PredictConfig(
        model=TinyModel(), session_init=trainbus.tfutils.sessinit.SmartInit(ckpt), input_names=["x"],
        output_names=["logits"]))
    assert [t.name for t in pred.input_tensors] == ["x:0"]
    xs = np.random.RandomState(3).rand(5, 4).astype("float32")
    np.testing.assert_allclose(pred(xs)[0], xs @ w + b, rtol=1e-5, atol=1e-6)


# --- TensorInput with a tf.train queue pipeline, as the PTB language model reads its data ---

BATCH, SEQ, VOCAB = 4, 5, 16


def ptb_like_producer(raw, name):
    """Cut ``raw`` (a token stream) into ``BATCH`` rows and step through them ``SEQ`` tokens
    at a time; the step index comes from a ``range_input_producer`` queue."""
    with tf1.name_scope(name):
        data = tf.convert_to_tensor(raw, dtype=tf.int32)
        batch_len = len(raw) // BATCH
        data = tf.reshape(data[: BATCH * batch_len], [BATCH, batch_len])
        epoch_size = (batch_len - 1) // SEQ
        i = tf1.train.range_input_producer(epoch_size, shuffle=False).dequeue()
        x = tf.strided_slice(data, [0, i * SEQ], [BATCH, (i + 1) * SEQ])
        y = tf.strided_slice(data, [0, i * SEQ + 1], [BATCH, (i + 1) * SEQ + 1])
        x.set_shape([BATCH, SEQ])
        y.set_shape([BATCH, SEQ])
        return [x, y]


class NextTokenModel(trainbus.ModelDesc):
    def inputs(self):
        return [tf.TensorSpec([None, SEQ], tf.int32, "input"), tf.TensorSpec([None, SEQ], tf.int32, "nextinput")]

    def build_graph(self, x, y):
        emb = tf1.get_variable("emb", [VOCAB, 8], initializer=tf1.random_uniform_initializer(-0.1, 0.1, seed=1))
        w = tf1.get_variable("W", [8, VOCAB], initializer=tf1.zeros_initializer())
        logits = tf.matmul(tf.reshape(tf.nn.embedding_lookup(emb, x), [-1, 8]), w)
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.reshape(y, [-1]), logits=logits), name="cost")

    def optimizer(self):
        return tf1.train.GradientDescentOptimizer(0.5)


class RecordFirstTokens(Callback):
    def _setup_graph(self):
        self._x = self.trainer.towers.training()[0].get_tensor("input")

    def _before_train(self):
        self.tokens = []

    def _before_run(self, ctx):
        return [self._x]

    def _after_run(self, ctx, values):
        self.tokens.append(int(values.results[0][0, 0]))


def test_tensor_input_trains_from_a_tf_train_queue_and_stops_its_runners(logdir):
    raw_train = np.arange(4 * 21) % VOCAB           # 21 tokens per row: 4 steps of 5 per epoch
    raw_val = (np.arange(4 * 11) * 3) % VOCAB
    train_in = TensorInput(lambda: ptb_like_producer(raw_train, "train_data"), size=4)
    val_in = TensorInput(lambda: ptb_like_producer(raw_val, "val_data"), size=2)
    rec = RecordFirstTokens()
    trainer = SimpleTrainer()
    launch_train_with_config(TrainConfig(model=NextTokenModel(), data=train_in, max_epoch=2, callbacks=[
        rec, InferenceRunner(val_in, [ScalarStats("cost")])], extra_callbacks=[]), trainer)

    assert trainer.global_step == 8
    assert rec.tokens == [0, 5, 10, 15] * 2          # the queue's steps in order, twice
    assert len(trainer.monitors.get_history("validation_cost")) == 2
    # each source starts only the runners its own tensors read from
    (qr_train,), (qr_val,) = train_in.queue_runners(), val_in.queue_runners()
    assert "train_data/" in qr_train.queue.queue_ref.op.name and "val_data/" in qr_val.queue.queue_ref.op.name
    assert len(trainer.graph.get_collection(tf1.GraphKeys.QUEUE_RUNNERS)) == 2
    threads = train_in.queue_runner_threads + val_in.queue_runner_threads
    assert threads and not [t for t in threads if t.is_alive()]


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
        src = BatchQueueInput(DataFromList([[x, y] for x, y in zip(xs, ys)], shuffle=False), 3)
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

    from trainbus.dataflow import BatchData, DataFromList
    from trainbus.testing import TinyModel
    from trainbus.train import SimpleTrainer, TrainConfig, launch_train_with_config

    rng = np.random.RandomState(0)
    df = BatchData(DataFromList([[rng.rand(4).astype("float32"), np.array([i % 3], "int32")] for i in range(16)],
                                shuffle=False), 4)  # labels of shape (4, 1); the model wants (None,)
    config = TrainConfig(model=TinyModel(), data=QueueInput(df), max_epoch=1, steps_per_epoch=2, callbacks=[],
                         monitors=[])
    with pytest.raises(ValueError, match=re.escape("QueueInput: component 1 ('y') of a datapoint from the dataflow "
                                                   "BatchData has shape (4, 1), but the input signature expects "
                                                   "(None,)")):
        launch_train_with_config(config, SimpleTrainer())
