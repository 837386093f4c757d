"""``trainbus.compose``: callbacks, monitors, trainers and session initializers built from their
registered names, with arguments checked against the signature before anything is called."""

from __future__ import annotations

import json

import pytest

import trainbus
from trainbus import compose
from trainbus.bus import registry as _registry
from trainbus.testing import train_tiny


def test_components_by_name_train_for_real(logdir) -> None:
    saver = compose.callback("ModelSaver", max_to_keep=1)
    writer = compose.monitor("JSONWriter")
    trainer = compose.trainer("SimpleTrainer")
    assert type(saver) is trainbus.callbacks.ModelSaver and saver is not None
    merge = compose.callback("MergeAllSummaries")  # a factory function, composed by name too
    train_tiny(callbacks=[saver], extra_callbacks=[merge], monitors=[writer], trainer=trainer, max_epoch=2,
               steps_per_epoch=3)
    assert sorted(p.name for p in logdir.glob("model-*.index")) == ["model-6.index"]
    assert [s["epoch_num"] for s in json.loads((logdir / "stats.json").read_text())] == [1, 2]


def test_build_by_group_and_core_names() -> None:
    inner = compose.build("trainbus.callbacks", "ModelSaver", max_to_keep=3)
    periodic = compose.build("trainbus.callbacks", "PeriodicTrigger", inner, every_k_epochs=2)
    assert type(periodic).__name__ == "PeriodicTrigger"
    assert compose.provider_of("callback", "ModelSaver") == "trainbus-saver 0.1.0"
    assert compose.provider_of("callback", "PeriodicTrigger") == f"trainbus {trainbus.__version__} (core)"
    assert {"ModelSaver", "PeriodicTrigger", "JSONWriter"} <= set(compose.available("callback"))
    assert "SimpleTrainer" in compose.available("trainbus.train")


def test_misspelt_argument_names_the_parameter_and_accepted_ones() -> None:
    with pytest.raises(compose.ComponentArgumentError) as err:
        compose.callback("ModelSaver", max_to_kep=2)
    msg = str(err.value)
    assert msg.startswith("ModelSaver: the arguments do not fit ModelSaver(")
    assert "'max_to_kep' is not a parameter (did you mean 'max_to_keep'?)" in msg
    assert "max_to_keep" in msg.split("Accepted parameters:")[1]
    assert isinstance(err.value, TypeError)


def test_missing_required_argument() -> None:
    with pytest.raises(compose.ComponentArgumentError, match="missing a required argument: 'triggerable'"):
        compose.callback("PeriodicTrigger", every_k_steps=2)


def test_unknown_name_suggests_close_ones() -> None:
    with pytest.raises(compose.UnknownComponentError) as err:
        compose.callback("ModelSavr")
    assert "no installed distribution provides trainbus.callbacks.ModelSavr. Did you mean ModelSaver" in str(err.value)
    assert isinstance(err.value, AttributeError)
    with pytest.raises(compose.UnknownComponentError, match="Did you mean SimpleTrainer"):
        compose.trainer("SimpleTrainr")


def test_missing_first_party_plugin_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setitem(_registry.KNOWN_PROVIDERS["trainbus.callbacks"], "GradientNoiseInjector", "trainbus-noise")
    with pytest.raises(compose.MissingPluginError) as err:
        compose.callback("GradientNoiseInjector", scale=0.1)
    assert isinstance(err.value, ModuleNotFoundError)
    assert "provided by the 'trainbus-noise' distribution, which is not installed" in str(err.value)
    assert "pip install trainbus-noise" in str(err.value)


def test_kind_is_checked() -> None:
    with pytest.raises(compose.ComponentArgumentError, match="not a MonitorBase"):
        compose.monitor("ModelSaver")
    with pytest.raises(ValueError, match="unknown component group 'callbackz'"):
        compose.build("callbackz", "ModelSaver")
