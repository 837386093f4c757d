"""tensorpack's ``graph_builder.distributed`` path: it had no public names there either (its
builders were internal to the distributed trainers, which here live in
``trainbus-trainers-distributed`` and build from :mod:`trainbus.graph_builder`)."""

__all__: list[str] = []
