"""tfutils helpers reached through trainbus.tfutils.<name>."""

import tensorflow as tf

import trainbus.tfutils as tfutils

tf1 = tf.compat.v1


def test_default_sess_config_values():
    conf = tfutils.get_default_sess_config(0.5)
    assert isinstance(conf, tf1.ConfigProto)
    assert conf.allow_soft_placement is True
    assert abs(conf.gpu_options.per_process_gpu_memory_fraction - 0.5) < 1e-9
    assert tfutils.get_default_sess_config().gpu_options.per_process_gpu_memory_fraction > 0.9


def test_global_step_var_created_once_and_value_read_from_session():
    with tf.Graph().as_default():
        gs = tfutils.get_global_step_var()
        assert tfutils.get_global_step_var() is gs
        assert gs.op.name == "global_step"
        inc = tf1.assign_add(gs, 7)
        with tf1.Session() as sess, sess.as_default():
            sess.run(tf1.global_variables_initializer())
            assert tfutils.get_global_step_value() == 0
            sess.run(inc)
            assert tfutils.get_global_step_value() == 7


def test_global_step_value_needs_a_session():
    import pytest

    with tf.Graph().as_default():
        tfutils.get_global_step_var()
        with pytest.raises(RuntimeError, match="default session"):
            tfutils.get_global_step_value()


def test_tf_version_tuple():
    v = tfutils.get_tf_version_tuple()
    assert v == tuple(int(x) for x in tf.__version__.split(".")[:2])
    assert v >= (2, 0)


def test_tower_context_through_package():
    with tf.Graph().as_default():
        assert tfutils.get_current_tower_context() is None
        with tfutils.TowerContext("tower0", is_training=True) as ctx:
            assert tfutils.get_current_tower_context() is ctx
            assert ctx.is_training and ctx.is_main_training_tower
            t = tf.constant(1.0, name="c")
        assert t.op.name == "tower0/c"
        with tfutils.TowerContext("", is_training=False) as ctx2:
            assert not ctx2.is_training
        assert tfutils.get_current_tower_context() is None


def test_argscope_function_not_shadowed_by_submodule():
    import trainbus.tfutils.argscope as mod  # noqa: F401 - importing the submodule must not shadow the function

    from trainbus.tfutils import argscope, get_arg_scope

    assert callable(argscope) and argscope.__module__ == "trainbus.tfutils.argscope"
    assert callable(get_arg_scope)
