"""The hand-written part of ``trainbus port``'s TensorFlow rules: the ``tf.contrib`` pieces that
tensorpack code uses and that TensorFlow's own upgrader (``tf_upgrade_v2``) does not convert.
Everything TensorFlow's upgrader knows is taken from it at run time, not repeated here."""

from __future__ import annotations

#: members of ``tf.contrib.rnn`` that live on in ``tf.compat.v1.nn.rnn_cell`` under the same name
RNN_CELL = frozenset({
    "RNNCell", "LSTMStateTuple", "BasicLSTMCell", "BasicRNNCell", "GRUCell", "LSTMCell", "MultiRNNCell",
    "DropoutWrapper", "ResidualWrapper", "DeviceWrapper",
})

#: members of ``tf.contrib.rnn`` that live on in ``tf.compat.v1.nn``
RNN_NN = frozenset({"static_rnn", "static_bidirectional_rnn", "static_state_saving_rnn"})

#: members of ``tf.contrib.rnn`` replaced by another cell: name -> (replacement in rnn_cell, note)
RNN_REPLACED = {
    "LSTMBlockCell": ("LSTMCell", "tf.contrib.rnn.LSTMBlockCell (a fused kernel, gone with tf.contrib) became "
                                  "tf.nn.rnn_cell.LSTMCell: the same LSTM without peepholes and with forget_bias 1.0 "
                                  "by default, computed by separate ops"),
}

#: public names of ``tf_slim`` (1.1): the home of ``tf.contrib.slim``, of ``tf.contrib.layers``'s
#: layers and of ``tf.contrib.framework``'s variable and arg-scope helpers
TF_SLIM = frozenset({
    "GDN", "RevBlock", "VariableDeviceChooser", "adaptive_clipping_fn", "add_arg_scope", "add_model_variable",
    "apply_regularization", "arg_scope", "arg_scope_func_key", "arg_scoped_arguments", "assert_global_step",
    "assert_or_get_global_step", "assign_from_checkpoint", "assign_from_checkpoint_fn", "assign_from_values",
    "assign_from_values_fn", "avg_pool2d", "avg_pool3d", "batch_norm", "bias_add", "bucketize", "conv1d", "conv2d",
    "conv2d_in_plane", "conv2d_transpose", "conv3d", "conv3d_transpose", "convolution", "convolution1d",
    "convolution2d", "convolution2d_in_plane", "convolution2d_transpose", "convolution3d", "convolution3d_transpose",
    "create_global_step", "current_arg_scope", "dense_to_sparse", "dropout", "elu", "filter_variables", "flatten",
    "fully_connected", "gdn", "get_global_step", "get_local_variables", "get_model_variables",
    "get_or_create_global_step", "get_trainable_variables", "get_unique_variable", "get_variable_full_name",
    "get_variables", "get_variables_by_name", "get_variables_by_suffix", "get_variables_to_restore",
    "global_variable", "group_norm", "has_arg_scope", "images_to_sequence", "instance_norm", "l1_l2_regularizer",
    "l1_regularizer", "l2_regularizer", "layer_norm", "legacy_fully_connected", "legacy_linear", "legacy_relu",
    "linear", "local_variable", "max_pool2d", "max_pool3d", "maxout", "model_variable", "one_hot_encoding",
    "optimize_loss", "pool", "recompute_grad", "relu", "relu6", "repeat", "rev_block", "scale_gradient",
    "separable_conv2d", "separable_convolution2d", "sequence_to_images", "softmax", "spatial_softmax", "stack",
    "sum_regularizer", "summarize_activation", "summarize_activations", "summarize_biases", "summarize_collection",
    "summarize_tensor", "summarize_tensors", "summarize_variables", "summarize_weights", "unit_norm", "variable",
    "variance_scaling_initializer", "xavier_initializer", "xavier_initializer_conv2d",
    # modules of tf_slim
    "layers", "losses", "metrics", "nets", "learning", "evaluation", "summaries", "queues", "data",
})

#: ``tf.contrib`` submodules with no maintained home that a rule could map to: name -> suggestion
CONTRIB_NO_HOME = {
    "eager": "TensorFlow 2 runs eagerly by default: use tf.executing_eagerly() / "
             "tf.compat.v1.enable_eager_execution(), and tf.Variable / tf.GradientTape in place of tfe's helpers",
    "distributions": "install tensorflow-probability and use tfp.distributions",
    "graph_editor": "rebuild the graph with the changed pieces (tf.compat.v1.import_graph_def's input_map)",
    "cudnn_rnn": "use tf.compat.v1.nn.rnn_cell.LSTMCell / GRUCell (or tf.keras.layers.LSTM with Keras 2)",
    "seq2seq": "there is no maintained graph-mode home; keep a copy of the code from TensorFlow 1.15",
    "image": "use tf.raw_ops.ImageProjectiveTransformV3 or tf.image's functions",
    "opt": "use tf.compat.v1.train's optimizers, or keep a copy of the optimizer from TensorFlow 1.15",
    "staging": "use tensorflow.python.ops.data_flow_ops.StagingArea",
    "nccl": "use tensorflow.python.ops.nccl_ops (GPU only)",
}

#: ``tf.contrib.framework`` members with a home in core TensorFlow (relative to ``tf.compat.v1``)
FRAMEWORK_CORE = {
    "get_or_create_global_step": "train.get_or_create_global_step",
    "get_global_step": "train.get_global_step",
    "get_name_scope": "get_default_graph().get_name_scope",
}

#: attribute paths (after the TensorFlow module) that need Keras 2 (``tf_keras``) in graph mode
KERAS2_PREFIXES = ("layers", "keras", "compat.v1.layers", "compat.v1.keras", "estimator", "nn.rnn_cell",
                   "compat.v1.nn.rnn_cell")
