"""Guarantee 5, continued: property-based tests (few examples, fast) for ``SmartInit`` objects
and for the TOML run files of ``trainbus train RUN.toml``.

* ``SmartInit``: every supported kind of valid object (dict, ``.npz``, checkpoint prefix,
  checkpoint directory, None, a list of them) loads the values into a real session; invalid
  objects (wrong types, missing paths, bad shapes, unknown dtypes) raise a clear error at
  construction or at ``_setup_graph`` -- never later, when the session is being initialized.
* Run files: generated valid files pass the planning stage (``--dry-run``) without training;
  generated invalid files raise :class:`RunConfigError` whose problem names the right line,
  and nothing is trained or written.
"""

from __future__ import annotations

import pathlib
import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.timeout(240)

FAST = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
RUNFILES = pathlib.Path(__file__).resolve().parents[1] / "ecosystem" / "runfiles"
SHAPES = {"W": (4, 3), "b": (3,)}


def _graph():
    import tensorflow as tf

    tf1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        vs = {n: tf1.get_variable(n, s, initializer=tf1.zeros_initializer()) for n, s in SHAPES.items()}
    return g, vs


def _values(seed: int) -> dict:
    rng = np.random.RandomState(seed)
    return {n: rng.randn(*s).astype("float32") for n, s in SHAPES.items()}


def _write_checkpoint(d: pathlib.Path, values: dict) -> str:
    import tensorflow as tf

    tf1 = tf.compat.v1
    g, vs = _graph()
    with g.as_default(), tf1.Session(graph=g) as sess:
        for n, v in vs.items():
            v.load(values[n], sess)
        return tf1.train.Saver(list(vs.values())).save(sess, str(d / "model"), global_step=7)


