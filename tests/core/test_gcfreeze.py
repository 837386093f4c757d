"""trainbus moves the objects that exist once TensorFlow is imported into the garbage collector's
permanent generation, once per process (``trainbus._gcfreeze``): later full collections do not walk
them. Each case runs in a fresh interpreter: the decision is made once per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

PROBE = """
import gc, json, sys

def walked(obj):
    # whether the collector's generations (what a collection walks) hold obj
    return any(o is obj for o in gc.get_objects())

out = {}
"""


def _run(code: str, **env: str) -> dict:
    full = {k: v for k, v in os.environ.items() if k != "TRAINBUS_GC_FREEZE"}
    full.update(env)
    r = subprocess.run([sys.executable, "-c", PROBE + textwrap.dedent(code) + "\nprint(json.dumps(out))\n"],
                       capture_output=True, text=True, env=full, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_importing_trainbus_after_tensorflow_freezes_tensorflows_objects():
    out = _run("""
        import tensorflow as tf
        out["walked_before"] = walked(tf.compat.v1.Session)
        import trainbus
        out["frozen"] = gc.get_freeze_count()
        out["walked_after"] = walked(tf.compat.v1.Session)
        late = [[]]  # made after the freeze: collected as usual
        out["late_walked"] = walked(late)
        from trainbus import TrainConfig
        from trainbus.testing import TinyModel, tiny_dataflow
        TrainConfig(model=TinyModel(), dataflow=tiny_dataflow(), max_epoch=1, extra_callbacks=[], monitors=[])
        out["frozen_after_config"] = gc.get_freeze_count()
    """)
    assert out["walked_before"] is True and out["walked_after"] is False and out["late_walked"] is True
    assert out["frozen"] > 100_000  # TensorFlow's modules, registries, Keras
    # once per process: the TrainConfig froze nothing more (frozen objects freed since leave the count)
    assert out["frozen"] - 1000 < out["frozen_after_config"] <= out["frozen"]


def test_trainbus_imported_first_freezes_when_a_training_is_set_up():
    out = _run("""
        import trainbus
        out["at_import"] = gc.get_freeze_count()
        out["tf_imported"] = "tensorflow" in sys.modules
        import tensorflow as tf
        out["after_tf"] = gc.get_freeze_count()
        from trainbus import TrainConfig
        from trainbus.testing import TinyModel, tiny_dataflow
        TrainConfig(model=TinyModel(), dataflow=tiny_dataflow(), max_epoch=1, extra_callbacks=[], monitors=[])
        out["after_config"] = gc.get_freeze_count()
        out["walked"] = walked(tf.compat.v1.Session)
    """)
    assert out["at_import"] == 0 and out["tf_imported"] is False and out["after_tf"] == 0
    assert out["after_config"] > 100_000 and out["walked"] is False


def test_a_trainer_made_without_a_train_config_freezes_too():
    out = _run("""
        import trainbus
        import tensorflow as tf
        from trainbus.train import SimpleTrainer
        out["before"] = gc.get_freeze_count()
        SimpleTrainer()
        out["after"] = gc.get_freeze_count()
    """)
    assert out["before"] == 0 and out["after"] > 100_000


@pytest.mark.parametrize("setup, env", [("", {"TRAINBUS_GC_FREEZE": "0"}), ("gc.disable()", {})],
                         ids=["TRAINBUS_GC_FREEZE=0", "collector off"])
def test_no_freeze_when_asked_or_when_the_collector_is_off(setup, env):
    out = _run(f"""
        {setup}
        import tensorflow as tf
        import trainbus
        from trainbus import TrainConfig
        from trainbus.testing import TinyModel, tiny_dataflow
        TrainConfig(model=TinyModel(), dataflow=tiny_dataflow(), max_epoch=1, extra_callbacks=[], monitors=[])
        out["frozen"] = gc.get_freeze_count()
    """, **env)
    assert out["frozen"] == 0
