"""Former location of ``trainbus.exceptions``, kept so that old import paths work: this module object
*is* ``trainbus.exceptions``."""

import importlib as _importlib
import sys as _sys

_sys.modules[__name__] = _importlib.import_module("trainbus.exceptions")
