"""SaverRestore, SaverRestoreRelaxed and DictRestore on damaged checkpoints (truncated, flipped or
missing files, written by a real session) and the edges of their matching, checks and messages."""

import logging
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from trainbus.tfutils import sessinit
from trainbus.checkpoint import DamagedCheckpointError, write_callback_states

from damage import flip_byte, truncate

tf1 = tf.compat.v1
DATA = ".data-00000-of-00001"
W_VAL = np.arange(6, dtype="float32").reshape(2, 3) + 1
B_VAL = np.array([7.0, 8.0, 9.0], "float32")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A checkpoint ``model-5`` (W, b, global_step=5) saved by a session, with a callback-state file."""
    d = tmp_path_factory.mktemp("pristine")
    with tf.Graph().as_default():
        tf1.get_variable("W", initializer=W_VAL)
        tf1.get_variable("b", initializer=B_VAL)
        gs = tf1.train.get_or_create_global_step()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            sess.run(tf1.assign(gs, 5))
            prefix = tf1.train.Saver().save(sess, str(d / "model"), global_step=5)
    write_callback_states(prefix, {"Counter": {"steps": 5}})
    return d


@pytest.fixture()
def ckpt(pristine, tmp_path):
    """A fresh copy of the pristine checkpoint; returns its prefix."""
    d = tmp_path / "ck"
    shutil.copytree(pristine, d)
    return str(d / "model-5")


def build_plain(w_shape=(2, 3), w_dtype=tf.float32):
    tf1.get_variable("W", w_shape, dtype=w_dtype, initializer=tf1.zeros_initializer())
    tf1.get_variable("b", [3], initializer=tf1.zeros_initializer())
    tf1.train.get_or_create_global_step()


class Session:
    """A graph built by ``build`` with its variables initialized to their initial values."""

    def __init__(self, build=build_plain):
        self.graph = tf.Graph()
        with self.graph.as_default():
            build()
            init = tf1.global_variables_initializer()
        self.sess = tf1.Session(graph=self.graph)
        self.sess.run(init)

    def setup(self, init):
        with self.graph.as_default():
            init._setup_graph()

    def run(self, init):
        with self.graph.as_default():
            init._run_init(self.sess)

    def values(self):
        with self.graph.as_default():
            return {v.op.name: self.sess.run(v) for v in tf1.global_variables()}

    def n_ops(self):
        return len(self.graph.get_operations())

    def close(self):
        self.sess.close()


@pytest.fixture()
def session():
    made = []

    def make(build=build_plain):
        s = Session(build)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def warnings_of(caplog):
    return [r.getMessage() for r in caplog.records if r.name.startswith("trainbus") and r.levelno >= logging.WARNING]


# ------------------------------------------------------------------ damaged files

@pytest.mark.parametrize("cls", [sessinit.SaverRestore, sessinit.SaverRestoreRelaxed])
def test_truncated_index_is_reported_by_setup_graph_before_any_op(ckpt, session, cls):
    truncate(ckpt + ".index")
    s = session()
    n0 = s.n_ops()
    with pytest.raises(DamagedCheckpointError) as e:
        s.setup(cls(ckpt))
    assert e.value.file == ckpt + ".index" and e.value.problem.startswith("is truncated")
    assert s.n_ops() == n0


@pytest.mark.parametrize("cls", [sessinit.SaverRestore, sessinit.SaverRestoreRelaxed])
def test_damaged_state_file_is_reported_by_setup_graph(ckpt, session, cls):
    truncate(ckpt + ".trainbus.json", 0.3)
    with pytest.raises(DamagedCheckpointError) as e:
        session().setup(cls(ckpt))
    assert e.value.file == ckpt + ".trainbus.json"


@pytest.mark.parametrize("cls", [sessinit.SaverRestore, sessinit.SaverRestoreRelaxed])
@pytest.mark.parametrize("damage,problem", [(truncate, "is truncated"), (flip_byte, "fails its checksum")])
def test_damaged_data_shard_is_one_error_from_run_init_and_leaves_variables_alone(ckpt, session, cls, damage,
                                                                                   problem):
    """Setting up reads only the index (cheap); the restore itself finds the damaged shard."""
    damage(ckpt + DATA)
    s = session()
    init = cls(ckpt)
    s.setup(init)  # the index is intact and names files that are all there
    with pytest.raises(DamagedCheckpointError) as e:
        s.run(init)
    assert e.value.file == ckpt + DATA and e.value.problem.startswith(problem)
    assert e.value.__cause__ is None and e.value.__suppress_context__
    vals = s.values()
    np.testing.assert_array_equal(vals["W"], np.zeros((2, 3)))
    assert vals["global_step"] == 0


@pytest.mark.parametrize("cls", [sessinit.SaverRestore, sessinit.SaverRestoreRelaxed])
def test_data_shard_deleted_between_setup_and_restore_is_reported_missing(ckpt, session, cls):
    """Another process rotating checkpoints may delete the files while a restore is under way."""
    s = session()
    init = cls(ckpt)
    s.setup(init)
    os.remove(ckpt + DATA)
    with pytest.raises(DamagedCheckpointError) as e:
        s.run(init)
    assert e.value.file == ckpt + DATA and e.value.problem.startswith("is missing")


def test_missing_data_shard_is_reported_by_setup_graph(ckpt, session):
    os.remove(ckpt + DATA)
    with pytest.raises(DamagedCheckpointError) as e:
        session().setup(sessinit.SaverRestore(ckpt))
    assert e.value.file == ckpt + DATA and "is missing" in e.value.problem


def test_verify_reads_every_tensor_unless_told_not_to(ckpt):
    init = sessinit.SaverRestore(ckpt)
    init.verify()
    truncate(ckpt + DATA)
    init.verify(read_data=False)  # the index and the presence of the files only
    with pytest.raises(DamagedCheckpointError, match="is truncated"):
        init.verify()


def test_a_failure_tensorflow_names_is_not_checked_by_reading_the_checkpoint_again(ckpt, session, monkeypatch):
    """When TensorFlow's message already says which file is damaged, the (possibly large)
    checkpoint is not read a second time to find out."""
    from trainbus_sessinit import _restore

    calls = []
    real = _restore.verify_checkpoint

    def spy(prefix, read_data=True, **kw):
        calls.append(read_data)
        return real(prefix, read_data=read_data, **kw)

    monkeypatch.setattr(_restore, "verify_checkpoint", spy)
    truncate(ckpt + DATA)
    s = session()
    init = sessinit.SaverRestore(ckpt)
    s.setup(init)
    with pytest.raises(DamagedCheckpointError, match="is truncated"):
        s.run(init)
    assert calls == [False]


@pytest.mark.parametrize("cls", [sessinit.SaverRestore, sessinit.SaverRestoreRelaxed])
def test_unknown_tensorflow_wording_still_finds_the_damaged_file_by_reading_it(ckpt, session, monkeypatch, cls):
    """A TensorFlow release may word its errors differently: the files are then read to find
    which one is damaged, and that is the error raised."""
    from trainbus_sessinit import _restore

    monkeypatch.setattr(_restore, "explain_restore_error", lambda prefix, e: None)
    flip_byte(ckpt + DATA)
    s = session()
    init = cls(ckpt)
    s.setup(init)
    with pytest.raises(DamagedCheckpointError) as e:
        s.run(init)
    assert e.value.file == ckpt + DATA and "checksum" in e.value.problem


def test_a_failure_that_is_not_damage_is_raised_unchanged(ckpt, session):
    s = session()
    init = sessinit.SaverRestore(ckpt)
    s.setup(init)
    s.sess.close()
    with pytest.raises(RuntimeError, match="closed Session"):
        s.run(init)


def test_relaxed_raises_a_read_error_unchanged_when_the_files_read_fine(ckpt, session, monkeypatch):
    """A transient read error (the files read completely when checked again) is not called damage."""
    real_reader = tf1.train.NewCheckpointReader
    failed = []

    class FlakyOnce:
        def __init__(self, reader):
            self._reader = reader

        def __getattr__(self, name):
            return getattr(self._reader, name)

        def get_tensor(self, name):
            if not failed:
                failed.append(name)
                raise OSError(f"transient read error at {name}")
            return self._reader.get_tensor(name)

    def reader(prefix):
        r = real_reader(prefix)
        return FlakyOnce(r) if not failed else r

    s = session()
    init = sessinit.SaverRestoreRelaxed(ckpt)
    s.setup(init)
    monkeypatch.setattr(tf1.train, "NewCheckpointReader", reader)
    with pytest.raises(OSError, match="transient read error"):
        s.run(init)
    assert failed


# ------------------------------------------------------------------ matching, checks and messages

def test_constructor_argument_errors(ckpt):
    with pytest.raises(TypeError, match=r"SaverRestore\(prefix=...\) needs a string, got 5"):
        sessinit.SaverRestore(ckpt, prefix=5)
    with pytest.raises(TypeError, match=r"SaverRestoreRelaxed\(model_path=...\) needs a path"):
        sessinit.SaverRestoreRelaxed(None)
    with pytest.raises(TypeError, match=r"DictRestore: key 1 is not a variable name"):
        sessinit.DictRestore({1: np.zeros(3)})
    import pathlib

    assert sessinit.SaverRestore(pathlib.Path(ckpt)).path == ckpt


def test_reprs(ckpt):
    assert repr(sessinit.SaverRestore(ckpt)) == f"SaverRestore({ckpt!r})"
    assert repr(sessinit.SaverRestoreRelaxed(ckpt)) == f"SaverRestoreRelaxed({ckpt!r})"
    assert repr(sessinit.DictRestore({"W": W_VAL, "b": B_VAL})) == "DictRestore(<2 values>)"


def test_prefix_with_ignore_by_either_name_and_no_warning_for_variables_outside_it(ckpt, session, caplog):
    def build():
        with tf1.variable_scope("net"):
            tf1.get_variable("W", [2, 3], initializer=tf1.zeros_initializer())
            tf1.get_variable("b", [3], initializer=tf1.zeros_initializer())
            tf1.get_variable("global_step", [], dtype=tf.int64, initializer=tf1.zeros_initializer())
        tf1.get_variable("W", [2, 3], initializer=tf1.ones_initializer())

    for ignore in (["net/b"], ["b"]):  # the graph's name or the checkpoint's
        s = session(build)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="trainbus"):
            init = sessinit.SaverRestore(ckpt, prefix="/net/", ignore=ignore)
            s.setup(init)
            s.run(init)
        vals = s.values()
        np.testing.assert_array_equal(vals["net/W"], W_VAL)
        np.testing.assert_array_equal(vals["net/b"], np.zeros(3))
        assert vals["net/global_step"] == 5
        np.testing.assert_array_equal(vals["W"], np.ones((2, 3)))
        assert "variable net/b in the graph is not loaded from the checkpoint (ignored)" in caplog.text
        assert "not found" not in caplog.text  # W outside net/ is not the checkpoint's business


def test_ignored_variables_are_logged_once_and_not_reported_as_unmatched(ckpt, session, caplog):
    def build():
        build_plain()
        tf1.get_variable("extra", [1])

    s = session(build)
    with caplog.at_level(logging.INFO, logger="trainbus"):
        init = sessinit.SaverRestore(ckpt, ignore="b")  # one name as a string
        s.setup(init)
        s.run(init)
    assert caplog.text.count("not loaded from the checkpoint (ignored)") == 1
    assert "variable b in the graph is not loaded" in caplog.text
    assert warnings_of(caplog) == [f"1 variable(s) in the graph are not found in the checkpoint {ckpt}: extra"]
    assert f"Restoring checkpoint from {ckpt} ..." in caplog.text


def test_ignoring_a_name_the_checkpoint_lacks_logs_nothing(ckpt, session, caplog):
    def build():
        build_plain()
        tf1.get_variable("extra", [1])

    with caplog.at_level(logging.INFO, logger="trainbus"):
        init = sessinit.SaverRestore(ckpt, ignore=["extra"])
        session(build).setup(init)
    assert "ignored" not in caplog.text and "not found" not in caplog.text


def test_only_unmatched_checkpoint_variables_are_listed(ckpt, session, caplog):
    def build():
        tf1.get_variable("W", [2, 3])

    with caplog.at_level(logging.WARNING, logger="trainbus"):
        session(build).setup(sessinit.SaverRestore(ckpt))
    assert warnings_of(caplog) == [f"2 variable(s) in the checkpoint {ckpt} are not found in the graph: b, global_step"]


def test_dtype_mismatch_is_an_error_naming_both_dtypes(ckpt, session):
    with pytest.raises(ValueError, match=r"W: graph dtype float64, checkpoint dtype float32") as e:
        session(lambda: build_plain(w_dtype=tf.float64)).setup(sessinit.SaverRestore(ckpt))
    assert "SaverRestoreRelaxed" in str(e.value)


def test_no_common_variable_is_a_warning_and_the_restore_a_no_op(ckpt, session, caplog):
    def build():
        tf1.get_variable("other", [2], initializer=tf1.ones_initializer())

    s = session(build)
    init = sessinit.SaverRestore(ckpt)
    with caplog.at_level(logging.WARNING, logger="trainbus"):
        s.setup(init)
        s.run(init)
    assert f"SaverRestore: no variable of the graph is in checkpoint {ckpt}" in caplog.text
    np.testing.assert_array_equal(s.values()["other"], np.ones(2))


def test_relaxed_logs_what_it_restores(ckpt, session, caplog):
    s = session()
    init = sessinit.SaverRestoreRelaxed(ckpt)
    with caplog.at_level(logging.INFO, logger="trainbus"):
        s.setup(init)
        s.run(init)
    assert f"Restoring checkpoint (relaxed) from {ckpt} ..." in caplog.text
    assert s.values()["global_step"] == 5


def test_dict_restore_messages_and_setup_done_once(session, caplog):
    s = session()
    init = sessinit.DictRestore({"W": W_VAL, "b": B_VAL, "stray": np.zeros(2)})
    with caplog.at_level(logging.INFO, logger="trainbus"):
        s.setup(init)
        s.run(init)
    assert caplog.text.count("1 variable(s) in the graph are not found in the dict (dict): global_step") == 1
    assert caplog.text.count("1 variable(s) in the dict (dict) are not found in the graph: stray") == 1
    assert "Restoring 2 variables from dict ..." in caplog.text
    np.testing.assert_array_equal(s.values()["W"], W_VAL)


def test_dict_restore_run_init_alone_prepares_the_values(session):
    s = session()
    s.run(sessinit.DictRestore({"b": B_VAL}))
    np.testing.assert_array_equal(s.values()["b"], B_VAL)


def test_npz_mismatch_raises_unless_ignored(tmp_path, session):
    path = str(tmp_path / "w.npz")
    np.savez(path, W=np.zeros((5, 5), "float32"), b=B_VAL)
    init = sessinit.DictRestore.from_npz(path)
    assert repr(init) == f"DictRestore({path})"
    with pytest.raises(ValueError, match=re.escape(f"DictRestore ({path}): ") + ".*'W'"):
        session().setup(init)
    s = session()
    init = sessinit.DictRestore.from_npz(path, ignore_mismatch=True)
    s.setup(init)
    s.run(init)
    np.testing.assert_array_equal(s.values()["b"], B_VAL)
