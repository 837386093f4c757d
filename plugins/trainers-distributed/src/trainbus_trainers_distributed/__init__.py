"""trainbus trainer strategies on TensorFlow's distributed runtime (ps + workers)."""

from __future__ import annotations

from trainbus_trainers_distributed.trainers import (
    DistributedSessionCreator,
    DistributedTrainerBase,
    DistributedTrainerParameterServer,
    DistributedTrainerReplicated,
    serve_parameter_server,
)

__all__ = ["DistributedTrainerParameterServer", "DistributedTrainerReplicated", "DistributedTrainerBase",
           "DistributedSessionCreator", "serve_parameter_server"]
