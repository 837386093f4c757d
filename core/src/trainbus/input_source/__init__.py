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

from __future__ import annotations

from trainbus.bus import registry as _registry

__all__ = ["InputSource", "PlaceholderInput", "FeedInput", "FeedfreeInput", "QueueInput", "BatchQueueInput",
           "StagingInput", "TFDatasetInput", "DummyConstantInput", "TensorInput", "ZMQInput", "ProxyInputSource",
           "remap_input_source", "build_or_reuse_placeholder"]

# each name is imported from its module on first use: a training that feeds its data imports
# ``feed`` (and ``base``), not the queue, staging, tf.data, tensor and ZMQ sources
_LAZY = {
    "InputSource": "trainbus.input_source.base", "FeedfreeInput": "trainbus.input_source.base",
    "ProxyInputSource": "trainbus.input_source.base", "build_or_reuse_placeholder": "trainbus.input_source.base",
    "remap_input_source": "trainbus.input_source.base",
    "FeedInput": "trainbus.input_source.feed", "PlaceholderInput": "trainbus.input_source.feed",
    "QueueInput": "trainbus.input_source.queue", "BatchQueueInput": "trainbus.input_source.queue",
    "StagingInput": "trainbus.input_source.staging",
    "DummyConstantInput": "trainbus.input_source.tensor", "TensorInput": "trainbus.input_source.tensor",
    "TFDatasetInput": "trainbus.input_source.tfdata",
    "ZMQInput": "trainbus.input_source.zmq",
}
__getattr__, __dir__ = _registry.make_module_getattr(__name__, (), globals(), lazy=_LAZY,
                                                    submodules=("base", "feed", "queue", "staging", "tensor", "tfdata",
                                                                "zmq"))
