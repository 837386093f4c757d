"""trainbus.contrib.keras: a tf_keras model trained by KerasModel(...).fit() through a real
trainer; the learning phase, regularization and update ops. (Validation metrics, which
``fit(validation_data=...)`` computes with trainbus-inference's InferenceRunner:
plugins/inference/tests/test_inference_keras.py.)"""

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import tf_keras as keras
from trainbus.callbacks import Callback
from trainbus.contrib.keras import KerasModel, KerasPhaseCallback, setup_keras_trainer
from trainbus.input_source import QueueInput
from trainbus.testing import points_dataflow
from trainbus.train import SimpleTrainer

from kerasparts import SIG_IN, SIG_OUT, model_func, stripe_batches

tf1 = tf.compat.v1
KL = keras.layers


def two_in_two_out(a, b):
    """Functional model: inputs a (N, 3), b (N, 2); outputs 'sum' regression and 'cls' softmax."""
    ia, ib = keras.Input(tensor=a), keras.Input(tensor=b)
    h = KL.Dense(8, activation="tanh")(KL.Concatenate()([ia, ib]))
    return keras.Model(inputs=[ia, ib], outputs=[KL.Dense(1, name="sum")(h), KL.Dense(2, activation="softmax")(h)])


def test_setup_keras_trainer_two_inputs_two_outputs():
    rng = np.random.RandomState(0)
    dps = []
    for _ in range(8):
        a, b = rng.rand(16, 3).astype("float32"), rng.rand(16, 2).astype("float32")
        s = a.sum(1, keepdims=True) + b.sum(1, keepdims=True)
        cls = np.eye(2, dtype="float32")[(a[:, 0] > b[:, 0]).astype(int)]
        dps.append([a, b, s, cls])
    trainer = SimpleTrainer()

    class Losses(Callback):
        def __init__(self):
            self.values = []

        def _setup_graph(self):
            g = self.graph
            self.t = [g.get_tensor_by_name(n + ":0") for n in ("mean_squared_error", "categorical_crossentropy",
                                                                 "total_loss", "binary_accuracy")]
            self.callbacks = list(self.trainer._callbacks)

        def _before_run(self, ctx):
            return self.t

        def _after_run(self, ctx, values):
            self.values.append(values.results)

    rec = Losses()
    setup_keras_trainer(trainer, two_in_two_out,
                        [tf.TensorSpec([None, 3], tf.float32, "a"), tf.TensorSpec([None, 2], tf.float32, "b")],
                        [tf.TensorSpec([None, 1], tf.float32, "s"), tf.TensorSpec([None, 2], tf.float32, "c")],
                        QueueInput(points_dataflow(dps)), tf1.train.AdamOptimizer(0.05),
                        ["mean_squared_error", "categorical_crossentropy"], ["binary_accuracy"])
    trainer.train_with_defaults(callbacks=[rec], steps_per_epoch=8, max_epoch=3, monitors=[], extra_callbacks=[])
    vals = np.array(rec.values)
    assert vals.shape == (24, 4)
    # no dropout/batch norm: the learning phase is not used, no callback feeds it
    assert not any(isinstance(cb, KerasPhaseCallback) for cb in rec.callbacks)
    np.testing.assert_allclose(vals[:, 2], vals[:, 0] + vals[:, 1], rtol=1e-5)   # total = sum of the losses
    assert vals[-8:, 0].mean() < vals[:8, 0].mean() / 2            # the regression learned
    assert ((vals[:, 3] >= 0) & (vals[:, 3] <= 1)).all()


def test_errors_name_the_problem():
    train = stripe_batches(32, 0, 16)
    with pytest.raises(ValueError, match="target_signature is required"):
        KerasModel(model_func, input_signature=SIG_IN, input=train, trainer=SimpleTrainer())
    with pytest.raises(ValueError, match="input= is required"):
        KerasModel(model_func, input_signature=SIG_IN, target_signature=SIG_OUT, trainer=SimpleTrainer())
    with pytest.raises(TypeError, match="trainbus Trainer"):
        KerasModel(model_func, SIG_IN, SIG_OUT, input=train, trainer=object())
    with tf.Graph().as_default():
        M = KerasModel(model_func, SIG_IN, SIG_OUT, input=train, trainer=SimpleTrainer())
        with pytest.raises(RuntimeError, match="compile"):
            M.fit(max_epoch=1)
        with pytest.raises(TypeError, match="tf.compat.v1.train.Optimizer"):
            M.compile(optimizer=keras.optimizers.Adam(), loss="categorical_crossentropy")
    with tf.Graph().as_default():
        M = KerasModel(lambda image: tf.keras.Sequential([tf.keras.layers.Dense(3)]), SIG_IN, SIG_OUT, input=train,
                       trainer=SimpleTrainer())
        with pytest.raises(TypeError, match="Keras 3 model.*import tf_keras as keras"):
            M.compile(optimizer=tf1.train.AdamOptimizer(), loss="categorical_crossentropy")
    with pytest.raises(TypeError, match="bool"):
        KerasPhaseCallback(1)


def test_missing_tf_keras_says_what_to_install():
    code = ("import sys\nsys.modules['tf_keras'] = None\n"
            "try:\n    import trainbus.contrib.keras\nexcept ImportError as e:\n    print('ImportError:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "Install it with: pip install tf-keras\n" in out.stdout, out.stdout + out.stderr
    # the extra in both forms: plain, and from a checkout's wheelhouse (trainbus is not on a public index)
    assert "    or with trainbus's keras extra: pip install 'trainbus[keras]' (from a trainbus checkout: " \
           "tools/build_wheels.sh, then pip install --find-links dist 'trainbus[keras]')" in out.stdout, out.stdout


def test_multi_process_trainers_are_refused_by_the_stop_seam_they_implement():
    """A trainer that implements ``agree_stop`` (every process stops after the same step) is a
    multi-process strategy, whatever its class is called; the installed multi-process trainers
    are such strategies, the single-process ones are not."""
    from trainbus.bus import registry
    from trainbus.train.base import Trainer

    class LockstepTrainer(SimpleTrainer):  # a strategy of a plugin the core has never heard of
        def agree_stop(self, cause):
            return False

    train = stripe_batches(32, 0, 16)
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match=r"does not support multi-process trainers \(LockstepTrainer\)"):
            KerasModel(model_func, SIG_IN, SIG_OUT, input=train, trainer=LockstepTrainer())
    with tf.Graph().as_default():
        assert KerasModel(model_func, SIG_IN, SIG_OUT, input=train, trainer=SimpleTrainer()).trainer is not None
    # the classes the installed trainer distributions provide, looked up through the registry
    multi = {"HorovodTrainer", "DistributedTrainerParameterServer", "DistributedTrainerReplicated"}
    for name, eps in registry.index("trainbus.train").items():
        obj = eps[0].load()
        if not (isinstance(obj, type) and issubclass(obj, Trainer)):
            continue  # a factory function
        assert (obj.agree_stop is not Trainer.agree_stop) is (name in multi), name
