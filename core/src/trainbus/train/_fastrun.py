"""Former location of ``trainbus.session.fastrun``, kept so that old import paths work: this
module object *is* ``trainbus.session.fastrun``."""

import importlib as _importlib
import sys as _sys

_sys.modules[__name__] = _importlib.import_module("trainbus.session.fastrun")
