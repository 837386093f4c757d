"""The lazy facade modules share one ``__getattr__``/``__dir__`` (``registry.make_module_getattr``)
instead of each carrying a copy."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

FACADES = ["trainbus.predict", "trainbus.tfutils", "trainbus.train", "trainbus.dataflow", "trainbus.callbacks"]


@pytest.mark.parametrize("name", FACADES)
def test_each_facade_uses_the_shared_module_getattr(name):
    mod = importlib.import_module(name)
    for fn in (mod.__getattr__, mod.__dir__):
        assert fn.__qualname__.startswith("make_module_getattr.<locals>."), f"{name}.{fn.__name__} is its own copy"


def test_lazy_names_submodules_and_unknown_names_in_a_fresh_process():
    code = (
        "import sys, trainbus.predict as p, trainbus.tfutils as t, trainbus.train as tr\n"
        "assert 'trainbus.predict.config' not in sys.modules and 'tensorflow' not in sys.modules\n"
        "assert 'PredictConfig' in dir(p) and 'PredictConfig' not in vars(p)\n"
        "c = p.PredictConfig\n"
        "assert vars(p)['PredictConfig'] is c and c.__module__ == 'trainbus.predict.config'\n"
        "assert 'varmanip' in dir(t) and t.varmanip is sys.modules['trainbus.tfutils.varmanip']\n"
        "assert tr.Trainer.__module__ == 'trainbus.train.base'\n"
        "for m in (p, t):\n"
        "    try:\n"
        "        m.NoSuchThing\n"
        "    except AttributeError as e:\n"
        "        assert str(e) == f\"module {m.__name__!r} has no attribute 'NoSuchThing'\", e\n"
        "    else:\n"
        "        raise SystemExit('no error')\n"
        "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
