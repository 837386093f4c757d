"""The global step a training starts from, when the trainer knows it without reading it.

Right after a local ``NewSessionCreator`` initialized the variables and nothing was restored,
the global step is its initializer's constant: the trainer takes it from the graph instead of
reading it (each read of a new fetch makes TensorFlow prepare a run, milliseconds before the
first step). Anything that may run ops in between (a callback's ``sess.run``, ``op.run()``, a
callable it makes, a restore, another session creator, a strategy's ``after_session_init``)
makes it read the variable, so that every path starts from the value the variable has.
"""

from __future__ import annotations

import threading

import pytest
import tensorflow as tf

from trainbus.callbacks import Callback
from trainbus.testing import HookRecorder, TinyModel, train_tiny
from trainbus.tfutils import common
from trainbus.tfutils.sesscreate import INIT_WITH_VARIABLES, CountingSession, NewSessionCreator, not_counted
from trainbus.tfutils.sessinit import SessionInit
from trainbus.train.simple import SimpleTrainer

tf1 = tf.compat.v1


@pytest.fixture
def reads(monkeypatch):
    """How often the trainer read the global step from the session."""
    calls = []
    real = common.get_global_step_value

    def counted():
        calls.append(1)
        return real()

    monkeypatch.setattr(common, "get_global_step_value", counted)
    return calls


def _steps(rec: HookRecorder, hook: str = "trigger_step") -> list[int]:
    return [e[2] for e in rec.events if e[0] == hook]


def test_a_fresh_training_starts_at_zero_without_reading_the_variable(reads):
    rec = HookRecorder()
    trainer = train_tiny([rec], max_epoch=2, steps_per_epoch=3)
    assert reads == []
    assert _steps(rec, "before_train") == [0]
    assert _steps(rec) == [1, 2, 3, 4, 5, 6]
    assert type(trainer.sess) is CountingSession
    assert trainer.global_step == 6


class _SetStep(Callback):
    """Sets the global step to 40 in ``before_train``: with ``sess.run``, with ``op.run()`` in
    the default session (the trainer's), or with a callable it makes of the session."""

    def __init__(self, how: str) -> None:
        self.how = how

    def _setup_graph(self):
        self.op = common.get_global_step_var().assign(40).op

    def _before_train(self):
        if self.how == "run":
            self.trainer.sess.run(self.op)
        elif self.how == "op.run":
            self.op.run()
        else:
            self.trainer.sess.make_callable(self.op)()


@pytest.mark.parametrize("how", ["run", "op.run", "callable"])
def test_a_callback_that_sets_the_global_step_in_before_train_is_seen(how, reads):
    rec = HookRecorder()
    train_tiny([_SetStep(how), rec], max_epoch=1, steps_per_epoch=3)
    assert reads == [1]  # after before_train: something ran, so the variable is read
    assert _steps(rec) == [41, 42, 43]


def test_a_global_step_made_by_the_model_starts_from_its_own_constant(reads):
    class Model(TinyModel):
        def build_graph(self, x, y):
            tf1.get_variable("global_step", initializer=tf.constant(7, tf.int64), trainable=False,
                             collections=[tf1.GraphKeys.GLOBAL_VARIABLES, tf1.GraphKeys.GLOBAL_STEP])
            return super().build_graph(x, y)

    class ReadAtEnd(Callback):
        def _after_train(self):
            self.value = self.trainer.sess.run(common.get_global_step_var())

    rec, end = HookRecorder(), ReadAtEnd()
    train_tiny([rec, end], model=Model(), max_epoch=1, steps_per_epoch=3)
    assert reads == []
    assert _steps(rec) == [8, 9, 10]
    assert end.value == 10  # the variable agrees with the count


def test_a_global_step_whose_initial_value_is_not_a_constant_is_read(reads):
    class Model(TinyModel):
        def build_graph(self, x, y):
            start = tf1.placeholder_with_default(tf.constant(5, tf.int64), [])
            tf1.get_variable("global_step", initializer=start, trainable=False,
                             collections=[tf1.GraphKeys.GLOBAL_VARIABLES, tf1.GraphKeys.GLOBAL_STEP])
            return super().build_graph(x, y)

    rec = HookRecorder()
    train_tiny([rec], model=Model(), max_epoch=1, steps_per_epoch=2)
    assert reads == [1, 1]
    assert _steps(rec) == [6, 7]


