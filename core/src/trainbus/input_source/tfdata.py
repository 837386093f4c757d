""":class:`TFDatasetInput`: inputs read from a ``tf.data.Dataset``."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import tensorflow as tf

from trainbus.callbacks.base import Callback
from trainbus.dataflow import is_dataflow
from trainbus.input_source.base import FeedfreeInput

tf1 = tf.compat.v1


class _InitCallback(Callback):
    def __init__(self, op_fn: Callable[[], Any], label: str) -> None:
        self._op_fn = op_fn
        self._label = label

    def _before_train(self) -> None:
        self.trainer.sess.run(self._op_fn())

    def __str__(self) -> str:
        return self._label


class TFDatasetInput(FeedfreeInput):
    """Read inputs from a ``tf.data.Dataset`` whose elements match the input signature.

    :param dataset: a dataset, or a function returning one (called in the trainer's graph;
        use a function when eager execution is on).
    """

    def __init__(self, dataset: Any) -> None:
        if not (isinstance(dataset, tf.data.Dataset) or callable(dataset)):
            raise TypeError(f"TFDatasetInput needs a tf.data.Dataset or a function returning one, got {dataset!r}")
        self._dataset = dataset
        self._iterator: Any = None

    def _setup(self, input_signature: list[Any]) -> None:
        ds = self._dataset if isinstance(self._dataset, tf.data.Dataset) else self._dataset()
        spec = ds.element_spec
        specs = list(spec) if isinstance(spec, (tuple, list)) else [spec]
        if len(specs) != len(input_signature):
            raise ValueError(f"TFDatasetInput: the dataset's elements have {len(specs)} components but the model has "
                             f"{len(input_signature)} inputs ({[s.name for s in input_signature]})")
        for s, want in zip(specs, input_signature):
            if s.dtype != want.dtype:
                raise ValueError(f"TFDatasetInput: input {want.name!r} wants {want.dtype.name} but the dataset gives "
                                 f"{s.dtype.name}")
        self._iterator = tf1.data.make_initializable_iterator(ds)

    def _get_input_tensors(self) -> list[Any]:
        ret = self._iterator.get_next()
        ret = list(ret) if isinstance(ret, (tuple, list)) else [ret]
        for t, s in zip(ret, self._input_signature):
            t.set_shape(t.shape.merge_with(s.shape))
        return ret

    def _get_callbacks(self) -> list[Callback]:
        return [_InitCallback(lambda: self._iterator.initializer, "TFDatasetInputCallback")]

    def size(self) -> int:
        raise ValueError("TFDatasetInput has no known size; pass steps_per_epoch explicitly")

    @staticmethod
    def dataflow_to_dataset(df: Any, types: Sequence[Any]) -> Any:
        """A ``tf.data.Dataset`` of the (list) datapoints of ``df``, one tuple of components of
        ``types`` each; calls ``df.reset_state()``. Finite when ``df`` is: add ``.repeat()`` to train
        on it for several epochs.

        :param df: a DataFlow producing lists (anything with ``__iter__`` and ``reset_state``).
        :param types: the ``tf.DType`` of every component.
        """
        if not is_dataflow(df):
            raise TypeError(f"TFDatasetInput.dataflow_to_dataset needs a DataFlow, got {df!r}")
        if not isinstance(types, (list, tuple)) or not types:
            raise TypeError(f"TFDatasetInput.dataflow_to_dataset: types must be a list of tf.DType, one per "
                            f"component, got {types!r}")
        df.reset_state()
        n = len(types)

        def generate() -> Any:
            for dp in df:
                if len(dp) != n:
                    raise ValueError(f"TFDatasetInput.dataflow_to_dataset: a datapoint of {type(df).__name__} has "
                                     f"{len(dp)} components but {n} types were given")
                yield tuple(dp)

        sig = tuple(tf.TensorSpec(None, tf.as_dtype(t)) for t in types)
        return tf.data.Dataset.from_generator(generate, output_signature=sig)
