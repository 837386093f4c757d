"""HyperParamSetter and its subclasses."""

from __future__ import annotations

import math
import numbers
import os
from collections import deque
from typing import Any, Callable, Sequence

import numpy as np

from trainbus.callbacks.base import Callback
from trainbus.utils import logger

from trainbus_param._params import GraphVarParam, HyperParam

__all__ = ["HyperParamSetter", "HumanHyperParamSetter", "ScheduledHyperParamSetter", "HyperParamSetterWithFunc",
           "StatMonitorParamSetter"]


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) or (
        hasattr(v, "dtype") and getattr(v, "size", 0) == 1 and getattr(v.dtype, "kind", "") in "fiu")


class HyperParamSetter(Callback):
    """Base class of callbacks that set a hyperparameter.

    On every ``trigger()`` (after each epoch by default) and before training, it asks
    ``_get_value_to_set()`` for a new value; a value that is not None is set on the param. A
    value set by a trigger is also put to the monitors as ``param.readable_name``; the one set
    before training is not (as in tensorpack, no statistics record at step 0). Subclasses
    implement ``_get_value_to_set()``.

    :param param: a :class:`HyperParam`, or a variable name (a :class:`GraphVarParam`).
    """

    _chief_only = False
    #: also set the param in ``before_train``
    _enable_before_train = True

    def __init__(self, param: HyperParam | str) -> None:
        if type(self)._get_value_to_set is HyperParamSetter._get_value_to_set:
            raise TypeError(f"{type(self).__name__} is abstract: subclass HyperParamSetter and implement "
                            "_get_value_to_set(), or use one of its subclasses (ScheduledHyperParamSetter, ...)")
        if isinstance(param, str):
            param = GraphVarParam(param)
        if not isinstance(param, HyperParam):
            raise TypeError(f"{type(self).__name__}: param must be a HyperParam or a variable name, got {param!r} "
                            f"of type {type(param).__name__}")
        self.param = param
        self._last_value: Any = None
        self._last_epoch_set = -1

    def _setup_graph(self) -> None:
        self.param.setup_graph()

    def get_value_to_set(self) -> Any:
        """The value to set now (None: leave the param alone); logs changes."""
        ret = self._get_value_to_set()
        self._note(ret)
        return ret

    def _note(self, ret: Any) -> None:
        if ret is not None and not _same(ret, self._last_value):
            if self.epoch_num != self._last_epoch_set:  # at most one message an epoch
                if self._last_value is None:
                    logger.info(f"[HyperParamSetter] At global_step={self.global_step}, "
                                f"{self.param.readable_name} is set to {_fmt(ret)}")
                else:
                    logger.info(f"[HyperParamSetter] At global_step={self.global_step}, {self.param.readable_name} "
                                f"changes from {_fmt(self._last_value)} to {_fmt(ret)}")
            self._last_epoch_set = self.epoch_num
            self._last_value = ret

    def _get_value_to_set(self) -> Any:
        """Return the new value, or None to leave the param as it is."""
        raise TypeError(f"{type(self).__name__} must implement _get_value_to_set()")

    def get_current_value(self) -> Any:
        """The current value of the param."""
        return self.param.get_value()

    def _trigger(self) -> None:
        self._set_param()

    def _before_train(self) -> None:
        if self._enable_before_train:
            self._set_param(put=False)

    def _set_param(self, put: bool = True) -> None:
        v = self.get_value_to_set()
        if v is not None:
            self._apply(v, put)

    def _apply(self, v: Any, put: bool = True) -> None:
        """Set ``v`` on the param; with ``put``, also put it to the monitors (not before training:
        a record at step 0 holding only this value is one tensorpack never writes)."""
        self.param.set_value(v)
        if put and _is_number(v):
            self.trainer.monitors.put_scalar(self.param.readable_name, _as_float(v))

    def __str__(self) -> str:
        return f"{type(self).__name__}({self.param.readable_name})"


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - arrays and odd objects
        return a is b


def _as_float(v: Any) -> float:
    """A number as a Python float: also a numpy scalar, a 0-d array or an array of one element
    (which ``float()`` refuses with numpy 2)."""
    return float(np.asarray(v).item())


def _fmt(v: Any) -> str:
    return f"{_as_float(v):.6g}" if _is_number(v) else repr(v)


