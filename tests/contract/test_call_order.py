"""The full hook sequence of a run, pinned: callbacks are called in the order given, at every
event (pluggy's last-registered-first order must never leak)."""

from trainbus.testing import HookRecorder, RecordingMonitor, train_tiny

STEP = ["before_run", "after_run", "trigger_step"]


def expected_sequence(tags, epochs, steps):
    seq = []

    def each(hook, epoch, gs, ls):
        seq.extend((t, hook, epoch, gs, ls) for t in tags)

    each("setup_graph", 0, 0, -1)
    each("before_train", 0, 0, -1)
    gs = 0
    for ep in range(1, epochs + 1):
        each("before_epoch", ep, gs, -1 if ep == 1 else steps - 1)
        for ls in range(steps):
            each("before_run", ep, gs, ls)
            gs += 1
            each("after_run", ep, gs, ls)
            each("trigger_step", ep, gs, ls)
        each("after_epoch", ep, gs, steps - 1)
        for t in tags:
            seq.append((t, "trigger_epoch", ep, gs, steps - 1))
            seq.append((t, "trigger", ep, gs, steps - 1))
    each("after_train", epochs, gs, steps - 1)
    return seq


def test_full_hook_sequence_in_given_order():
    sink = []
    tags = ["A", "B", "C", "D"]
    recs = [HookRecorder(t, sink) for t in tags]
    train_tiny(recs, max_epoch=2, steps_per_epoch=3)
    assert sink == expected_sequence(tags, 2, 3)


def test_order_is_the_list_order_not_registration_order_reversed():
    sink = []
    recs = [HookRecorder(t, sink) for t in ["z", "a", "m"]]
    train_tiny(recs, max_epoch=1, steps_per_epoch=1)
    for hook in ["setup_graph", "before_train", "before_run", "after_run", "trigger_epoch", "after_train"]:
        assert [e[0] for e in sink if e[1] == hook] == ["z", "a", "m"], hook


def test_monitors_run_after_callbacks_and_receive_puts_in_order():
    sink = []
    from trainbus.callbacks import Callback

    class Putter(Callback):
        def _trigger(self):
            sink.append(("putter", "trigger"))
            self.trainer.monitors.put_scalar("val", 1.5)

    class M(RecordingMonitor):
        def __init__(self, tag):
            super().__init__()
            self.tag = tag

        def process_scalar(self, name, val):
            sink.append((self.tag, name, val))

        def _trigger(self):
            sink.append((self.tag, "trigger"))

    tr = train_tiny([Putter()], monitors=[M("m1"), M("m2")], max_epoch=1, steps_per_epoch=1)
    assert sink == [("putter", "trigger"), ("m1", "val", 1.5), ("m2", "val", 1.5), ("m1", "trigger"), ("m2", "trigger")]
    assert tr.monitors.get_history("val") == [(1, 1.5)]
    assert tr.monitors.get_latest("val") == 1.5


def test_idle_callbacks_register_no_per_step_hooks():
    from trainbus.callbacks import Callback

    class EpochOnly(Callback):
        def _trigger(self):
            pass

    rec = HookRecorder()
    tr = train_tiny([EpochOnly(), rec], max_epoch=1, steps_per_epoch=1)
    pm = tr.plugin_manager
    for hook in ("before_run", "after_run", "trigger_step"):
        assert [i.plugin_name for i in pm.hook.__dict__[hook].get_hookimpls()] == ["callback[2]:HookRecorder"], hook
    assert "callback[1]:EpochOnly" in tr.describe_hooks().split("trigger_epoch: ")[1].split("\n")[0]


def test_cli_order_prints_effective_order(tmp_path):
    import sys

    import zygote  # tests/_support

    (tmp_path / "mycfg.py").write_text(
        "from trainbus.testing import HookRecorder\n"
        "from trainbus.callbacks import PeriodicTrigger\n"
        "def callbacks():\n"
        "    return [HookRecorder('first'), PeriodicTrigger(HookRecorder('second'), every_k_steps=5)]\n")
    # forked from the worker's zygote (tests/_support/zygote.py): `trainbus order` imports TensorFlow
    out = zygote.run([sys.executable, "-m", "trainbus", "order", "mycfg:callbacks"], cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(": ", 1) for line in out.stdout.strip().splitlines())
    assert lines["before_run"] == "callback[0]:HookRecorder -> callback[1]:PeriodicTrigger-HookRecorder"
    assert lines["trigger_epoch"] == "callback[0]:HookRecorder"  # the periodic one is step-scheduled
    assert lines["trigger_step"].startswith("callback[0]:HookRecorder -> callback[1]:PeriodicTrigger")