class _Restore(SessionInit):
    """Stands for a checkpoint restore: sets the global step to 12."""

    def _setup_graph(self):
        self.op = common.get_global_step_var().assign(12).op

    def _run_init(self, sess):
        sess.run(self.op)


def test_a_session_init_that_restores_makes_it_read(reads):
    rec = HookRecorder()
    train_tiny([rec], max_epoch=1, steps_per_epoch=2, session_init=_Restore())
    assert len(reads) == 2
    assert _steps(rec) == [13, 14]


def test_a_strategy_that_acts_after_the_session_init_makes_it_read(reads):
    class Strategy(SimpleTrainer):
        def after_session_init(self):
            pass  # a strategy's own seam: whatever it does, the trainer does not assume

    rec = HookRecorder()
    train_tiny([rec], max_epoch=1, steps_per_epoch=2, trainer=Strategy())
    assert reads == [1, 1]
    assert _steps(rec) == [1, 2]


def test_another_session_creator_makes_it_read(reads):
    from trainbus.train.config import TrainConfig
    from trainbus.train.interface import launch_train_with_config
    from trainbus.input_source import FeedInput
    from trainbus.testing import tiny_dataflow

    class Creator(tf1.train.SessionCreator):
        def create_session(self):
            sess = tf1.Session()
            sess.run(tf1.global_variables_initializer())
            sess.run(common.get_global_step_var().assign(3))
            return sess

    rec = HookRecorder()
    launch_train_with_config(TrainConfig(model=TinyModel(), data=FeedInput(tiny_dataflow()), callbacks=[rec],
                                         extra_callbacks=[], monitors=[], max_epoch=1, steps_per_epoch=2,
                                         session_creator=Creator()),
                             SimpleTrainer())
    assert reads == [1, 1]
    assert _steps(rec) == [4, 5]


def test_the_counting_session_counts_every_kind_of_request():
    with tf.Graph().as_default():
        v = tf1.get_variable("v", [], initializer=tf1.zeros_initializer())
        x = tf1.placeholder(tf.float32, [])
        add = v.assign_add(x)
        sess = NewSessionCreator().create_session()
        assert type(sess) is CountingSession
        assert sess.runs_after_init == sess.runs >= 1
        runs = sess.runs
        sess.run(v)
        assert sess.runs > runs
        runs = sess.runs
        f = sess.make_callable(add, feed_list=[x])
        f(1.0)
        assert sess.runs > runs
        runs = sess.runs
        g = sess.make_callable(v.read_value())
        assert sess.runs > runs  # counted when made: its later calls are not
        h = sess.partial_run_setup([add], [x])
        assert sess.partial_run(h, add, feed_dict={x: 2.0}) == 3.0
        assert g() == 3.0
        sess.close()


class _QueueStatCount(Callback):
    """Reads, after training, how many updates QueueInput's statistic made (one per step)."""

    def _after_train(self):
        self.count = self.trainer.sess.run("QueueInput/queue_size_count/Read/ReadVariableOp:0")


def test_a_training_fed_by_a_queue_knows_it_without_reading(reads):
    """QueueInput's enqueue thread makes its requests outside the count (an enqueue of fed
    placeholders changes no variable), and its statistic's variables are initialized with the
    others (``INIT_WITH_VARIABLES``): nothing runs between the initialization and the first step
    that could change the global step, so it is not read."""
    rec, count = HookRecorder(), _QueueStatCount()
    trainer = train_tiny([rec, count], max_epoch=2, steps_per_epoch=3, feed=False)
    assert reads == []
    assert _steps(rec) == [1, 2, 3, 4, 5, 6]
    assert trainer.sess.ran_with_variables == frozenset({"QueueInput/queue_size_init"})
    assert [op.name for op in trainer.graph.get_collection(INIT_WITH_VARIABLES)] == ["QueueInput/queue_size_init"]
    assert count.count == 6.0  # the statistic was updated with every step


def test_a_queue_statistic_under_another_session_creator_initializes_itself(reads):
    """A session another creator made did not run ``INIT_WITH_VARIABLES``: the statistic's
    callback initializes its variables in before_train (else the first step would fail on them)."""
    from trainbus.input_source import QueueInput
    from trainbus.testing import tiny_dataflow
    from trainbus.train.config import TrainConfig
    from trainbus.train.interface import launch_train_with_config

    class Creator(tf1.train.SessionCreator):
        def create_session(self):
            sess = tf1.Session()
            sess.run(tf1.global_variables_initializer())
            return sess

    trainer, count = SimpleTrainer(), _QueueStatCount()
    launch_train_with_config(TrainConfig(model=TinyModel(), data=QueueInput(tiny_dataflow()), callbacks=[count],
                                         extra_callbacks=[], monitors=[], max_epoch=2, steps_per_epoch=3,
                                         session_creator=Creator()), trainer)
    assert trainer.global_step == 6
    assert count.count == 6.0


