"""Predictors with one inference tower per device."""

from __future__ import annotations

from typing import Any, Sequence

import tensorflow as tf

from trainbus.predict.base import OnlinePredictor
from trainbus.predict.config import PredictConfig, _tensors
from trainbus.tfutils.tower import PredictTowerContext
from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["MultiTowerOfflinePredictor", "DataParallelOfflinePredictor"]


def _check(who: str, config: Any, towers: Any) -> list[int]:
    if not isinstance(config, PredictConfig):
        raise TypeError(f"{who} needs a PredictConfig, got {type(config).__name__} {config!r}")
    if isinstance(towers, int) or not isinstance(towers, (list, tuple, range)):
        raise TypeError(f"{who}: towers must be a list of device ids (e.g. [0, 1]), got {towers!r}")
    towers = list(towers)
    if not towers:
        raise ValueError(f"{who}: towers is empty; give at least one device id, e.g. towers=[0]")
    for t in towers:
        if isinstance(t, bool) or not isinstance(t, int) or t < 0:
            raise ValueError(f"{who}: every tower must be a GPU id (an int >= 0), got {t!r} in {towers}")
    if len(set(towers)) != len(towers):
        raise ValueError(f"{who}: towers {towers} has duplicates; each tower needs its own device id")
    return towers


def _device(t: int) -> str:
    """``/gpu:t`` when that GPU exists, else ``/cpu:0`` (so the towers build and run on a
    CPU-only host with any session config)."""
    if t < len(tf.config.list_physical_devices("GPU")):
        return f"/gpu:{t}"
    return "/cpu:0"


class MultiTowerOfflinePredictor(OnlinePredictor):
    """Build one inference tower per device (``tower{t}`` on GPU ``t``, sharing the variables and
    the input placeholders) in one graph and one session; one :class:`OnlinePredictor` per tower.
    Calling it predicts with the first tower. On a host without that GPU a tower goes to ``/cpu:0``.

    :param config: a :class:`~trainbus.predict.PredictConfig`.
    :param towers: GPU ids, e.g. ``[0, 1]``.
    """

    def __init__(self, config: PredictConfig, towers: Sequence[int]) -> None:
        towers = _check(type(self).__name__, config, towers)
        self.config = config
        self.return_input = config.return_input
        self.graph = config._maybe_create_graph()
        self.predictors: list[OnlinePredictor] = []
        from trainbus.input_source import PlaceholderInput

        with self.graph.as_default():
            inp = PlaceholderInput()
            inp.setup(config.input_signature)
            handles = []
            for t in towers:
                name, dev = f"tower{t}", _device(t)
                logger.info(f"Building predict tower {name!r} on device {dev} ...")
                with tf1.device(dev), PredictTowerContext(name):
                    config.tower_func(*inp.get_input_tensors())
                handles.append(config.tower_func.towers[-1])
            self.sess = config._create_session(self.graph)
            for h in handles:
                self.predictors.append(OnlinePredictor(_tensors(h, config.input_names, "input_names"),
                                                       _tensors(h, config.output_names, "output_names"),
                                                       config.return_input, self.sess))
        self.input_tensors = self.predictors[0].input_tensors
        self.output_tensors = self.predictors[0].output_tensors

    def _do_call(self, dp: Sequence[Any]) -> Any:
        return self.predictors[0]._do_call(dp)

    def get_predictor(self, n: int) -> OnlinePredictor:
        """The predictor of the ``n``-th tower; ``n`` beyond the number of towers wraps around
        (round-robin), with a warning."""
        count = len(self.predictors)
        if n >= count:
            logger.warning(f"MultiTowerOfflinePredictor: predictor {n} requested but there are {count} towers; "
                           f"assigning towers round-robin (tower {n % count})")
        return self.predictors[n % count]

    def get_predictors(self) -> list[OnlinePredictor]:
        """One :class:`OnlinePredictor` per tower, in the order of ``towers``."""
        return list(self.predictors)


class DataParallelOfflinePredictor(OnlinePredictor):
    """One predictor over all towers: each tower (``tower{t}`` on GPU ``t``) gets its own input
    placeholders (``tower{t}_<input name>``), and one call runs every tower at once.

    Inputs and outputs are not split or concatenated: a call takes the inputs of every tower,
    tower after tower (``[in0 of tower0, in1 of tower0, ..., in0 of tower1, ...]``), and returns
    the outputs the same way.

    :param config: a :class:`~trainbus.predict.PredictConfig`.
    :param towers: GPU ids, e.g. ``[0, 1]``.
    """

    def __init__(self, config: PredictConfig, towers: Sequence[int]) -> None:
        from trainbus.input_source import PlaceholderInput

        towers = _check(type(self).__name__, config, towers)
        self.config = config
        self.graph = config._maybe_create_graph()
        ins: list[Any] = []
        outs: list[Any] = []
        with self.graph.as_default():
            for t in towers:
                name, dev = f"tower{t}", _device(t)
                sig = [tf.TensorSpec(s.shape, s.dtype, f"{name}_{s.name}") for s in config.input_signature]
                inp = PlaceholderInput()
                inp.setup(sig)
                with tf1.device(dev), PredictTowerContext(name):
                    config.tower_func(*inp.get_input_tensors())
                h = config.tower_func.towers[-1]
                ins.extend(_tensors(h, config.input_names, "input_names"))
                outs.extend(_tensors(h, config.output_names, "output_names"))
            sess = config._create_session(self.graph)
        super().__init__(ins, outs, config.return_input, sess)
