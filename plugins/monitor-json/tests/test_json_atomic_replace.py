"""JSONWriter replaces stats.json atomically: every write is a new file renamed over the old one,
so a reader that opened the file earlier keeps reading one complete version, and no temporary
file is left behind."""

from __future__ import annotations

import json
import os

import trainbus.callbacks
from trainbus.callbacks import Callback, CallbackFactory
from trainbus.testing import train_tiny


class OpenAtEpochStart(Callback):
    """Opens stats.json (if present) at each epoch's start and keeps the file object."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.handles: dict[int, object] = {}

    def _before_epoch(self) -> None:
        if os.path.exists(self.path):
            self.handles[self.epoch_num] = open(self.path, encoding="utf-8")


def test_every_write_is_a_new_file_and_old_readers_see_a_complete_version(logdir):
    path = os.path.join(str(logdir), "stats.json")
    opener = OpenAtEpochStart(path)
    put = CallbackFactory(trigger=lambda cb: cb.trainer.monitors.put_scalar("metric", float(cb.epoch_num)))
    train_tiny(callbacks=[put, opener], monitors=[trainbus.callbacks.JSONWriter()], max_epoch=4)
    try:
        assert sorted(opener.handles) == [2, 3, 4]
        inodes = {os.fstat(f.fileno()).st_ino for f in opener.handles.values()}
        inodes.add(os.stat(path).st_ino)
        assert len(inodes) == 4, "stats.json was rewritten in place instead of replaced"
        for epoch, f in opener.handles.items():
            records = json.loads(f.read())  # the version of that moment, complete
            assert [r["epoch_num"] for r in records] == list(range(1, epoch)), (epoch, records)
    finally:
        for f in opener.handles.values():
            f.close()
    final = json.loads(open(path, encoding="utf-8").read())
    assert [r["epoch_num"] for r in final] == [1, 2, 3, 4]
    assert [n for n in os.listdir(logdir) if "stats" in n] == ["stats.json"], os.listdir(logdir)
