"""Kill trainings with SIGKILL at random moments (run by test_rel_crash.py in a subprocess).

This process imports TensorFlow and the plugins once and creates no session; each training
runs in a forked child (cheap: no new interpreter), which is SIGKILLed at a random moment,
and the next child resumes in the same directory with ``AutoResumeTrainConfig``. The moment is
chosen by progress, not by the clock alone: the child holds after a random number of steps (0 to
5: up to 3 epochs), then goes on and is killed a random part of its longest step's time later
(a checkpoint's write, a stats write, ...). So the kills land at the same spread of places on a
loaded machine as on a quiet one.

Usage: python rel_killer.py ROOT LINEAGES KILLS_PER_LINEAGE SEED  -> writes ROOT/report.json
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow  # noqa: E402,F401 - imported once, before forking

import trainbus.callbacks as C  # noqa: E402
from trainbus.input_source import FeedInput  # noqa: E402
from trainbus.testing import TinyModel, tiny_dataflow  # noqa: E402
from trainbus.bus.manager import TrainbusPluginManager  # noqa: E402
from trainbus.train import AutoResumeTrainConfig, SimpleTrainer, TrainConfig  # noqa: E402
from trainbus.utils import logger  # noqa: E402

from tensorboard.backend.event_processing import event_accumulator  # noqa: E402,F401

for _name in ("ModelSaver", "JSONWriter", "TFEventWriter", "ScalarPrinter"):
    getattr(C, _name)  # resolve (import) the plugins before forking


class _Hold(C.Callback):
    """Holds the training at a chosen point until the parent says go: once the loop starts
    (``at=0``) or once step ``at`` and its triggers are done. It then writes, on ``out``, the
    longest time a step and its triggers took so far, the run's first step left out (it holds
    the session's first run); 0 if no other step ran. Then it waits for a byte on ``go``. The files on
    disk are what that point of the run left; the parent kills the run a random time after go.
    ``at=None``: never held."""

    def __init__(self, out: int, go: int, at: int | None) -> None:
        self.out, self.go, self.at = out, go, at
        self.steps, self.longest, self._last = 0, 0.0, None

    def _hold(self) -> None:
        os.write(self.out, f"{self.longest:.6f}\n".encode())
        os.read(self.go, 1)
        self._last = time.monotonic()

    def _before_train(self) -> None:
        self._last = time.monotonic()
        if self.at == 0:
            self._hold()

    def _trigger_step(self) -> None:
        now = time.monotonic()
        self.steps += 1
        if self.steps > 1:
            self.longest = max(self.longest, now - self._last)
        self._last = now
        if self.steps == self.at:
            self._hold()


class _EpochScalar(C.Callback):
    """Puts one scalar per epoch, so that stats.json gets a record every epoch."""

    def _trigger_epoch(self) -> None:
        self.trainer.monitors.put_scalar("epoch_marker", float(self.epoch_num))


def build_trainer() -> tuple[SimpleTrainer, TrainConfig]:
    """The graph is built here, before forking: the children only create sessions."""
    model = TinyModel()
    data = FeedInput(tiny_dataflow(n=8, batch=4))
    trainer = SimpleTrainer()
    trainer.setup_graph(model.get_input_signature(), data, model.build_graph, model.get_optimizer)
    return trainer


def verify(logdir: str) -> dict:
    """What a killed run left in ``logdir``: every file must be readable."""
    import glob

    import tensorflow as tf
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    res: dict = {"logdir": logdir, "errors": []}
    if not os.path.isdir(logdir):
        return res
    latest, listed = None, os.path.exists(os.path.join(logdir, "checkpoint"))
    if listed:
        latest = tf.train.latest_checkpoint(logdir)
    else:
        # killed after the first checkpoint's files were written and before the checkpoint list
        # was: the resumed run finds that checkpoint by its file names (AutoResumeTrainConfig)
        # and restores it. Its callback states were never committed: it has no side file
        indexes = glob.glob(os.path.join(logdir, "model-*.index"))
        if indexes:
            latest = max(indexes, key=lambda f: int(f[:-len(".index")].rsplit("-", 1)[1]))[:-len(".index")]
            res["ckpt_unlisted"] = True
    if latest is not None:
        try:
            reader = tf.train.load_checkpoint(latest)
            res["ckpt_step"] = int(reader.get_tensor("global_step"))
            for name in ("W", "b"):
                reader.get_tensor(name)
            if listed:
                with open(latest + ".trainbus.json") as f:
                    json.load(f)
        except Exception as e:  # noqa: BLE001
            res["errors"].append(f"checkpoint {latest}: {type(e).__name__}: {e}")
    if os.path.exists(os.path.join(logdir, "stats.json")):
        try:
            with open(os.path.join(logdir, "stats.json")) as f:
                epochs = [r["epoch_num"] for r in json.load(f) if "epoch_marker" in r]
            res["stats_epochs"] = epochs
            # consecutive, each once (the first record may be epoch 2: see test_rel_crash.py)
            if not epochs or epochs[0] not in (1, 2) or epochs != list(range(epochs[0], epochs[0] + len(epochs))):
                res["errors"].append(f"stats.json epochs are not consecutive from 1 (or 2): {epochs}")
        except Exception as e:  # noqa: BLE001
            res["errors"].append(f"stats.json: {type(e).__name__}: {e}")
    events = sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*")))
    res["event_files"] = len(events)
    for ev in events:
        try:
            acc = EventAccumulator(ev)
            acc.Reload()
            acc.Tags()
        except Exception as e:  # noqa: BLE001
            res["errors"].append(f"{ev}: {type(e).__name__}: {e}")
    return res


def train_child(trainer: SimpleTrainer, logdir: str, max_epoch: int, hold: _Hold) -> None:
    rec = verify(logdir)
    with open(os.path.join(os.path.dirname(logdir), "verify.jsonl"), "a") as f:
        f.write(json.dumps(rec) + "\n")
        f.flush()
        os.fsync(f.fileno())
    logger.set_logger_dir(logdir, action="k")
    cfg = AutoResumeTrainConfig(
        callbacks=[C.ModelSaver(max_to_keep=2), hold, _EpochScalar()], extra_callbacks=[],
        monitors=[C.JSONWriter(), C.TFEventWriter()], steps_per_epoch=2, max_epoch=max_epoch)
    trainer.train_with_config(cfg)


def run_child(trainer: SimpleTrainer, logdir: str, max_epoch: int, hold_at: int | None) -> tuple[int, int, int]:
    """Fork a training of ``logdir``, held at step ``hold_at`` (see :class:`_Hold`); returns its
    pid, the pipe it says it is held on and the pipe that lets it go."""
    out_r, out_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(out_r)
            os.close(go_w)
            sys.stdout = open(os.devnull, "w")
            train_child(trainer, logdir, max_epoch, _Hold(out_w, go_r, hold_at))
        except BaseException as e:  # noqa: BLE001
            with open(os.path.join(os.path.dirname(logdir), "child-errors.txt"), "a") as f:
                f.write(f"{logdir}: {type(e).__name__}: {e}\n")
            code = 1
        finally:
            os._exit(code)
    os.close(out_w)
    os.close(go_r)
    return pid, out_r, go_w


def _held(r: int) -> float | None:
    """The longest step time the held child reports; None if it ended (or said nothing for a
    minute) before getting there."""
    ready, _, _ = select.select([r], [], [], 60)
    line = os.read(r, 64) if ready else b""
    return float(line) if line.strip() else None


def main() -> None:
    root, lineages, kills, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    trainer = build_trainer()
    TrainbusPluginManager().load_ambient()  # import the ambient plugins once, before forking
    report = {"kills": [], "finals": []}
    typical = None  # the longest step (after a run's first) that a held run reported last
    for k in range(kills):
        for li in range(lineages):
            logdir = os.path.join(root, f"lineage{li}")
            steps, part = rng.randrange(0, 6), rng.uniform(0.0, 1.0)  # up to 3 epochs of 2 steps
            pid, r, go = run_child(trainer, logdir, 10000, steps)
            longest = _held(r)
            typical = longest or typical
            try:
                os.write(go, b"g")
            except BrokenPipeError:  # it ended before the hold: its error is in child-errors.txt
                pass
            # a random part of the longest step seen (with a checkpoint's write when an epoch
            # ended in it): what this run measured, else what an earlier run did
            time.sleep(part * (typical or 0.05))
            os.kill(pid, signal.SIGKILL)
            os.close(r)
            os.close(go)
            _, status = os.waitpid(pid, 0)
            report["kills"].append({"lineage": li, "steps": steps, "part": part,
                                    "killed": os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL})
    # a last run per lineage verifies the files, resumes once more and finishes two more epochs
    for li in range(lineages):
        logdir = os.path.join(root, f"lineage{li}")
        last = 0
        if os.path.exists(os.path.join(logdir, "stats.json")):
            with open(os.path.join(logdir, "stats.json")) as f:
                last = json.load(f)[-1]["epoch_num"]
        pid, r, go = run_child(trainer, logdir, last + 2, None)
        os.close(r)
        os.close(go)
        _, status = os.waitpid(pid, 0)
        report["finals"].append({"lineage": li, "exit": os.waitstatus_to_exitcode(status), "max_epoch": last + 2})
    with open(os.path.join(root, "report.json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()