def _load(init) -> dict:
    """Run ``init`` like a trainer does: _setup_graph in the graph, then _run_init."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    g, vs = _graph()
    with g.as_default():
        init._setup_graph()
        with tf1.Session(graph=g) as sess:
            sess.run(tf1.global_variables_initializer())
            init._run_init(sess)
            return sess.run(vs)


@FAST
@given(kind=st.sampled_from(["dict", "npz", "ckpt-prefix", "ckpt-dir", "ckpt-state", "none", "list"]),
       seed=st.integers(0, 1000), subset=st.sampled_from([("W", "b"), ("W",), ("b",)]))
def test_valid_smartinit_objects_load(kind, seed, subset):
    from trainbus.tfutils.sessinit import SmartInit

    values = _values(seed)
    part = {n: values[n] for n in subset}
    d = pathlib.Path(tempfile.mkdtemp())
    try:
        if kind == "dict":
            obj = part
        elif kind == "npz":
            obj = str(d / "w.npz")
            np.savez(obj, **part)
        elif kind.startswith("ckpt"):
            prefix = _write_checkpoint(d, values)
            obj = {"ckpt-prefix": prefix, "ckpt-dir": str(d), "ckpt-state": str(d / "checkpoint")}[kind]
            part = values
        elif kind == "none":
            obj, part = None, {}
        else:
            first = {n: values[n] for n in subset[:1]}
            np.savez(str(d / "rest.npz"), **{n: values[n] for n in SHAPES if n not in first})
            obj, part = [first, None, str(d / "rest.npz")], values
        got = _load(SmartInit(obj))
        for n in SHAPES:
            want = part[n] if n in part else np.zeros(SHAPES[n], "float32")
            np.testing.assert_array_equal(got[n], want, err_msg=f"{kind}: variable {n}")
    finally:
        shutil.rmtree(d)


bad_types = st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(), st.binary(min_size=1),
                      st.builds(object), st.sets(st.integers(), min_size=1))


@FAST
@given(bad=bad_types)
def test_wrong_types_fail_at_construction(bad):
    from trainbus.tfutils.sessinit import SmartInit

    with pytest.raises(TypeError, match=r"SmartInit: no installed plugin can load .* of type"):
        SmartInit(bad)


@FAST
@given(name=st.text(st.characters(whitelist_categories=("Ll", "Nd")), min_size=1, max_size=12),
       suffix=st.sampled_from(["", ".npz", "/model-10", "/checkpoint"]))
def test_missing_paths_fail_at_construction(name, suffix):
    from trainbus.tfutils.sessinit import SmartInit

    path = str(pathlib.Path(tempfile.gettempdir()) / f"trainbus-missing-{name}{suffix}")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        SmartInit(path)


@FAST
@given(var=st.sampled_from(sorted(SHAPES)), extra=st.integers(1, 3), as_npz=st.booleans(), ckpt=st.booleans())
def test_bad_shapes_fail_before_the_session_is_initialized(var, extra, as_npz, ckpt):
    """A value whose shape does not fit its variable: a clear error naming the variable,
    raised at construction or in ``_setup_graph`` (the trainer calls it before creating the
    session), never in ``_run_init``."""
    from trainbus.tfutils.sessinit import SmartInit

    bad_shape = tuple(s + extra for s in SHAPES[var]) or (extra,)
    d = pathlib.Path(tempfile.mkdtemp())
    try:
        values = _values(0)
        values[var] = np.ones(bad_shape, "float32")
        if ckpt:
            import tensorflow as tf

            tf1 = tf.compat.v1
            g = tf.Graph()
            with g.as_default(), tf1.Session(graph=g) as sess:
                vs = [tf1.get_variable(n, v.shape, initializer=tf1.constant_initializer(v)) for n, v in values.items()]
                sess.run(tf1.global_variables_initializer())
                obj = tf1.train.Saver(vs).save(sess, str(d / "model"))
        elif as_npz:
            obj = str(d / "bad.npz")
            np.savez(obj, **values)
        else:
            obj = values
        g, _ = _graph()
        with pytest.raises((ValueError, TypeError)) as ei:
            init = SmartInit(obj)
            with g.as_default():
                init._setup_graph()
        assert var in str(ei.value) and "shape" in str(ei.value).lower(), str(ei.value)
    finally:
        shutil.rmtree(d)


# ---------------------------------------------------------------------------- run files

callbacks_st = st.lists(st.sampled_from([
    ('name = "ModelSaver"', 'args = { max_to_keep = %d }'),
    ('name = "PeriodicTrigger"', 'args = { triggerable = { callback = "ModelSaver" }, every_k_steps = %d }'),
    ('name = "RunUpdateOps"', None),
]), max_size=3)
monitors_st = st.lists(st.sampled_from(["JSONWriter", "ScalarPrinter"]), max_size=2, unique=True)


def _run_file(lr, n, batch, callbacks, monitors, spe, max_epoch, k, logdir) -> list[str]:
    lines = ["[model]", 'class = "tinyrun:LinearNet"', f"args = {{ lr = {lr!r} }}", "",
             "[data]", 'function = "tinyrun:make_data"', f"args = {{ n = {n}, batch = {batch} }}", ""]
    for name, args in callbacks:
        lines += ["[[callbacks]]", name] + ([args % k] if args else []) + [""]
    for m in monitors:
        lines += ["[[monitors]]", f'name = "{m}"', ""]
    lines += ["[train]", f"steps_per_epoch = {spe}", f"max_epoch = {max_epoch}", f'logdir = "{logdir}"',
              'logdir_action = "k"']
    return lines


run_files = dict(lr=st.floats(0.001, 1.0), n=st.integers(8, 64), batch=st.integers(1, 8), callbacks=callbacks_st,
                 monitors=monitors_st, spe=st.integers(1, 20), max_epoch=st.integers(1, 5), k=st.integers(1, 5))


def _workdir() -> pathlib.Path:
    d = pathlib.Path(tempfile.mkdtemp())
    shutil.copy(RUNFILES / "tinyrun.py", d / "tinyrun.py")
    return d


@settings(FAST, max_examples=4)  # each plan builds the graph of the run: ~2-5 s
@given(**run_files)
def test_valid_run_files_pass_planning_without_training(lr, n, batch, callbacks, monitors, spe, max_epoch, k):
    from trainbus.runfile import train_from_file

    d = _workdir()
    try:
        f = d / "run.toml"
        f.write_text("\n".join(_run_file(lr, n, batch, callbacks, monitors, spe, max_epoch, k, d / "log")) + "\n")
        plan = train_from_file(f, dry_run=True)
        assert isinstance(plan, str) and "LinearNet" in plan
        for m in monitors:
            assert m in plan
        assert not (d / "log").exists()  # planning trains and writes nothing
    finally:
        shutil.rmtree(d)


MUTATIONS = {
    # kind: (the line that starts so, its replacement) -> the problem must name that line
    "unknown callback": ('name = "ModelSaver"', 'name = "ModelSavr"'),
    "unknown argument": ("args = { lr =", "args = { learning_rat = 0.1 }"),
    "bad max_epoch": ("max_epoch =", "max_epoch = 0"),
    "string steps": ("steps_per_epoch =", 'steps_per_epoch = "many"'),
    "unknown monitor": ('name = "JSONWriter"', 'name = "JSONWritter"'),
    "bad model path": ('class = "tinyrun:LinearNet"', 'class = "tinyrun:NoSuchNet"'),
    "syntax": ("[data]", "[data"),
}


@FAST
@given(mutation=st.sampled_from(sorted(MUTATIONS)), **run_files)
def test_invalid_run_files_are_reported_with_a_line_and_never_train(mutation, lr, n, batch, callbacks, monitors,
                                                                   spe, max_epoch, k):
    from trainbus.runfile import RunConfigError, train_from_file

    find, repl = MUTATIONS[mutation]
    if mutation == "unknown callback":
        callbacks = list(callbacks) + [('name = "ModelSaver"', None)]
    if mutation == "unknown monitor":
        monitors = ["JSONWriter"]
    d = _workdir()
    try:
        lines = _run_file(lr, n, batch, callbacks, monitors, spe, max_epoch, k, d / "log")
        idx = next(i for i, ln in enumerate(lines) if ln.startswith(find))
        lines[idx] = repl
        f = d / "run.toml"
        f.write_text("\n".join(lines) + "\n")
        with pytest.raises(RunConfigError) as ei:
            train_from_file(f, dry_run=False)
        lines_named = [p.line for p in ei.value.problems]
        assert idx + 1 in lines_named, (mutation, lines_named, str(ei.value))
        assert f"run.toml:{idx + 1}:" in str(ei.value)
        assert not (d / "log").exists()  # nothing started
    finally:
        shutil.rmtree(d)