def test_the_creator_runs_the_collected_initializers_with_the_variables():
    with tf.Graph().as_default() as g:
        v = tf1.get_variable("v", [], initializer=tf1.zeros_initializer())
        side = tf1.Variable(5.0, collections=[], name="side")  # in no collection: only its op initializes it
        g.add_to_collection(INIT_WITH_VARIABLES, side.initializer)
        sess = NewSessionCreator().create_session()
        assert sess.runs_after_init == sess.runs == 1  # one run for all of them
        assert sess.ran_with_variables == frozenset({side.initializer.name})
        assert sess.run([v, side]) == [0.0, 5.0]
        sess.close()


def test_requests_not_counted_are_this_threads_only():
    with tf.Graph().as_default() as g:
        v = tf1.get_variable("v", [], initializer=tf1.zeros_initializer())
        plus, twice = v + 1.0, v * 2.0
        sess = NewSessionCreator().create_session()
        runs = sess.runs
        with not_counted(sess):
            sess.make_callable(v.read_value())
            sess.run(v)
            inside, go = threading.Event(), threading.Event()

            def other():  # another thread's requests meanwhile are counted
                with g.as_default():
                    sess.run(plus)
                inside.set()
                go.wait(30)

            t = threading.Thread(target=other)
            t.start()
            assert inside.wait(30)
        go.set()
        t.join(30)
        assert sess.runs == runs + 1
        sess.run(twice)  # counted again once the block ends
        assert sess.runs == runs + 2
        with not_counted(tf1.Session()):  # another session: nothing to count, nothing changes
            pass
        other_sess = NewSessionCreator().create_session()
        with not_counted(other_sess):  # only the session named is left uncounted
            sess.run(plus)
            other_sess.run(plus)
        assert sess.runs == runs + 3 and other_sess.runs == other_sess.runs_after_init
        other_sess.close()
        sess.close()


class _StartSeen(Callback):
    """What ``trainer.start_global_step`` is in ``before_train`` and at the first step."""

    def _before_train(self):
        self.before = self.trainer.start_global_step

    def _trigger_step(self):
        if not hasattr(self, "first"):
            self.first = (self.trainer.start_global_step, self.global_step)


def test_start_global_step_is_where_this_run_started():
    fresh = SimpleTrainer()
    assert fresh.start_global_step is None
    seen = _StartSeen()
    train_tiny([seen], max_epoch=1, steps_per_epoch=3, trainer=fresh)
    assert (seen.before, seen.first, fresh.start_global_step) == (None, (0, 1), 0)

    seen = _StartSeen()
    trainer = train_tiny([seen], max_epoch=1, steps_per_epoch=2, session_init=_Restore())
    assert (seen.first, trainer.start_global_step, trainer.global_step) == ((12, 13), 12, 14)


def test_the_interrupt_line_says_when_no_step_had_finished():
    """``start_step`` equal to ``global_step`` and no checkpoint: no step of the run finished, and
    the line says so; steps ran, or the start unknown: the saver is missing or failed."""
    import pickle

    from trainbus.train import TrainingInterrupted

    none_ran = TrainingInterrupted("SIGTERM", 1, 12, checkpoint=None, start_step=12)
    assert str(none_ran) == ("training interrupted by SIGTERM at epoch 1, global step 12; "
                             "no checkpoint was written (no training step had finished)")
    again = pickle.loads(pickle.dumps(none_ran))  # how a worker process hands it over
    assert (again.start_step, str(again), again.exit_code) == (12, str(none_ran), 143)
    missing = "; no checkpoint was written (the callbacks have no ModelSaver, or saving failed: see the log)"
    assert str(TrainingInterrupted("SIGTERM", 1, 13, checkpoint=None, start_step=12)).endswith(missing)
    assert str(TrainingInterrupted("SIGTERM", 1, 12, checkpoint=None)).endswith(missing)
    kept = TrainingInterrupted("SIGINT", 1, 12, checkpoint="/l/model-12", checkpoint_step=12, start_step=12)
    assert str(kept).endswith("; final checkpoint /l/model-12")
