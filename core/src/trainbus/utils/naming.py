"""Names shared by the graph builders and the callbacks that look them up."""

from __future__ import annotations

#: name of the op that increments the global step
GLOBAL_STEP_INCR_OP_NAME = "global_step_incr"

#: graph collection of extra tensors summarized with a moving average during training
MOVING_SUMMARY_OPS_KEY = "MOVING_SUMMARY_OPS"
