"""Export a trained model for inference without trainbus: a frozen ``GraphDef`` (``.pb``)
or a ``SavedModel`` for TensorFlow Serving."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Sequence

import tensorflow as tf

from trainbus.utils import logger
from trainbus.utils.fs import atomic_write_bytes

tf1 = tf.compat.v1

__all__ = ["ModelExporter"]


def _signature_key(tensor: Any) -> str:
    """A signature key usable as a Python keyword: the op name with ``/`` -> ``_``."""
    name = tensor.op.name if tensor.value_index == 0 else f"{tensor.op.name}_{tensor.value_index}"
    return name.replace("/", "_").replace("-", "_")


class ModelExporter:
    """Export models for inference.

    :param config: a :class:`trainbus.predict.PredictConfig`: the graph is built with its
        tower function in a new graph (``PredictTowerContext``), its ``session_init`` loads the
        variables, and its ``input_names``/``output_names`` are the inputs/outputs of the export.
        Any object with the same ``build_inference_graph()`` (returning ``(graph, inputs,
        outputs)``) and ``session_init`` will do: this module does not import
        ``trainbus.predict``, which sits above ``trainbus.tfutils``.
    """

    def __init__(self, config: Any) -> None:
        if not callable(getattr(config, "build_inference_graph", None)) or not hasattr(config, "session_init"):
            raise TypeError(f"ModelExporter needs a trainbus.predict.PredictConfig (or an object with "
                            f"build_inference_graph() and session_init), got {config!r}")
        self.config = config

    def _build_and_load(self) -> tuple[Any, Any, list[Any], list[Any]]:
        from trainbus.tfutils.sessinit import JustCurrentSession

        graph, ins, outs = self.config.build_inference_graph()
        with graph.as_default():
            init = self.config.session_init or JustCurrentSession()
            init._setup_graph()
            # a plain session: a session creator may finalize the graph
            sess = tf1.Session(graph=graph, config=tf1.ConfigProto(allow_soft_placement=True))
            sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer(),
                      tf1.tables_initializer()])
            init._run_init(sess)
        return graph, sess, list(ins), list(outs)

    def export_compact(self, filename: str, optimize: bool = True, toco_compatible: bool = False) -> None:
        """Write a self-contained inference-only graph (variables frozen into constants) as a
        binary ``GraphDef`` to ``filename``.

        :param filename: the output ``.pb`` path.
        :param optimize: run TensorFlow's ``optimize_for_inference`` on the frozen graph
            (prunes and folds ops; does not suit every graph).
        :param toco_compatible: passed to ``optimize_for_inference``: only produce ops TOCO
            (the TFLite converter) understands.

        Load it with plain TensorFlow::

            gd = tf.compat.v1.GraphDef(); gd.ParseFromString(open(filename, 'rb').read())
            tf.import_graph_def(gd, name='')
        """
        graph, sess, ins, outs = self._build_and_load()
        try:
            with graph.as_default():
                in_names = [t.op.name for t in ins]
                out_names = [t.op.name for t in outs]
                frozen = tf1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), out_names)
                if optimize:
                    from tensorflow.python.tools import optimize_for_inference_lib

                    optimized = optimize_for_inference_lib.optimize_for_inference(
                        frozen, in_names, out_names, [t.dtype.as_datatype_enum for t in ins], toco_compatible)
                    # optimize_for_inference drops the function library (tf.cond / while bodies)
                    if frozen.HasField("library") and not optimized.HasField("library"):
                        optimized.library.CopyFrom(frozen.library)
                    frozen = optimized
        finally:
            sess.close()
        d = os.path.dirname(os.path.abspath(filename))
        os.makedirs(d, exist_ok=True)
        atomic_write_bytes(filename, frozen.SerializeToString())
        logger.info(f"Output graph written to {filename}.")

    def export_serving(self, filename: str, tags: Sequence[str] | None = None,
                       signature_name: str = "prediction_pipeline") -> None:
        """Write a ``SavedModel`` (``saved_model.pb`` + ``variables/``) to directory
        ``filename``, loadable without trainbus by TensorFlow Serving,
        ``tf.compat.v1.saved_model.loader.load`` and TF2's ``tf.saved_model.load``.

        :param filename: the export directory (must not exist, or be empty).
        :param tags: the meta graph's tags; default ``(tf.saved_model.SERVING,)``.
        :param signature_name: name of the (single, predict) signature. Its input and output
            keys are the op names of the input and output tensors, with ``/`` replaced by ``_``.
        """
        if tags is None:
            tags = (tf1.saved_model.tag_constants.SERVING,)
        if isinstance(tags, str):
            tags = (tags,)
        if not signature_name:
            raise ValueError("export_serving: signature_name must be a non-empty string")
        filename = os.path.abspath(filename)
        if os.path.exists(filename) and (not os.path.isdir(filename) or os.listdir(filename)):
            raise FileExistsError(f"export_serving: {filename!r} already exists and is not an empty directory; "
                                  "choose a new directory")
        graph, sess, ins, outs = self._build_and_load()
        parent = os.path.dirname(filename)
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".export-", dir=parent)
        tmp_out = os.path.join(tmp, "model")
        try:
            with graph.as_default():
                inputs = {_signature_key(t): tf1.saved_model.utils.build_tensor_info(t) for t in ins}
                outputs = {_signature_key(t): tf1.saved_model.utils.build_tensor_info(t) for t in outs}
                if len(inputs) != len(ins) or len(outputs) != len(outs):
                    raise ValueError(f"export_serving: input/output names collide after sanitizing: "
                                     f"{[t.name for t in ins]} -> {list(inputs)}, {[t.name for t in outs]} -> {list(outputs)}")
                sig = tf1.saved_model.signature_def_utils.build_signature_def(
                    inputs=inputs, outputs=outputs,
                    method_name=tf1.saved_model.signature_constants.PREDICT_METHOD_NAME)
                builder = tf1.saved_model.builder.SavedModelBuilder(tmp_out)
                builder.add_meta_graph_and_variables(
                    sess, list(tags), signature_def_map={signature_name: sig},
                    main_op=tf1.group(tf1.local_variables_initializer(), tf1.tables_initializer()),
                    strip_default_attrs=True)
                builder.save()
            if os.path.isdir(filename):
                os.rmdir(filename)
            os.replace(tmp_out, filename)
        finally:
            sess.close()
            shutil.rmtree(tmp, ignore_errors=True)
        logger.info(f"SavedModel created at {filename}.")
