"""Input sources: how a trainer's tower gets its input tensors.

``FeedInput`` feeds placeholders from a DataFlow (merged into the step's single
``Session.run``), ``QueueInput`` fills a TF queue from a DataFlow in a thread,
``BatchQueueInput`` batches single datapoints in such a queue, ``StagingInput`` prefetches
another input source into a ``StagingArea``, ``TFDatasetInput`` reads a ``tf.data.Dataset``,
``TensorInput`` takes tensors from a function (starting the queue runners they need),
``ZMQInput`` receives datapoints from a ZMQ endpoint and ``DummyConstantInput`` produces
constant zeros.

Whatever the source, the graph has a placeholder named after each input of the signature
(``x:0``, ``label:0``) once the source is set up: it is what the model reads under
``FeedInput``, and a name to feed by hand under the others.

Each source lives in a module of its own (``base``, ``feed``, ``queue``, ``zmq``, ``staging``,
``tfdata``, ``tensor``); import them from this package.
"""

from trainbus.input_source.base import (FeedfreeInput, InputSource, ProxyInputSource, build_or_reuse_placeholder,
                                        remap_input_source)
from trainbus.input_source.feed import FeedInput, PlaceholderInput
from trainbus.input_source.queue import BatchQueueInput, QueueInput
from trainbus.input_source.staging import StagingInput
from trainbus.input_source.tensor import DummyConstantInput, TensorInput
from trainbus.input_source.tfdata import TFDatasetInput
from trainbus.input_source.zmq import ZMQInput

__all__ = ["InputSource", "PlaceholderInput", "FeedInput", "FeedfreeInput", "QueueInput", "BatchQueueInput",
           "StagingInput", "TFDatasetInput", "DummyConstantInput", "TensorInput", "ZMQInput", "ProxyInputSource",
           "remap_input_source", "build_or_reuse_placeholder"]
