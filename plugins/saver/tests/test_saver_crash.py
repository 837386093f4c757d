"""trainbus-saver: a process killed in the middle of a save leaves readable checkpoints."""

from __future__ import annotations

import os
import sys
import textwrap

import tensorflow as tf
import zygote  # tests/_support

SCRIPT = textwrap.dedent("""
    import os, sys
    from trainbus.utils import logger
    import trainbus.callbacks as C
    import trainbus.checkpoint as saver_mod
    from trainbus.testing import train_tiny

    logger.set_logger_dir(sys.argv[1], action="k")
    real = saver_mod.atomic_write_text
    calls = []

    def dying_state_write(path, text):
        if os.path.basename(path) == "checkpoint":
            calls.append(path)
        if os.path.basename(path) == "checkpoint" and len(calls) > 1:
            # the second state update: die after writing half of a temporary file, before any rename
            with open(path + ".partial-tmp", "w") as f:
                f.write(text[: len(text) // 2])
            os._exit(3)
        real(path, text)

    saver_mod.atomic_write_text = dying_state_write
    train_tiny(callbacks=[C.ModelSaver()], max_epoch=3)
""")


def test_crash_during_the_state_update_keeps_the_previous_checkpoint(tmp_path):
    d = tmp_path / "log"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TRAINBUS_DISABLE_PLUGIN_AUTOLOAD="1")
    # forked from the worker's zygote (tests/_support/zygote.py): a process of its own that dies mid-save
    proc = zygote.run([sys.executable, "-c", SCRIPT, str(d)], env=env, timeout=240)
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    # model-16's files were written, but the state file was never switched to it
    assert os.path.isfile(d / "model-16.index")
    state = tf.train.get_checkpoint_state(str(d))
    assert os.path.basename(state.model_checkpoint_path) == "model-8"
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["model-8"]
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(d)))
    assert reader.get_tensor("global_step") == 8
    assert reader.get_tensor("W").shape == (4, 3)
