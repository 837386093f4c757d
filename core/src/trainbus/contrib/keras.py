"""Train a Keras model with a trainbus trainer.

This needs ``tf-keras`` (Keras 2 as a separate package), the Keras that builds graphs in
``tf.compat.v1`` graph mode: TensorFlow 2.16+ bundles Keras 3 as ``tf.keras``, which does not.
Build your model with ``import tf_keras as keras`` (instead of ``from tensorflow import keras``)::

    import tf_keras as keras
    from trainbus.contrib.keras import KerasModel

    def get_model(image):
        M = keras.models.Sequential()
        M.add(keras.layers.InputLayer(input_tensor=image))
        M.add(keras.layers.Flatten())
        M.add(keras.layers.Dense(10, activation="softmax"))
        return M

    M = KerasModel(get_model, input_signature=[tf.TensorSpec([None, 28, 28, 1], tf.float32, "images")],
                   target_signature=[tf.TensorSpec([None, 10], tf.float32, "labels")], input=train_dataflow)
    M.compile(optimizer=tf.compat.v1.train.AdamOptimizer(1e-3), loss="categorical_crossentropy",
              metrics="categorical_accuracy")
    M.fit(validation_data=test_dataflow, max_epoch=10)
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

try:
    import tf_keras as keras
except ImportError as _e:  # pragma: no cover - exercised in a subprocess by the tests
    from trainbus.bus.registry import install_hint as _install_hint

    # tf-keras is on the public index; the extra is a trainbus distribution's, hence both forms
    raise ImportError(
        "trainbus.contrib.keras needs the tf-keras package (Keras 2, which works in tf.compat.v1 graph mode; the "
        "Keras 3 bundled with TensorFlow does not). Install it with: pip install tf-keras\n"
        f"    or with trainbus's keras extra: {_install_hint('trainbus[keras]')}") from _e

import tensorflow as tf

from trainbus.callbacks.base import Callback
from trainbus.tfutils.common import get_op_tensor_name
from trainbus.tfutils.scope_utils import cached_name_scope
from trainbus.tfutils.summary import add_moving_summary
from trainbus.tfutils.tower import get_current_tower_context
from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["KerasPhaseCallback", "setup_keras_trainer", "KerasModel"]

#: the name of the total cost tensor (the sum of the losses and the regularization)
TOTAL_LOSS_NAME = "total_loss"


def _check_name(tensor: Any, name: str) -> None:
    got = get_op_tensor_name(tensor.name)[0].split("/")[-1]
    if got != name:
        raise ValueError(f"Keras loss/metric {name!r} got the tensor name {tensor.name!r}: another tensor of the "
                         f"tower is already named {name!r}; rename it")


def _check_model(model: Any, get_model: Any) -> None:
    if isinstance(model, keras.Model):
        return
    mod = type(model).__module__
    if mod.startswith("keras"):
        raise TypeError(f"get_model {get_model!r} returned a Keras 3 model ({mod}.{type(model).__name__}): "
                        "tf.keras in TensorFlow >= 2.16 is Keras 3, which does not support tf.compat.v1 graph mode. "
                        "Build the model with tf-keras: `import tf_keras as keras` instead of `from tensorflow import "
                        "keras`")
    raise TypeError(f"get_model {get_model!r} must return a tf_keras.Model, got {type(model).__name__} {model!r}")


class KerasModelCaller:
    """Call ``get_model`` in every tower as a tower function part: the first call builds the
    Keras model; later towers (inference towers, further data-parallel training towers, which
    share the variables) call that same model on their inputs, with ``training=`` from the tower
    context. Training towers with their own variables (replicated training) are refused.

    The built model's trainable weights are kept in ``TRAINABLE_VARIABLES`` (and only them);
    its updates (e.g. batch-norm statistics) are added to ``UPDATE_OPS`` by the main training
    tower, so ``RunUpdateOps`` runs them.
    """

    def __init__(self, get_model: Callable[..., Any]) -> None:
        self.get_model = get_model
        self.cached_model: Any = None

    def __call__(self, *input_tensors: Any) -> tuple[Any, Any]:
        """Returns ``(outputs, model)``: the output tensors of this tower and the Keras model."""
        ctx = get_current_tower_context()
        training = ctx.is_training if ctx is not None else None
        own_vars = ctx is not None and ctx.is_training and bool(ctx.vs_name)
        if own_vars and self.cached_model is not None:
            # Keras names each new model's layers uniquely (dense_1, ...) whatever the variable scope,
            # so a second copy of the variables cannot match the first one's names
            raise TypeError(f"Keras models cannot be trained by trainers whose towers have their own variables "
                            f"(tower {ctx.ns_name!r}: e.g. SyncMultiGPUTrainerReplicated); use a trainer that "
                            "shares the variables, e.g. SyncMultiGPUTrainerParameterServer")
        if self.cached_model is None:
            g = tf1.get_default_graph()
            before = {v.ref() for v in tf1.trainable_variables()}
            scope = _null_scope()
            if ctx is not None and ctx.is_main_training_tower and ctx.ns_name and not ctx.vs_name:
                # the first training tower's variables get the same names as with one tower
                scope = tf1.name_scope(None)
            with scope:
                model = self.get_model(*input_tensors)
            _check_model(model, self.get_model)
            self.cached_model = model
            self._fix_trainable(g, model, before)
            if ctx is None or ctx.is_main_training_tower:
                for op in model.updates:
                    tf1.add_to_collection(tf1.GraphKeys.UPDATE_OPS, op)
            outputs = list(model.outputs)
        else:
            model = self.cached_model
            inputs = list(input_tensors)
            outputs = model(inputs if len(inputs) > 1 else inputs[0], training=training)
            outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        return outputs, model

    @staticmethod
    def _fix_trainable(graph: Any, model: Any, before: set) -> None:
        coll = graph.get_collection_ref(tf1.GraphKeys.TRAINABLE_VARIABLES)
        trainable = {v.ref() for v in model.trainable_weights}
        wrong = [v for v in coll if v.ref() not in before and v.ref() not in trainable
                 and any(v is w for w in model.weights)]
        for v in wrong:
            logger.warning(f"Keras put the non-trainable variable {v.name!r} in TRAINABLE_VARIABLES; removed it")
            coll.remove(v)
        present = {v.ref() for v in coll}
        for v in model.trainable_weights:
            if v.ref() not in present:
                coll.append(v)


class _null_scope:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return False


class KerasPhaseCallback(Callback):
    """Feed Keras' learning phase (``tf_keras.backend.learning_phase()``) with every step.

    The learning phase defaults to 0 (inference) when not fed, and trainbus' inference runners
    build their towers with ``training=False``; so the trainer needs only
    ``KerasPhaseCallback(True)``, which :class:`KerasModel` and :func:`setup_keras_trainer` add
    when the model uses the learning phase (dropout, batch normalization).

    :param isTrain: the value to feed (True while training).
    """

    _chief_only = False   # every training process feeds its own steps

    def __init__(self, isTrain: bool) -> None:
        if not isinstance(isTrain, bool):
            raise TypeError(f"KerasPhaseCallback(isTrain) takes a bool, got {isTrain!r}")
        self._isTrain = isTrain
        self._learning_phase: Any = None

    def _setup_graph(self) -> None:
        self._learning_phase = keras.backend.learning_phase()
        logger.info(f"Using Keras learning phase {self._learning_phase.name} in the graph!")
        self._args = tf1.train.SessionRunArgs(fetches=[], feed_dict={self._learning_phase: self._isTrain})

    def _before_run(self, ctx: Any) -> Any:
        return self._args

    def __str__(self) -> str:
        return f"KerasPhaseCallback({self._isTrain})"


def _as_list(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{what} must be a name or a list of names (e.g. 'categorical_crossentropy'), got {value!r}")
    return list(value)


def setup_keras_trainer(trainer: Any, get_model: Callable[..., Any], input_signature: Sequence[Any],
                        target_signature: Sequence[Any], input: Any, optimizer: Any, loss: Sequence[str],
                        metrics: Sequence[str]) -> None:
    """Build ``trainer``'s graph from a Keras model: each tower calls ``get_model`` on the
    inputs, computes the named Keras ``loss`` of each output against its target, adds the
    model's regularization losses, and minimizes their sum ``total_loss`` with ``optimizer``.
    Each loss and metric is a scalar tensor named after it (e.g. ``categorical_accuracy``),
    summarized with a moving average in the main training tower.

    :param trainer: a ``SingleCostTrainer`` (e.g. ``SimpleTrainer()``), not set up yet.
    :param get_model: ``(input1, input2, ...) -> tf_keras.Model``: builds the model on the input
        tensors (part of the tower function).
    :param input_signature: the model's inputs (list of ``tf.TensorSpec``).
    :param target_signature: the targets, one per model output.
    :param input: an ``InputSource`` giving inputs then targets.
    :param optimizer: a ``tf.compat.v1.train.Optimizer``.
    :param loss: one Keras loss name per output.
    :param metrics: Keras metric names, the k-th computed on the k-th output.
    """
    if not isinstance(optimizer, tf1.train.Optimizer):
        raise TypeError(f"setup_keras_trainer: optimizer must be a tf.compat.v1.train.Optimizer (e.g. "
                        f"tf.compat.v1.train.AdamOptimizer(1e-3)), got {type(optimizer).__name__} {optimizer!r}")
    loss = _as_list(loss, "loss")
    metrics = _as_list(metrics, "metrics")
    if not loss:
        raise ValueError("setup_keras_trainer: no loss was given; name one Keras loss per model output")
    if not callable(get_model):
        raise TypeError(f"setup_keras_trainer: get_model must be a function returning a tf_keras.Model, "
                        f"got {get_model!r}")
    input_signature, target_signature = list(input_signature), list(target_signature)
    caller = KerasModelCaller(get_model)
    nr_inputs = len(input_signature)

    def get_cost(*inputs: Any) -> Any:
        ctx = get_current_tower_context()
        input_tensors, target_tensors = list(inputs[:nr_inputs]), list(inputs[nr_inputs:])
        outputs, model = caller(*input_tensors)
        if len(outputs) != len(target_tensors):
            targets = [s.name for s in target_signature]
            raise ValueError(f"the Keras model has {len(outputs)} outputs but target_signature has "
                             f"{len(target_tensors)} targets ({targets}); give one per output")
        if len(outputs) != len(loss):
            raise ValueError(f"the Keras model has {len(outputs)} outputs but {len(loss)} losses were given ({loss})")
        loss_tensors = []
        for out, target, name in zip(outputs, target_tensors, loss):
            with cached_name_scope("keras_loss", top_level=False):
                value = keras.losses.get(name)(target, out)
            value = tf.reduce_mean(value, name=name)
            _check_name(value, name)
            loss_tensors.append(value)
        reg = [tf.cast(x, tf.float32) for x in model.losses] if ctx is None or ctx.is_training else []
        if reg:
            reg_cost = tf.add_n(reg, name="regularize_cost")
            total = tf.add_n(loss_tensors + [reg_cost], name=TOTAL_LOSS_NAME)
            add_moving_summary(reg_cost, total, *loss_tensors)
        else:
            total = tf.add_n(loss_tensors, name=TOTAL_LOSS_NAME)
            add_moving_summary(total, *loss_tensors)
        if metrics and (ctx is None or ctx.is_main_training_tower or not ctx.is_training):
            metric_tensors = []
            for k, name in enumerate(metrics):
                if k >= len(outputs):
                    raise ValueError(f"metric {name!r} is the {k + 1}-th metric but the model has {len(outputs)} "
                                     "outputs; give at most one metric per output")
                with cached_name_scope("keras_metric", top_level=False):
                    value = keras.metrics.get(name)(target_tensors[k], outputs[k])
                value = tf.reduce_mean(tf.cast(value, tf.float32), name=name)
                _check_name(value, name)
                metric_tensors.append(value)
            add_moving_summary(*metric_tensors)
        return total

    trainer.setup_graph(input_signature + target_signature, input, get_cost, lambda: optimizer)
    with trainer.graph.as_default():
        phase = keras.backend.learning_phase()
        if isinstance(phase, tf.Tensor) and phase.consumers():
            trainer.register_callback(KerasPhaseCallback(True))


def _is_multi_process(trainer: Any) -> bool:
    """Whether ``trainer`` coordinates several processes: it implements the ``agree_stop``
    seam of :class:`~trainbus.train.base.Trainer` (every process must stop after the same
    step), which a single-process trainer leaves as it is. Read from the seam, not from class
    names, so that any multi-process strategy a plugin brings is recognised."""
    from trainbus.train.base import Trainer

    return type(trainer).agree_stop is not Trainer.agree_stop


class KerasModel:
    """Keras-style ``compile``/``fit`` over a trainbus trainer.

    :param get_model: ``(input1, input2, ...) -> tf_keras.Model``, building the model on the
        given input tensors (use ``keras.layers.InputLayer(input_tensor=...)`` or
        ``keras.Input(tensor=...)``). It is part of the tower function.
    :param input_signature: the inputs (list of ``tf.TensorSpec``).
    :param target_signature: the targets, one per model output (list of ``tf.TensorSpec``).
    :param input: a DataFlow (prefetched with ``QueueInput``) or an ``InputSource``; each
        datapoint is ``[inputs..., targets...]``.
    :param trainer: default: ``SimpleTrainer()``, or ``SyncMultiGPUTrainerParameterServer(n)``
        with ``n > 1`` GPUs. Distributed (multi-process) trainers are not supported.
    """

    def __init__(self, get_model: Callable[..., Any], input_signature: Sequence[Any] | None = None,
                 target_signature: Sequence[Any] | None = None, input: Any = None, trainer: Any = None) -> None:
        from trainbus.train.base import Trainer
        from trainbus.train.interface import apply_default_prefetch

        if not callable(get_model):
            raise TypeError(f"KerasModel: get_model must be a function returning a tf_keras.Model, got {get_model!r}")
        for arg, sig in (("input_signature", input_signature), ("target_signature", target_signature)):
            if sig is None or isinstance(sig, (str, tf.TensorSpec)) or not isinstance(sig, (list, tuple)):
                raise ValueError(f"KerasModel: {arg} is required, a list of tf.TensorSpec (e.g. "
                                 f"[tf.TensorSpec([None, 10], tf.float32, 'labels')]), got {sig!r}")
        if input is None:
            raise ValueError("KerasModel: input= is required (a DataFlow or an InputSource of [inputs..., targets...])")
        self.get_model = get_model
        self.input_signature = list(input_signature)
        self.target_signature = list(target_signature)
        if trainer is None:
            nr_gpu = len(tf.config.list_physical_devices("GPU"))
            if nr_gpu <= 1:
                from trainbus.train import SimpleTrainer  # type: ignore[attr-defined]

                trainer = SimpleTrainer()
            else:
                from trainbus.train import SyncMultiGPUTrainerParameterServer  # type: ignore[attr-defined]

                trainer = SyncMultiGPUTrainerParameterServer(nr_gpu)
        if not isinstance(trainer, Trainer):
            raise TypeError(f"KerasModel: trainer must be a trainbus Trainer (e.g. SimpleTrainer()), got {trainer!r}")
        if _is_multi_process(trainer):
            raise TypeError(f"KerasModel does not support multi-process trainers ({type(trainer).__name__}); use "
                            "SimpleTrainer or a multi-GPU trainer")
        self.input = apply_default_prefetch(input, trainer)
        self.trainer = trainer
        self._stats_to_inference: list[str] | None = None

    def compile(self, optimizer: Any, loss: str | Sequence[str], metrics: str | Sequence[str] | None = None) -> None:
        """Build the training graph.

        :param optimizer: a ``tf.compat.v1.train.Optimizer``.
        :param loss: a Keras loss name, or one per output.
        :param metrics: a Keras metric name or a list (the k-th on the k-th output).
        """
        if self._stats_to_inference is not None:
            raise RuntimeError("KerasModel.compile() was already called; a KerasModel is compiled once")
        loss = _as_list(loss, "KerasModel.compile: loss")
        metrics = _as_list(metrics, "KerasModel.compile: metrics")
        setup_keras_trainer(self.trainer, get_model=self.get_model, input_signature=self.input_signature,
                            target_signature=self.target_signature, input=self.input, optimizer=optimizer,
                            loss=loss, metrics=metrics)
        self._stats_to_inference = loss + metrics + [TOTAL_LOSS_NAME]

    def fit(self, validation_data: Any = None, **kwargs: Any) -> None:
        """Train with ``trainer.train_with_defaults(**kwargs)``.

        :param validation_data: a DataFlow or an InputSource: an ``InferenceRunner`` computing
            the mean of each loss, metric and ``total_loss`` over it (logged as
            ``validation_<name>``) is put first in the callbacks.
        :param kwargs: as ``Trainer.train_with_defaults`` (``callbacks``, ``max_epoch``,
            ``session_init``...); ``steps_per_epoch`` defaults to the size of the input.
        """
        if self._stats_to_inference is None:
            raise RuntimeError("KerasModel.fit() needs compile(optimizer, loss, metrics) first")
        callbacks = list(kwargs.pop("callbacks", None) or [])
        if validation_data is not None:
            from trainbus.callbacks import InferenceRunner, ScalarStats  # type: ignore[attr-defined]

            # first, so that callbacks after it (e.g. MinSaver) see this epoch's validation stats
            callbacks.insert(0, InferenceRunner(validation_data, ScalarStats(self._stats_to_inference)))
        if kwargs.get("steps_per_epoch") is None:
            try:
                kwargs["steps_per_epoch"] = self.input.size()
            except Exception as e:  # noqa: BLE001 - any failure means "unknown size"
                raise ValueError(f"KerasModel.fit: the size of the input {self.input} is unknown ({e}); pass "
                                 "steps_per_epoch=") from None
        self.trainer.train_with_defaults(callbacks=callbacks, **kwargs)
