"""tensorpack's DataFlow library for trainbus, reachable as ``trainbus.dataflow.<Name>``.

Modules: ``base`` (the core's base classes, re-exported), ``common`` (composition), ``raw``
(sources from Python objects), ``parallel`` (multi-process/thread runners), ``parallel_map``
(parallel maps). Names resolve through the entry-point group ``trainbus.dataflow``; importing
this package imports none of them.
"""