class HumanHyperParamSetter(HyperParamSetter):
    """Set a hyperparameter from a file that is read again on every trigger: edit the file to
    tune, e.g., the learning rate without stopping the training.

    Each line of the file is a ``name:value`` pair (``learning_rate:1e-4``); blank lines and
    lines starting with ``#`` are ignored. If the param's name is not in the file (or the file
    does not exist), the param is left alone. A malformed line is reported as a warning naming
    the line and skipped.

    :param param: as in :class:`HyperParamSetter`.
    :param file_name: the file, relative to the log directory.
    """

    def __init__(self, param: HyperParam | str, file_name: str = "hyper.txt") -> None:
        super().__init__(param)
        if not isinstance(file_name, str) or not file_name:
            raise TypeError(f"HumanHyperParamSetter: file_name must be a file name, got {file_name!r}")
        self._file_name = file_name
        self.file_name: str | None = None
        self._resolve()

    def _resolve(self) -> None:
        d = logger.get_logger_dir()
        if d is not None or os.path.isabs(self._file_name):
            self.file_name = os.path.join(d or "", self._file_name)

    def _setup_graph(self) -> None:
        if self.file_name is None:
            self._resolve()
        if self.file_name is None:
            raise RuntimeError(f"HumanHyperParamSetter reads {self._file_name} in the log directory, but none is set; "
                               "call trainbus.utils.logger.set_logger_dir(dir) before training, or give an absolute file_name")
        logger.info(f"Use {self.file_name} to set hyperparam '{self.param.readable_name}'.")
        super()._setup_graph()

    def _get_value_to_set(self) -> Any:
        if not os.path.isfile(self.file_name):
            return None
        try:
            with open(self.file_name, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (OSError, UnicodeDecodeError) as e:
            logger.warning(f"HumanHyperParamSetter: cannot read {self.file_name}: {e}")
            return None
        values = {}
        for lineno, line in enumerate(lines, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            key, sep, val = text.partition(":")
            try:
                if not sep or not key.strip():
                    raise ValueError("expected name:value")
                values[key.strip()] = float(val.strip())
            except ValueError:
                logger.warning(f"HumanHyperParamSetter: ignoring malformed line {lineno} of {self.file_name}: "
                               f"{line!r} (expected name:value, e.g. learning_rate:1e-4)")
        if self.param.readable_name not in values:
            return None
        return values[self.param.readable_name]


class ScheduledHyperParamSetter(HyperParamSetter):
    """Set a hyperparameter by a schedule of epochs (or steps).

    :param param: as in :class:`HyperParamSetter`.
    :param schedule: ``[(epoch1, val1), (epoch2, val2), ...]``, epochs strictly increasing.
        ``(ep, val)`` sets the param to ``val`` after epoch ``ep`` completes; ``ep == 0`` sets it
        before the first epoch.
    :param interp: None sets values only when a scheduled epoch/step is reached exactly;
        ``'linear'`` interpolates linearly between scheduled points every time the callback is
        triggered (no extrapolation: before the first point and after the last nothing is set).
    :param step_based: the schedule is in global steps (checked after every step) instead of epochs.
    :param set_at_beginning: when training starts past a scheduled point (a later
        ``starting_epoch``, a restored global step) and the param differs from the value the
        schedule dictates there (the latest scheduled point reached, interpolated with
        ``'linear'``), a warning says so; with True the scheduled value is then set, with False
        the param keeps its value (and is set only at scheduled points).

    Example::

        ScheduledHyperParamSetter('learning_rate', [(30, 1e-2), (60, 1e-3), (85, 1e-4), (95, 1e-5)])
    """

    def __init__(self, param: HyperParam | str, schedule: Sequence[tuple[int, float]], interp: str | None = None,
                 step_based: bool = False, set_at_beginning: bool = True) -> None:
        if interp not in (None, "linear"):
            raise ValueError(f"ScheduledHyperParamSetter: interp must be None or 'linear', got {interp!r}")
        try:
            items = list(schedule)
        except TypeError:
            raise TypeError(f"ScheduledHyperParamSetter: schedule must be a list of (point, value) pairs, got {schedule!r}") from None
        if not items:
            raise ValueError("ScheduledHyperParamSetter: the schedule is empty; give at least one (point, value) pair")
        parsed = []
        unit = "step" if step_based else "epoch"
        for i, item in enumerate(items):
            try:
                p, v = item
                p_int = int(p)
                if p_int != p or isinstance(p, bool):
                    raise ValueError
                v = float(v)
            except (TypeError, ValueError):
                raise ValueError(f"ScheduledHyperParamSetter: schedule entry {i} is {item!r}; each entry must be an "
                                 f"({unit}, value) pair with an integer {unit} and a numeric value") from None
            if p_int < 0 or not math.isfinite(v):
                raise ValueError(f"ScheduledHyperParamSetter: schedule entry {i} {item!r} needs a {unit} >= 0 and a finite value")
            parsed.append((p_int, v))
        for (a, _), (b, _) in zip(parsed, parsed[1:]):
            if b <= a:
                raise ValueError(f"ScheduledHyperParamSetter: the {unit}s of the schedule must be strictly increasing, "
                                 f"got {a} then {b} in {[p for p, _ in parsed]}")
        super().__init__(param)
        self.schedule = parsed
        self.interp = interp
        self._step = bool(step_based)
        self._set_at_beginning = bool(set_at_beginning)
        self._last_set: Any = None

    def hooks_used(self) -> frozenset[str]:
        used = set(super().hooks_used())
        used.discard("trigger_epoch" if self._step else "trigger_step")
        return frozenset(used)

    def _current_point(self) -> int:
        return self.global_step if self._step else self.epoch_num

    def _value_at(self, point: int) -> float | None:
        """The value to set at exactly this point: a scheduled value, or an interpolated one."""
        prev = None
        for p, v in self.schedule:
            if p == point:
                return v
            if p > point:
                if prev is None or self.interp is None:
                    return None
                p0, v0 = prev
                return v0 + (point - p0) * (v - v0) / (p - p0)
            prev = (p, v)
        return None  # after the last point: no extrapolation

    def _expected_at(self, point: int) -> float | None:
        """The value the schedule dictates once ``point`` has been reached."""
        v = self._value_at(point)
        if v is not None:
            return v
        reached = [val for p, val in self.schedule if p <= point]
        return reached[-1] if reached else None

    def _get_value_to_set(self) -> Any:
        return self._value_at(self._current_point())

    def _before_train(self) -> None:
        point = self._current_point()
        v = self._value_at(point)
        self._note(v)
        if v is not None:
            # the schedule's value for this point is set now: there is nothing to check (reading
            # the param back would cost a run of its own before the first step)
            self._apply(v, put=False)
        else:
            self._check_value_at_beginning(point)

    def _check_value_at_beginning(self, point: int) -> None:
        """When training starts past a scheduled point (a later ``starting_epoch``, a restored
        global step), compare the param with what the schedule says it should be by now: warn on
        a difference, and set the scheduled value if ``set_at_beginning``."""
        expected = self._expected_at(point)
        if expected is None:
            return
        actual = self.param.get_value()
        try:
            agrees = bool(np.allclose(np.asarray(actual, dtype="float64"), expected))
        except (TypeError, ValueError):
            agrees = False
        if agrees:
            return
        name = self.param.readable_name
        where = f"{'step' if self._step else 'epoch'} {point}"
        logger.warning(f"{self}: by the schedule, '{name}' should be {expected:.7g} at the current point ({where}), "
                       f"but its current value is {_fmt(actual) if _is_number(actual) else repr(actual)}.")
        if self._set_at_beginning:
            logger.info(f"[HyperParamSetter] Setting '{name}' to {expected:.7g} (set_at_beginning=True).")
            self._note(expected)
            self._apply(expected, put=False)
        else:
            logger.warning(f"'{name}' keeps its current value (set_at_beginning=False). Unless another callback "
                           "sets it, check how the parameter is initialized (or restored from the checkpoint).")

    def _apply(self, v: Any, put: bool = True) -> None:
        super()._apply(v, put)
        self._last_set = v

    def _trigger_epoch(self) -> None:
        if not self._step:
            self.trigger()

    def _trigger_step(self) -> None:
        if self._step:
            v = self._get_value_to_set()
            if v is not None and v != self._last_set:  # do not run the assign every step for nothing
                self.trigger()

    def __str__(self) -> str:
        return f"ScheduledHyperParamSetter({self.param.readable_name}, schedule={self.schedule})"


class HyperParamSetterWithFunc(HyperParamSetter):
    """Set a hyperparameter by a function of the epoch number and the current value.

    :param param: as in :class:`HyperParamSetter`.
    :param func: ``new_value = func(epoch_num, old_value)``; ``epoch_num`` is the number of
        epochs finished. Return None to leave the param alone.

    Example (decrease by a factor 0.9 every two epochs)::

        HyperParamSetterWithFunc('learning_rate', lambda e, x: x * 0.9 if e % 2 == 0 else x)
    """

    def __init__(self, param: HyperParam | str, func: Callable[[int, Any], Any]) -> None:
        super().__init__(param)
        if not callable(func):
            raise TypeError(f"HyperParamSetterWithFunc: func must be callable as func(epoch_num, old_value), got {func!r}")
        self.f = func

    def _get_value_to_set(self) -> Any:
        return self.f(self.epoch_num, self.get_current_value())


class StatMonitorParamSetter(HyperParamSetter):
    """Change a hyperparameter when a statistic stops decreasing (or increasing) enough.

    On each trigger it takes the latest value of ``stat_name`` from the monitors (a value put at
    the same global step as the previous observation is not counted twice). Once it holds
    ``last_k`` observations (``history``), it sets ``new_value = value_func(old_value)`` if
    ``min(history) >= history[0] - threshold`` (``reverse=True``: if
    ``max(history) <= history[0] + threshold``), and then starts collecting a new history.

    The statistic must be produced at least as often as this callback is triggered, and by a
    callback that runs before this one.

    :param param: as in :class:`HyperParamSetter`.
    :param stat_name: the statistic's name in the monitors.
    :param value_func: ``new_value = value_func(old_value)``.
    :param threshold: the change threshold.
    :param last_k: the number of observations to look at.
    :param reverse: watch for increasing instead of decreasing.

    Example (decay the learning rate by 0.2 if the validation error did not decrease for 5 epochs)::

        StatMonitorParamSetter('learning_rate', 'val-error', lambda x: x * 0.2, threshold=0, last_k=5)
    """

    _enable_before_train = False

    def __init__(self, param: HyperParam | str, stat_name: str, value_func: Callable[[Any], Any], threshold: float,
                 last_k: int, reverse: bool = False) -> None:
        super().__init__(param)
        if not isinstance(stat_name, str) or not stat_name:
            raise TypeError(f"StatMonitorParamSetter: stat_name must be a statistic's name, got {stat_name!r}")
        if not callable(value_func):
            raise TypeError(f"StatMonitorParamSetter: value_func must be callable as value_func(old_value), got {value_func!r}")
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
            raise TypeError(f"StatMonitorParamSetter: threshold must be a number, got {threshold!r}")
        if isinstance(last_k, bool) or not isinstance(last_k, numbers.Integral) or last_k < 1:
            raise ValueError(f"StatMonitorParamSetter: last_k must be a positive integer, got {last_k!r}")
        self.stat_name = stat_name
        self.value_func = value_func
        self.threshold = float(threshold)
        self.last_k = int(last_k)
        self.reverse = bool(reverse)
        self.history: deque = deque(maxlen=self.last_k)

    def _get_value_to_set(self) -> Any:
        try:
            last = self.trainer.monitors.get_history(self.stat_name)[-1]
        except (KeyError, IndexError):
            logger.warning(f"[StatMonitorParamSetter] No history data available for '{self.stat_name}'.")
            return None
        if self.history and last[0] == self.history[-1][0]:
            logger.warning(f"[StatMonitorParamSetter] triggered, but no new value of '{self.stat_name}' "
                           "was put since the last time.")
            return None
        self.history.append((int(last[0]), float(last[1])))
        if len(self.history) < self.last_k:
            return None
        values = [v for _, v in self.history]
        first = values[0]
        if not self.reverse:
            if min(values) < first - self.threshold:  # decreased enough
                return None
        elif max(values) > first + self.threshold:  # increased enough
            return None
        self.history.clear()
        logger.info(f"[StatMonitorParamSetter] Triggered, history of {self.stat_name}: "
                    + ",".join(f"{v:.4g}" for v in values))
        return self.value_func(self.get_current_value())

    def _state_key_args(self) -> tuple:
        return (self.param.readable_name, self.stat_name)

    def _state_dict(self) -> dict:
        return {"history": [[s, v] for s, v in self.history]}

    def _load_state_dict(self, state: dict) -> None:
        self.history.clear()
        for s, v in state.get("history", []):
            self.history.append((int(s), float(v)))
