"""The supporting modules the API needs: dataflow, input sources, towers, predictors, logger,
session creators, ModelDesc, and graph mode with or without eager execution."""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf
import zygote  # tests/_support

from trainbus.callbacks import Callback
from trainbus.input_source import DummyConstantInput, FeedInput, QueueInput, StagingInput, TFDatasetInput
from trainbus.testing import TinyModel, generator_dataflow, tiny_dataflow, train_tiny
from trainbus.utils import logger

tf1 = tf.compat.v1


def _var(name):
    return [v for v in tf1.global_variables() if v.op.name == name][0]


class DuckFlow:
    """Not a DataFlow subclass: anything with __iter__/__len__/reset_state works."""

    def __init__(self):
        self.inner = tiny_dataflow()

    def __iter__(self):
        return iter(self.inner)

    def __len__(self):
        return len(self.inner)

    def reset_state(self):
        self.inner.reset_state()


def _weights_after(inp_factory, steps=8):
    from trainbus.train import SimpleTrainer, TrainConfig, launch_train_with_config

    class Grab(Callback):
        def _after_train(self):
            self.w = self.trainer.sess.run(tf1.trainable_variables())

    g = Grab()
    launch_train_with_config(TrainConfig(model=TinyModel(), data=inp_factory(), callbacks=[g], extra_callbacks=[],
                                         monitors=[], max_epoch=1, steps_per_epoch=steps), SimpleTrainer())
    return g.w


def test_input_sources_train_and_agree():
    ref = _weights_after(lambda: FeedInput(tiny_dataflow()))
    for make in (lambda: QueueInput(tiny_dataflow()), lambda: StagingInput(QueueInput(tiny_dataflow())),
                 lambda: FeedInput(DuckFlow())):
        got = _weights_after(make)
        for a, b in zip(ref, got):
            np.testing.assert_allclose(a, b, rtol=1e-5)

    def dataset():
        xs, ys = zip(*[(x, y) for x, y in tiny_dataflow()])
        return tf.data.Dataset.from_tensor_slices((np.stack(xs), np.stack(ys))).repeat()

    got = _weights_after(lambda: TFDatasetInput(dataset))
    for a, b in zip(ref, got):
        np.testing.assert_allclose(a, b, rtol=1e-5)
    assert len(_weights_after(lambda: DummyConstantInput([[4, 4], [4]]), steps=2)) == 2


def test_queue_input_thread_failure_propagates():
    def broken():
        yield [np.zeros((4, 4), "float32"), np.zeros((4,), "int32")]
        raise IOError("disk on fire")

    with pytest.raises(IOError, match="disk on fire"):
        train_tiny([], dataflow=generator_dataflow(broken, size=100), feed=False, max_epoch=2, steps_per_epoch=50)


def test_dataflow_error_in_feed_input_propagates():
    def broken():
        yield [np.zeros((4, 4), "float32"), np.zeros((4,), "int32")]
        raise ValueError("bad record 2")

    with pytest.raises(ValueError, match="bad record 2"):
        train_tiny([], dataflow=generator_dataflow(broken, size=10), max_epoch=1)


def test_towers_and_get_predictor():
    out = {}

    class Pred(Callback):
        def _setup_graph(self):
            self.p = self.trainer.get_predictor(["x"], ["logits"])

        def _after_train(self):
            x = np.ones((2, 4), "float32")
            out["pred"] = self.p(x)
            w, b = self.trainer.sess.run([_var("W"), _var("b")])
            out["ref"] = x @ w + b

    tr = train_tiny([Pred()], max_epoch=1)
    np.testing.assert_allclose(out["pred"][0], out["ref"], rtol=1e-5)
    towers = tr.towers
    assert len(towers.training()) == 1 and len(towers.inference()) == 1
    assert towers.training()[0]["cost"].name == "cost:0"
    assert towers.inference()[0].get_tensor("logits").name.startswith("tower-pred-0/")
    assert [s.name for s in tr.inputs_desc] == ["x", "y"]
    with pytest.raises(RuntimeError, match="once"):
        tr.tower_func = tr.tower_func


def test_offline_predictor_and_predict_config(tmp_path):
    from trainbus.predict import OfflinePredictor, PredictConfig

    class Save(Callback):
        def _setup_graph(self):
            self.saver = tf1.train.Saver()

        def _after_train(self):
            self.w, self.b = self.trainer.sess.run([_var("W"), _var("b")])
            self.saver.save(self.trainer.sess, str(tmp_path / "m"))

    s = Save()
    train_tiny([s], max_epoch=1)

    from trainbus.tfutils.sessinit import SessionInit

    class SimpleRestore(SessionInit):
        def _setup_graph(self):
            self.saver = tf1.train.Saver()

        def _run_init(self, sess):
            self.saver.restore(sess, str(tmp_path / "m"))

    pred = OfflinePredictor(PredictConfig(model=TinyModel(), input_names=["x"], output_names=["logits"],
                                          session_init=SimpleRestore()))
    x = np.eye(4, dtype="float32")
    np.testing.assert_allclose(pred(x)[0], x @ s.w + s.b, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="output_names"):
        PredictConfig(model=TinyModel())


