"""Former location of ``trainbus.bus.modpaths``, kept so that old import paths work: this module object
*is* ``trainbus.bus.modpaths``."""

import importlib as _importlib
import sys as _sys

_sys.modules[__name__] = _importlib.import_module("trainbus.bus.modpaths")
