""":class:`TFDatasetInput`: inputs read from a ``tf.data.Dataset``."""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf

from trainbus.callbacks.base import Callback
from trainbus.dataflow import dataflow_len, is_dataflow
from trainbus.input_source.base import FeedfreeInput, InputSpec, explain_datapoint

tf1 = tf.compat.v1


class _InitCallback(Callback):
    def __init__(self, op_fn: Callable[[], Any], label: str) -> None:
        self._op_fn = op_fn
        self._label = label

    def _before_train(self) -> None:
        self.trainer.sess.run(self._op_fn())

    def __str__(self) -> str:
        return self._label


def _shape_test(shape: Any) -> Callable[[tuple], bool] | None:
    """A fast test that an array shape fits the static ``shape`` (None: every shape fits)."""
    if shape.rank is None:
        return None
    rank = shape.rank
    known = [(i, d) for i, d in enumerate(shape.as_list()) if d is not None]
    if not known:
        return lambda s: len(s) == rank
    get = itemgetter(*[i for i, _ in known])
    want = tuple(d for _, d in known) if len(known) > 1 else known[0][1]
    return lambda s: len(s) == rank and get(s) == want


def _checked_generator(df: Any, inputs: Sequence[InputSpec], who: str,
                       on_bad: Callable[[str, BaseException], None]) -> Callable[[], Any]:
    """A generator function over the datapoints of ``df`` as tuples of arrays of the inputs'
    dtypes and shapes (``Dataset.from_generator`` then takes them as they are). A datapoint that
    does not fit ``inputs`` (components, dtypes, shapes) gets a message naming ``who``, the
    dataflow and the component, handed to ``on_bad(message, error)``; the iteration then ends.
    Per datapoint this is the conversion ``from_generator`` would do, a type test per component
    when it is already an array of the right dtype, and a shape test."""
    n = len(inputs)
    np_types = [np.dtype(dtype.as_numpy_dtype) for _, dtype, _ in inputs]
    tests = [_shape_test(shape) for _, _, shape in inputs]
    if not any(t is not None for t in tests):
        tests = []
    ndarray, asarray = np.ndarray, np.asarray

    def generate() -> Any:
        for dp in df:
            try:
                if len(dp) != n:
                    raise ValueError(f"a datapoint of {len(dp)} components for {n} inputs")
                out = tuple([v if type(v) is ndarray and v.dtype is t else asarray(v, dtype=t)
                             for v, t in zip(dp, np_types)])
                for a, test in zip(out, tests):
                    if test is not None and not test(a.shape):
                        raise ValueError(f"an array of shape {a.shape}")
            except (ValueError, TypeError) as e:
                on_bad(explain_datapoint(who, df, dp, inputs) or f"{who}: a datapoint of {type(df).__name__}: {e}", e)
                return
            yield out

    return generate


def _first_checked_generator(df: Any, inputs: Sequence[InputSpec], who: str) -> Callable[[], Any]:
    """A generator function over the datapoints of ``df`` as tuples, as they are: the first
    datapoint of each pass is checked fully (components, conversion to the dtypes), the others
    only for their number of components, so the conversion stays ``from_generator``'s own."""
    n = len(inputs)

    def generate() -> Any:
        first = True
        for dp in df:
            if first:
                first = False
                why = explain_datapoint(who, df, dp, inputs)
                if why is not None:
                    raise ValueError(why)
            elif len(dp) != n:
                raise ValueError(explain_datapoint(who, df, dp, inputs))
            yield tuple(dp)

    return generate