def test_logger_dir_actions(tmp_path):
    # set_logger_dir chooses at once; the action happens at commit_logger_dir (training start)
    d = tmp_path / "run"
    logger.set_logger_dir(str(d), action="k")
    logger.info("hello file")
    assert logger.get_logger_dir() == str(d) and not d.exists()
    assert logger.commit_logger_dir() == str(d)
    assert "hello file" in (d / "log.log").read_text()
    (d / "keep.txt").write_text("x")
    logger.set_logger_dir(str(d), action="k")
    logger.commit_logger_dir()
    assert (d / "keep.txt").exists()
    logger.set_logger_dir(str(d), action="b")
    assert (d / "keep.txt").exists() and logger.pending_logger_dir_action() == "b"
    logger.commit_logger_dir()
    backups = [p for p in tmp_path.iterdir() if p.name.startswith("run") and p.name != "run"]
    assert len(backups) == 1 and (backups[0] / "keep.txt").exists()
    (d / "new.txt").write_text("y")
    logger.set_logger_dir(str(d), action="d")
    assert (d / "new.txt").exists()
    logger.commit_logger_dir()
    assert not (d / "new.txt").exists()
    (d / "z.txt").write_text("z")
    logger.set_logger_dir(str(d), action="n")
    assert logger.get_logger_dir() != str(d) and logger.get_logger_dir().startswith(str(d))
    logger.commit_logger_dir()
    assert os.path.isfile(os.path.join(logger.get_logger_dir(), "log.log"))
    with pytest.raises(FileExistsError, match="action"):
        logger.set_logger_dir(str(d), action=None)  # stdin is not a terminal under pytest
    with pytest.raises(FileExistsError):
        logger.set_logger_dir(str(d), action="q")
    with pytest.raises(ValueError, match="one of"):
        logger.set_logger_dir(str(d), action="x")


def test_session_creators_and_helpers():
    from trainbus.tfutils import get_default_sess_config, get_global_step_value, get_global_step_var, get_tf_version_tuple
    from trainbus.tfutils.sesscreate import NewSessionCreator, ReuseSessionCreator, SessionCreatorAdapter

    assert get_tf_version_tuple() >= (2, 16)
    assert get_default_sess_config().allow_soft_placement
    with tf.Graph().as_default():
        v = tf1.get_variable("v", initializer=3.0)
        gs = get_global_step_var()
        assert gs is get_global_step_var() and gs.op.name == "global_step"
        sess = NewSessionCreator().create_session()
        assert sess.run(v) == 3.0
        assert ReuseSessionCreator(sess).create_session() is sess
        wrapped = SessionCreatorAdapter(ReuseSessionCreator(sess), lambda s: ("wrapped", s)).create_session()
        assert wrapped == ("wrapped", sess)
        with sess.as_default():
            assert get_global_step_value() == 0


def test_model_desc_errors():
    from trainbus.train import ModelDesc

    class NoInputs(ModelDesc):
        pass

    with pytest.raises(TypeError, match="inputs"):
        NoInputs().get_input_signature()

    class BadOpt(TinyModel):
        def optimizer(self):
            return "sgd"

    with pytest.raises(TypeError, match="Optimizer"):
        train_tiny([], model=BadOpt())


def test_train_config_validation():
    from trainbus.train import TrainConfig

    with pytest.raises(TypeError, match="unknown"):
        TrainConfig(model=TinyModel(), dataflow=tiny_dataflow(), nonsense=1, extra_callbacks=[], monitors=[])
    with pytest.raises(ValueError, match="max_epoch"):
        TrainConfig(model=TinyModel(), dataflow=tiny_dataflow(), starting_epoch=5, max_epoch=2, extra_callbacks=[], monitors=[])
    with pytest.raises(TypeError, match="SessionInit"):
        TrainConfig(model=TinyModel(), dataflow=tiny_dataflow(), session_init="ckpt", extra_callbacks=[], monitors=[])
    cfg = TrainConfig(model=TinyModel(), dataflow=tiny_dataflow(), extra_callbacks=[], monitors=[])
    assert cfg.steps_per_epoch == len(tiny_dataflow())


GRAPH_MODE = """
import tensorflow as tf
{disable}
from trainbus.testing import train_tiny
tr = train_tiny([], max_epoch=1)
print('steps', tr.global_step, 'eager_now', tf.executing_eagerly())
"""


@pytest.mark.parametrize("disable", ["", "tf.compat.v1.disable_eager_execution()"])
def test_trainers_run_in_graph_mode_with_or_without_eager(disable):
    # forked from the worker's zygote (tests/_support/zygote.py): graph mode switched on in a process of its own
    out = zygote.run([sys.executable, "-c", GRAPH_MODE.format(disable=disable)], timeout=120,
                     env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "steps 8" in out.stdout
