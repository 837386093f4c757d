"""Training script of the tests that signal a run before its first step
(``test_rel_interrupt_setup.py``): ``launch_train_with_config`` with a model, a callback or a
session initializer that writes ``--waiting`` and then waits (for a file nobody writes, or
blocked inside a TensorFlow ``Session.run``) at the chosen place.

    python rel_setup_script.py --logdir D --waiting W --wait graph|callback|sessinit|graph-blocked|none
"""

from __future__ import annotations

import argparse
import os
import sys
import time

WAIT_LIMIT = 600  # seconds: a wait nobody ends is an error, not a hang


def _write(path: str, text: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _wait_here(waiting: str, where: str) -> None:
    """Write ``waiting``, then wait (in Python, between short sleeps) until a signal ends it."""
    _write(waiting, f"{where}\n")
    end = time.monotonic() + WAIT_LIMIT
    while time.monotonic() < end:
        time.sleep(0.05)
    raise RuntimeError(f"rel_setup_script: nobody signalled the run while it waited in {where}")


def _block_in_tensorflow(waiting: str) -> None:
    """Block inside TensorFlow (a dequeue from an empty queue in a separate graph), where Python
    signal handlers cannot run until it returns, and write ``waiting`` once it is blocked there."""
    import threading

    import tensorflow as tf

    tf1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        q = tf1.FIFOQueue(1, [tf.float32])
        take = q.dequeue()
    main = threading.get_ident()

    def announce() -> None:
        # written only once the main thread has stayed at the same instruction of TensorFlow's
        # call into its C++ session for a while: a signal sent earlier could still reach the
        # Python handler (on a loaded machine, the process may pause just before the call)
        last = None
        end = time.monotonic() + WAIT_LIMIT
        while time.monotonic() < end:
            f = sys._current_frames().get(main)
            here = (f.f_code.co_name, f.f_lasti) if f is not None else None
            if here is not None and here[0] == "_call_tf_sessionrun" and here == last:
                _write(waiting, "graph-blocked\n")
                return
            last = here
            time.sleep(0.05)

    threading.Thread(target=announce, name="announce-blocked", daemon=True).start()
    with tf1.Session(graph=g) as sess:
        sess.run(take, options=tf1.RunOptions(timeout_in_ms=WAIT_LIMIT * 1000))
    raise RuntimeError("rel_setup_script: the blocked dequeue returned")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--logdir", required=True)
    p.add_argument("--logdir-action", default="k")
    p.add_argument("--waiting", required=True, help="file written when the run starts to wait")
    p.add_argument("--wait", default="graph", choices=["graph", "graph-blocked", "callback", "sessinit", "none"])
    p.add_argument("--finally-marker", help="file the script's own finally block (around training) writes")
    p.add_argument("--resume", action="store_true", help="AutoResumeTrainConfig in the log directory")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--catch", action="store_true", help="catch TrainingInterrupted and print the script's own line")
    a = p.parse_args()

    from trainbus.callbacks import ModelSaver
    from trainbus.callbacks.base import Callback
    from trainbus.testing import TinyModel, tiny_dataflow
    from trainbus.tfutils.sessinit import SessionInit
    from trainbus.train import (AutoResumeTrainConfig, SimpleTrainer, TrainConfig, TrainingInterrupted,
                                launch_train_with_config)
    from trainbus.utils import logger

    logger.set_logger_dir(a.logdir, action=a.logdir_action)

    class Model(TinyModel):
        def build_graph(self, x, y):
            cost = super().build_graph(x, y)
            if a.wait == "graph":
                _wait_here(a.waiting, "build_graph")
            elif a.wait == "graph-blocked":
                _block_in_tensorflow(a.waiting)
            return cost

    class WaitingCallback(Callback):
        def _setup_graph(self):
            if a.wait == "callback":
                _wait_here(a.waiting, "callback")

    class WaitingInit(SessionInit):
        def _run_init(self, sess):
            if a.wait == "sessinit":
                _wait_here(a.waiting, "sessinit")

    kw = dict(model=Model(), dataflow=tiny_dataflow(n=16, batch=4), steps_per_epoch=4, max_epoch=a.epochs,
              callbacks=[WaitingCallback(), ModelSaver(max_to_keep=2)], monitors=[])
    if a.resume:
        cfg = AutoResumeTrainConfig(always_resume=True, **kw)
    else:
        cfg = TrainConfig(session_init=WaitingInit(), **kw)
    try:
        if a.catch:
            try:
                launch_train_with_config(cfg, SimpleTrainer())
            except TrainingInterrupted as e:
                print(f"script: caught {type(e).__name__} {e.signame} {e.exit_code}", file=sys.stderr)
                sys.exit(3)
        else:
            launch_train_with_config(cfg, SimpleTrainer())
    finally:
        if a.finally_marker:
            _write(a.finally_marker, "finally\n")


if __name__ == "__main__":
    main()
