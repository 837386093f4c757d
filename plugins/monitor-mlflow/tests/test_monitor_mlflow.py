"""MLflowMonitor: real training runs logged to a local ``sqlite:///`` tracking store, read back
through ``MlflowClient``."""

from __future__ import annotations

import numpy as np
import pytest

from lazymod import lazy  # tests/_support

import trainbus.callbacks
from trainbus.callbacks import Callback
from trainbus.testing import train_tiny

# mlflow takes over a second to import: only the worker that runs these tests imports it
# (mlflow-skinny is this plugin's dependency; the sqlite store needs trainbus-monitor-mlflow[sql])
mlflow = lazy("mlflow")


class PutStats(Callback):
    def _trigger_step(self):
        self.trainer.monitors.put_scalar("train/step_cost", 0.1 * self.trainer.global_step)

    def _trigger(self):
        e = self.trainer.epoch_num
        self.trainer.monitors.put_scalar("val-error", 1.0 / e)
        self.trainer.monitors.put_scalar("odd|name", e)
        self.trainer.monitors.put_image("sample", np.full((3, 4, 3), 50 * e, dtype=np.uint8))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One tracking database for the module (creating one runs MLflow's migrations: seconds)."""
    d = tmp_path_factory.mktemp("mlflow")
    return f"sqlite:///{d / 'mlflow.db'}", str(d / "artifacts")


def test_metrics_images_and_run_read_back_from_sqlite_store(logdir, store):
    uri, art = store
    mon = trainbus.callbacks.MLflowMonitor(tracking_uri=uri, experiment_name="tiny", run_name="r1",
                                           tags={"team": "trainbus"}, params={"lr": 0.1, "model": "TinyModel"},
                                           artifact_location=art)
    train_tiny(callbacks=[PutStats()], monitors=[mon], max_epoch=3, steps_per_epoch=2)
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("tiny")
    runs = client.search_runs([exp.experiment_id])
    assert [r.info.run_id for r in runs] == [mon.run_id]
    run = runs[0]
    assert run.info.run_name == "r1" and run.info.status == "FINISHED"
    assert run.data.tags["team"] == "trainbus"
    assert run.data.params == {"lr": "0.1", "model": "TinyModel"}
    hist = client.get_metric_history(mon.run_id, "val-error")
    assert sorted((m.step, m.value) for m in hist) == [(2, 1.0), (4, 0.5), (6, pytest.approx(1 / 3))]
    steps = client.get_metric_history(mon.run_id, "train/step_cost")
    assert sorted((m.step, round(m.value, 6)) for m in steps) == [(s, round(0.1 * s, 6)) for s in range(1, 7)]
    # a name MLflow refuses is logged with the bad character replaced
    assert sorted((m.step, m.value) for m in client.get_metric_history(mon.run_id, "odd_name")) == [
        (2, 1.0), (4, 2.0), (6, 3.0)]
    # images went to the run's artifacts
    listed = [f.path for f in client.list_artifacts(mon.run_id, "images")]
    assert listed, "no image artifact"
    files = [f.path for d in listed for f in client.list_artifacts(mon.run_id, d)] + listed
    assert any("sample" in p for p in files), files


def test_continue_an_existing_run(logdir, store):
    uri, art = store
    first = trainbus.callbacks.MLflowMonitor(tracking_uri=uri, experiment_name="tiny-continued",
                                             artifact_location=art, log_images=False)
    assert "process_image" not in first.hooks_used()
    train_tiny(callbacks=[PutStats()], monitors=[first], max_epoch=1, steps_per_epoch=1)
    again = trainbus.callbacks.MLflowMonitor(tracking_uri=uri, run_id=first.run_id, log_images=False)
    train_tiny(callbacks=[PutStats()], monitors=[again], max_epoch=2, steps_per_epoch=1)
    client = mlflow.MlflowClient(tracking_uri=uri)
    assert again.run_id == first.run_id
    values = sorted((m.step, m.value) for m in client.get_metric_history(first.run_id, "val-error"))
    assert values == [(1, 1.0), (1, 1.0), (2, 0.5)]  # both runs' points, in one MLflow run
    assert client.get_run(first.run_id).info.status == "FINISHED"
    assert not client.list_artifacts(first.run_id)


def test_bad_arguments_are_rejected_at_construction(store):
    uri, _ = store
    with pytest.raises(ValueError, match="leave out experiment_name and run_name"):
        trainbus.callbacks.MLflowMonitor(tracking_uri=uri, run_id="abc", run_name="x")
    with pytest.raises(TypeError, match="tags"):
        trainbus.callbacks.MLflowMonitor(tracking_uri=uri, tags=["a"])
    with pytest.raises(TypeError, match="experiment_name"):
        trainbus.callbacks.MLflowMonitor(tracking_uri=uri, experiment_name="")


def test_conformance():
    from trainbus.testing import check_distribution

    check_distribution("trainbus-monitor-mlflow")


def test_a_missing_mlflow_names_the_package_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow raises ImportError
    with pytest.raises(ImportError) as err:
        trainbus.callbacks.MLflowMonitor()
    msg = str(err.value)
    assert "MLflowMonitor needs the mlflow package" in msg and msg.endswith("pip install mlflow-skinny (or the full mlflow)")
    assert "trainbus-monitor-mlflow" not in msg