class TFDatasetInput(FeedfreeInput):
    """Read inputs from a ``tf.data.Dataset`` whose elements match the input signature, or from
    a DataFlow (read through ``Dataset.from_generator``, as :meth:`dataflow_to_dataset` does).

    Train on an endless dataset or dataflow (``dataset.repeat()``, ``RepeatedData(df, -1)``):
    training stops when the dataset ends.

    :param dataset: a ``tf.data.Dataset``, a function returning one (called in the trainer's
        graph; use a function when eager execution is on), or a DataFlow of lists with one
        component per input (converted to the input signature's dtypes; a datapoint that does not
        fit stops training with an error naming the dataflow and the input).
    """

    def __init__(self, dataset: Any) -> None:
        self._dataflow: Any = None
        if isinstance(dataset, tf.data.Dataset):
            pass
        elif is_dataflow(dataset):
            self._dataflow = dataset
        elif not callable(dataset):
            raise TypeError(f"TFDatasetInput needs a tf.data.Dataset, a function returning one, or a DataFlow, got "
                            f"{dataset!r}")
        self._dataset = dataset
        self._iterator: Any = None
        self._failure: BaseException | None = None

    def _setup(self, input_signature: list[Any]) -> None:
        if self._dataflow is not None:
            ds = self._dataset_of_dataflow(input_signature)
        else:
            ds = self._dataset if isinstance(self._dataset, tf.data.Dataset) else self._dataset()
            self._check_element_spec(ds, input_signature)
        self._iterator = tf1.data.make_initializable_iterator(ds)

    def _check_element_spec(self, ds: Any, input_signature: list[Any]) -> None:
        if not isinstance(ds, tf.data.Dataset):
            raise TypeError(f"{self.describe()}: the dataset function returned {ds!r}, not a tf.data.Dataset")
        spec = ds.element_spec
        specs = list(spec) if isinstance(spec, (tuple, list)) else [spec]
        names = [s.name for s in input_signature]
        if len(specs) != len(input_signature):
            raise ValueError(f"{self.describe()}: the dataset's elements have {len(specs)} components but the model "
                             f"has {len(input_signature)} inputs {names}: expected one component per input, in the "
                             f"order of the model's inputs(); got {specs}")
        for k, (s, want) in enumerate(zip(specs, input_signature)):
            if s.dtype != want.dtype:
                raise ValueError(f"{self.describe()}: component {k} ({want.name!r}) of the dataset's elements is "
                                 f"{s.dtype.name}, but the input expects {want.dtype.name}; cast it in the dataset "
                                 "(dataset.map) or change the dtype of that input in inputs()")
            if isinstance(s, tf.TensorSpec) and not want.shape.is_compatible_with(s.shape):
                raise ValueError(f"{self.describe()}: component {k} ({want.name!r}) of the dataset's elements has "
                                 f"shape {s.shape}, but the input signature expects {want.shape}; batch or reshape it "
                                 "in the dataset, or change the TensorSpec of that input in inputs()")

    def _dataset_of_dataflow(self, input_signature: list[Any]) -> Any:
        df = self._dataflow
        inputs = [(s.name, s.dtype, s.shape) for s in input_signature]

        def bad(why: str, err: BaseException) -> None:
            e = ValueError(why)
            e.__cause__ = err
            self._failure = e  # the dataset ends here; the trainer raises failure() at OutOfRangeError

        df.reset_state()
        gen = _checked_generator(df, inputs, self.describe(), bad)
        sig = tuple(tf.TensorSpec(None, s.dtype) for s in input_signature)
        return tf.data.Dataset.from_generator(gen, output_signature=sig)

    def failure(self) -> BaseException | None:
        """The error of a datapoint of the DataFlow that did not fit the inputs (which ended the
        dataset), if any."""
        return self._failure

    def _get_input_tensors(self) -> list[Any]:
        ret = self._iterator.get_next()
        ret = list(ret) if isinstance(ret, (tuple, list)) else [ret]
        for t, s in zip(ret, self._input_signature):
            t.set_shape(t.shape.merge_with(s.shape))
        return ret

    def _get_callbacks(self) -> list[Callback]:
        return [_InitCallback(lambda: self._iterator.initializer, "TFDatasetInputCallback")]

    def size(self) -> int:
        if self._dataflow is not None:
            return dataflow_len(self._dataflow)
        raise ValueError("TFDatasetInput has no known size; pass steps_per_epoch explicitly")

    @staticmethod
    def dataflow_to_dataset(df: Any, types: Sequence[Any]) -> Any:
        """A ``tf.data.Dataset`` of the (list) datapoints of ``df``, one tuple of components of
        ``types`` each; calls ``df.reset_state()``. Finite when ``df`` is: add ``.repeat()`` to train
        on it for several epochs. The first datapoint of each pass is checked (number of
        components, conversion to ``types``) and the others' number of components, with errors
        naming the dataflow and the component; converting the others is left to
        ``from_generator``, at no added cost.

        :param df: a DataFlow producing lists (anything with ``__iter__`` and ``reset_state``).
        :param types: the ``tf.DType`` of every component.
        """
        if not is_dataflow(df):
            raise TypeError(f"TFDatasetInput.dataflow_to_dataset needs a DataFlow, got {df!r}")
        if not isinstance(types, (list, tuple)) or not types:
            raise TypeError(f"TFDatasetInput.dataflow_to_dataset: types must be a list of tf.DType, one per "
                            f"component, got {types!r}")
        dtypes = [tf.as_dtype(t) for t in types]
        df.reset_state()
        gen = _first_checked_generator(df, [(None, t, tf.TensorShape(None)) for t in dtypes],
                                       "TFDatasetInput.dataflow_to_dataset")
        sig = tuple(tf.TensorSpec(None, t) for t in dtypes)
        return tf.data.Dataset.from_generator(gen, output_signature=sig)
