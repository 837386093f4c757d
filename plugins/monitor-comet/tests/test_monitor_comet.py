"""CometMLMonitor: real ``comet_ml`` offline experiments (no network), whose ``.zip`` archive is
opened and searched for what the training logged."""

from __future__ import annotations

import glob
import json
import os
import zipfile

import numpy as np
import pytest

from lazymod import lazy  # tests/_support

import trainbus.callbacks
from trainbus.callbacks import Callback
from trainbus.testing import train_tiny

# comet_ml (this plugin's dependency) takes half a second to import: only the worker that runs
# these tests imports it
comet_ml = lazy("comet_ml")


class PutStats(Callback):
    def _trigger(self):
        e = self.trainer.epoch_num
        self.trainer.monitors.put_scalar("val_cost", 1.5 / e)
        self.trainer.monitors.put_image("sample", np.full((4, 5, 3), 30 * e, dtype=np.uint8))


def read_archive(directory):
    zips = glob.glob(os.path.join(str(directory), "*.zip"))
    assert len(zips) == 1, f"expected one offline archive in {directory}, found {zips}"
    with zipfile.ZipFile(zips[0]) as z:
        names = z.namelist()
        experiment = json.loads(z.read("experiment.json"))
        messages = []
        for line in z.read("messages.json").decode("utf-8").splitlines():
            if line.strip():
                messages.append(json.loads(line))
    return names, experiment, messages


def find_payloads(messages, key):
    """Every dict (at any depth) of the messages that has ``key``."""
    out = []

    def walk(x):
        if isinstance(x, dict):
            if key in x:
                out.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(messages)
    return out


def test_offline_experiment_archive_holds_metrics_images_graph(logdir, tmp_path):
    exp = comet_ml.OfflineExperiment(offline_directory=str(tmp_path / "comet"), auto_output_logging=None,
                                     auto_param_logging=False, log_code=False, log_env_details=False, log_git_metadata=False,
                                     log_git_patch=False, display_summary_level=0)
    mon = trainbus.callbacks.CometMLMonitor(experiment=exp)
    assert mon.experiment is exp
    train_tiny(callbacks=[PutStats()], monitors=[mon], max_epoch=3, steps_per_epoch=2)
    names, experiment, messages = read_archive(tmp_path / "comet")
    metrics = [(m["metricName"], m["metricValue"], m.get("step")) for m in find_payloads(messages, "metricName")]
    got = [(v, s) for n, v, s in metrics if n == "val_cost"]
    assert [(float(v), int(s)) for v, s in got] == [(1.5, 2), (0.75, 4), (0.5, 6)]
    # the epoch ends reached comet too: each metric carries its epoch
    assert [m["epoch"] for m in find_payloads(messages, "metricName") if m["metricName"] == "val_cost"] == [1, 2, 3]
    # images: one per epoch, as PNG files inside the archive
    images = [m for m in find_payloads(messages, "figName") if m["figName"].startswith("sample_step")]
    assert [m["figName"] for m in images] == ["sample_step2", "sample_step4", "sample_step6"]
    files = [p["file_path"] for p in find_payloads(messages, "file_path") if "additional_params" in p
             and p["additional_params"].get("figName", "").startswith("sample_step")]
    assert len(files) == 3
    import io

    from PIL import Image

    with zipfile.ZipFile(glob.glob(os.path.join(str(tmp_path / "comet"), "*.zip"))[0]) as z:
        last = np.asarray(Image.open(io.BytesIO(z.read(files[-1]))).convert("RGB"))
    assert last.shape == (4, 5, 3) and (last == 90).all()
    graphs = find_payloads(messages, "graph")
    assert graphs and "cost" in str(graphs[0]["graph"])


def test_kwargs_make_an_experiment_with_auto_output_logging_off_and_tags(logdir, tmp_path):
    mon = trainbus.callbacks.CometMLMonitor(tags=["tiny", "trainbus"], offline_directory=str(tmp_path / "c2"),
                                            log_code=False, log_env_details=False, log_git_metadata=False,
                                            log_git_patch=False, display_summary_level=0)
    assert isinstance(mon.experiment, comet_ml.OfflineExperiment)
    assert not mon.experiment.auto_output_logging  # disabled by default: it freezes progress bars
    train_tiny(callbacks=[PutStats()], monitors=[mon], max_epoch=1, steps_per_epoch=1)
    _, experiment, messages = read_archive(tmp_path / "c2")
    assert sorted(experiment["tags"]) == ["tiny", "trainbus"]
    assert [m["metricValue"] for m in find_payloads(messages, "metricName") if m["metricName"] == "val_cost"] == [1.5]


def test_experiment_excludes_other_arguments(tmp_path):
    exp = comet_ml.OfflineExperiment(offline_directory=str(tmp_path), display_summary_level=0, log_code=False)
    try:
        with pytest.raises(ValueError, match="tags, project_name cannot be combined"):
            trainbus.callbacks.CometMLMonitor(experiment=exp, tags=["x"], project_name="p")
    finally:
        exp.end()


def test_conformance():
    from trainbus.testing import check_distribution

    check_distribution("trainbus-monitor-comet")


def test_a_missing_comet_ml_names_the_package_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "comet_ml", None)  # import comet_ml raises ImportError
    with pytest.raises(ImportError) as err:
        trainbus.callbacks.CometMLMonitor(offline_directory="unused")
    msg = str(err.value)
    assert "CometMLMonitor needs the comet_ml package" in msg and msg.endswith("pip install comet_ml")
    assert "trainbus-monitor-comet" not in msg
