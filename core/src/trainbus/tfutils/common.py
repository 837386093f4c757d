"""Small TF helpers used everywhere (``trainbus.tfutils.get_default_sess_config`` etc.)."""

from __future__ import annotations

from typing import Any

from trainbus.utils import lazytf as _tf

__all__ = ["get_default_sess_config", "get_global_step_var", "get_global_step_value", "get_tf_version_tuple",
           "get_op_tensor_name", "get_op_or_tensor_by_name", "collect_env_info"]


def get_default_sess_config(mem_fraction: float = 0.99) -> Any:
    """A ``tf.compat.v1.ConfigProto`` for training sessions; modify it as you need.

    :param mem_fraction: ``per_process_gpu_memory_fraction`` of the GPU options.
    """
    tf1 = _tf.tf1()
    conf = tf1.ConfigProto()
    conf.allow_soft_placement = True
    conf.intra_op_parallelism_threads = 1
    conf.inter_op_parallelism_threads = 0
    conf.gpu_options.per_process_gpu_memory_fraction = mem_fraction
    conf.gpu_options.allow_growth = True
    return conf


def get_global_step_var() -> Any:
    """The ``global_step`` variable of the default graph, created if missing."""
    tf1 = _tf.tf1()
    # the usual case, once it exists: one integer variable in its collection (entering the root
    # variable scope below costs more than the read of the value it is asked for)
    found = tf1.get_default_graph().get_collection(tf1.GraphKeys.GLOBAL_STEP)
    if len(found) == 1 and found[0].dtype.base_dtype.is_integer:
        return found[0]
    with tf1.variable_scope(tf1.VariableScope(reuse=tf1.AUTO_REUSE), auxiliary_name_scope=False):
        return tf1.train.get_or_create_global_step()


def get_global_step_value() -> int:
    """The value of ``global_step`` in the default session (call under one)."""
    tf1 = _tf.tf1()
    sess = tf1.get_default_session()
    if sess is None:
        raise RuntimeError("get_global_step_value() must be called under a default session (with sess.as_default())")
    return int(tf1.train.global_step(sess, get_global_step_var()))


def get_tf_version_tuple() -> tuple[int, int]:
    """TensorFlow's version as ``(major, minor)``."""
    return tuple(int(x) for x in _tf.tf().__version__.split(".")[:2])  # type: ignore[return-value]


def get_op_tensor_name(name: str) -> tuple[str, str]:
    """``("op", "op:0")`` for ``"op"`` or ``"op:0"``."""
    if len(name) >= 3 and name[-2] == ":" and name[-1].isdigit():
        return name[:-2], name
    if ":" in name and name.rsplit(":", 1)[1].isdigit():
        return name.rsplit(":", 1)[0], name
    return name, name + ":0"


def get_op_or_tensor_by_name(name: Any) -> Any:
    """A tensor (for ``"x:0"``), an op (for ``"x"``), or a list of them."""
    g = _tf.tf1().get_default_graph()

    def f(n: str) -> Any:
        if len(n) >= 3 and n[-2] == ":":
            return g.get_tensor_by_name(n)
        return g.get_operation_by_name(n)

    if not isinstance(name, (list, tuple)):
        return f(name)
    return list(map(f, name))


def __getattr__(name: str) -> Any:
    # tensorpack's path for collect_env_info too; its module is imported on first use
    if name == "collect_env_info":
        from trainbus.tfutils.collect_env import collect_env_info

        return collect_env_info
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
