"""ModelSaver continuing the checkpoint list an earlier run left in its directory: the saved
timestamps are kept (a list with fewer timestamps than checkpoints is completed with the time
the run starts), and a checkpoint whose name has no step, or step 0, is not "from a later step"
than a run starting at step 0."""

from __future__ import annotations

import os
import shutil
import time

import trainbus.callbacks as C
from trainbus.testing import train_tiny


def _state(d, latest, paths, stamps) -> None:
    lines = [f'model_checkpoint_path: "{latest}"']
    lines += [f'all_model_checkpoint_paths: "{p}"' for p in paths]
    lines += [f"all_model_checkpoint_timestamps: {t!r}" for t in stamps]
    (d / "checkpoint").write_text("\n".join(lines) + "\n")


def _listed(d):
    from trainbus import plugin_api

    st = plugin_api.tf().train.get_checkpoint_state(str(d))
    return [os.path.basename(p) for p in st.all_model_checkpoint_paths], list(st.all_model_checkpoint_timestamps)


def test_saved_timestamps_are_kept_and_missing_ones_are_the_start_time(tmp_path):
    d = tmp_path / "ck"
    train_tiny([C.ModelSaver(checkpoint_dir=str(d))], max_epoch=3, steps_per_epoch=2)
    assert _listed(d)[0] == ["model-2", "model-4", "model-6"]
    # an earlier run's list: three checkpoints, but timestamps for the first two only
    _state(d, "model-6", ["model-2", "model-4", "model-6"], [111.0, 222.0])
    t0 = time.time()
    train_tiny([C.ModelSaver(checkpoint_dir=str(d))], max_epoch=1, steps_per_epoch=8)
    t1 = time.time()
    paths, stamps = _listed(d)
    assert paths == ["model-2", "model-4", "model-6", "model-8"]
    assert stamps[:2] == [111.0, 222.0]  # as they were saved
    assert t0 <= stamps[2] <= t1 and t0 <= stamps[3] <= t1, (t0, stamps, t1)


def test_checkpoints_without_a_step_or_at_step_0_are_not_later_than_step_0(tmp_path, tb_log):
    d = tmp_path / "ck"
    train_tiny([C.ModelSaver(checkpoint_dir=str(d))], max_epoch=1, steps_per_epoch=2)
    for f in os.listdir(d):  # the same checkpoint under a name without a step, and as step 0
        if f.startswith("model-2."):
            shutil.copy(d / f, d / f.replace("model-2", "model"))
            shutil.copy(d / f, d / f.replace("model-2", "model-0"))
    assert (d / "model.index").is_file() and (d / "model-0.index").is_file()
    _state(d, "model-0", ["model", "model-0"], [111.0, 222.0])
    tb_log.clear()
    train_tiny([C.ModelSaver(checkpoint_dir=str(d))], max_epoch=1, steps_per_epoch=2)
    assert _listed(d)[0] == ["model", "model-0", "model-2"]
    said = [r.getMessage() for r in tb_log]
    assert not [m for m in said if "later global step" in m], said
