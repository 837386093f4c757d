"""A misspelled name imported from a trainbus module is an ``ImportError`` naming the closest
names; looking the name up as an attribute stays an ``AttributeError`` (``hasattr`` is False)."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("module, wrong, right", [
    ("trainbus.callbacks", "PeriodicTriger", "PeriodicTrigger"),  # a core name
    ("trainbus.train", "TrainConfg", "TrainConfig"),
    ("trainbus", "TrainConfg", "TrainConfig"),
    ("trainbus.tfutils", "get_global_step_vale", "get_global_step_value"),
])
def test_from_import_of_a_misspelled_name_suggests(module, wrong, right):
    with pytest.raises(ImportError) as info:
        exec(f"from {module} import {wrong}", {})
    msg = str(info.value)
    assert msg.startswith(f"cannot import name {wrong!r} from {module!r}; did you mean {right!r}")
    assert info.value.name == module
    mod = importlib.import_module(module)
    assert not hasattr(mod, wrong)
    with pytest.raises(AttributeError, match=f"has no attribute {wrong!r}"):
        getattr(mod, wrong)


def test_a_misspelled_plugin_name_suggests_the_installed_one(tmp_path):
    from fakedist import make_dist, on_path

    root = make_dist(tmp_path / "site", "trainbus-suggest", "0.1",
                     {"trainbus.callbacks": {"NanStopper": "sg:NanStopper"}},
                     {"sg": "from trainbus.callbacks import Callback\n__all__ = ['NanStopper']\n"
                            "class NanStopper(Callback):\n    pass\n"})
    with on_path(root):
        with pytest.raises(ImportError, match=r"^cannot import name 'NanStoper' from 'trainbus.callbacks'; "
                                              r"did you mean 'NanStopper'"):
            exec("from trainbus.callbacks import NanStoper", {})


def test_a_name_with_nothing_close_says_where_to_look():
    with pytest.raises(ImportError, match=r"cannot import name 'Xyzzy' from 'trainbus.callbacks' \(see `trainbus "
                                          r"plugins` for every installed name"):
        exec("from trainbus.callbacks import Xyzzy", {})
