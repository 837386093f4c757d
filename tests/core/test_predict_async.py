"""MultiThreadAsyncPredictor: queued datapoints are batched per worker thread; every future
resolves with its own datapoint's outputs and callbacks get the done future."""

import threading

import numpy as np
import pytest
import tensorflow as tf

from trainbus.predict import AsyncPredictorBase, MultiThreadAsyncPredictor, OnlinePredictor

tf1 = tf.compat.v1


class RecordingPredictor(OnlinePredictor):
    """An OnlinePredictor that records the batch size of each run and can be held back."""

    def __init__(self, *args, gate=None, **kw):
        super().__init__(*args, **kw)
        self.batches = []
        self.gate = gate
        self.entered = threading.Event()

    def _do_call(self, dp):
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(10)
        self.batches.append(len(dp[0]))
        return super()._do_call(dp)


@pytest.fixture()
def graph_sess():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 2], name="x")
        s = tf.reduce_sum(x, axis=1, name="s")
        sq = tf.square(x, name="sq")
        sess = tf1.Session(graph=g)
        yield g, sess, x, s, sq
        sess.close()


def test_futures_resolve_with_each_datapoints_outputs_in_batches(graph_sess):
    g, sess, x, s, sq = graph_sess
    gate = threading.Event()
    p = RecordingPredictor([x], [s, sq], sess=sess, gate=gate)
    ap = MultiThreadAsyncPredictor([p], batch_size=3)
    assert isinstance(ap, AsyncPredictorBase)
    ap.start()
    order = []
    done = threading.Event()

    def cb(fut):
        order.append(int(fut.result()[0]))
        if len(order) == 7:
            done.set()

    # the first task is taken alone (the worker does not wait for more); it then waits at the gate
    first = ap.put_task([np.array([0.0, 0.0], "float32")], cb)
    assert p.entered.wait(10)          # the worker has taken it
    futures = [first] + [ap.put_task([np.array([i, i], "float32")], cb) for i in range(1, 7)]
    gate.set()
    assert done.wait(10)
    for i, f in enumerate(futures):
        total, square = f.result(timeout=5)
        assert total == 2 * i
        np.testing.assert_allclose(square, [i * i, i * i])
    assert p.batches == [1, 3, 3]      # batched up to batch_size, in queue order
    assert order == [0, 2, 4, 6, 8, 10, 12]   # callbacks ran in the order the tasks were queued
    # the blocking call interface goes through put_task too
    out = ap(np.array([1.0, 2.0], "float32"))
    assert out[0] == 3.0
    ap.stop()
    assert not any(t.is_alive() for t in ap.threads)


def test_several_threads_and_default_session(graph_sess):
    g, sess, x, s, sq = graph_sess
    preds = [OnlinePredictor([x], [s]) for _ in range(3)]   # no session: the default one at start()
    ap = MultiThreadAsyncPredictor(preds, batch_size=4)
    with pytest.raises(RuntimeError, match="default session"):
        ap.start()
    with sess.as_default():
        ap.start()
    futures = [ap.put_task([np.full(2, i, "float32")]) for i in range(40)]
    assert [f.result(timeout=10)[0] for f in futures] == [2.0 * i for i in range(40)]
    assert all(p.sess is sess for p in preds if p.sess is not None)
    ap.stop()
    assert not any(t.is_alive() for t in ap.threads)


def test_errors_reach_the_futures_and_bad_arguments(graph_sess):
    g, sess, x, s, sq = graph_sess
    ap = MultiThreadAsyncPredictor([OnlinePredictor([x], [s], sess=sess)], batch_size=2)
    ap.start()
    bad = ap.put_task([np.ones(3, "float32")])     # wrong shape: the run fails
    with pytest.raises(ValueError):
        bad.result(timeout=10)
    good = ap.put_task([np.ones(2, "float32")])    # the worker keeps going
    assert good.result(timeout=10)[0] == 2.0
    ap.stop()
    with pytest.raises(ValueError, match="at least one predictor"):
        MultiThreadAsyncPredictor([])
    with pytest.raises(ValueError, match="return_input"):
        MultiThreadAsyncPredictor([OnlinePredictor([x], [s], return_input=True, sess=sess)])
    with pytest.raises(TypeError, match="OnlinePredictor"):
        MultiThreadAsyncPredictor([lambda v: v])
    with pytest.raises(ValueError, match="batch_size"):
        MultiThreadAsyncPredictor([OnlinePredictor([x], [s], sess=sess)], batch_size=0)
