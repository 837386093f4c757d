"""What a trainer resumes from a checkpoint besides its variables: the callbacks' saved states
(the ``.trainbus.json`` side file beside the checkpoint) and where inside an epoch it stopped.

:class:`ResumableTrainer` is a base of :class:`trainbus.train.base.Trainer`; its methods read
the trainer's registered callbacks (``_callbacks``, ``plugin_manager``), its loop counters
(``loop``) and its input source, and nothing else.
"""

from __future__ import annotations

from typing import Any

from trainbus import checkpoint as _ckpt
from trainbus.callbacks.base import Callback
from trainbus.callbacks.monitor import MonitorBase
from trainbus.utils import logger

__all__ = ["ResumableTrainer"]


class ResumableTrainer:
    """Resumable state of a trainer: the callbacks' ``_state_dict()`` by ``state_key``, read
    from the restored checkpoint's side file, and the position inside the first epoch."""

    #: Whether other processes advance ``global_step`` too (a distributed runtime's shared
    #: variable): each process then counts its epochs in its own steps, and a step found at the
    #: start says nothing about where this process's first epoch stands.
    global_step_shared = False

    _resume_states: dict[str, Any] | None = None  # read from the restored checkpoint
    _resume_states_file: str | None = None

    # ------------------------------------------------------------------ callback states
    def _stateful_members(self) -> list[tuple[str, Callback]]:
        """``(state_key, callback)`` for every registered callback and monitor that saves state
        (see ``Callback.state_key``). Two of them with one key is an error naming both."""
        pm = self.plugin_manager  # type: ignore[attr-defined]
        members = list(pm.ordered) if pm is not None else list(self._callbacks)  # type: ignore[attr-defined]
        out: list[tuple[str, Callback]] = []
        seen: dict[str, tuple[int, Callback]] = {}
        for pos, cb in enumerate(members):
            has_state = getattr(cb, "_has_state", None)
            if has_state is None or not has_state():
                continue
            key = cb.state_key
            if key in seen:
                other_pos, other = seen[key]
                raise ValueError(
                    f"Two stateful callbacks have the state key {key!r}: {other} ({self._where_is(other)}) and {cb} "
                    f"({self._where_is(cb)}); on resume their saved states could not be told apart. "
                    "Give one of them its own key: cb.set_state_key('...') (or cb.state_key = '...').")
            seen[key] = (pos, cb)
            out.append((key, cb))
        return out

    def _where_is(self, cb: Any) -> str:
        for i, other in enumerate(self._callbacks):  # type: ignore[attr-defined]
            if other is cb:
                return f"callbacks[{i}]"
        return "a monitor" if isinstance(cb, MonitorBase) else "added by the trainer"

    def callback_states(self) -> dict[str, Any]:
        """The ``_state_dict()`` of every stateful callback and monitor, by ``state_key``."""
        states = {}
        for key, cb in self._stateful_members():
            st = cb._state_dict()
            if st is not None:
                states[key] = st
        return states

    def load_callback_states(self, states: dict[str, Any], source: str | None = None) -> None:
        """Give each stateful callback the saved state of its ``state_key`` (see
        ``callback_states``). Saved states no callback claims, and stateful callbacks that find
        no saved state, are each reported in one log line."""
        where = f" in {source}" if source else ""
        members = self._stateful_members()
        keys = {k for k, _ in members}
        restored, fresh = [], []
        for key, cb in members:
            if key in states:
                cb._load_state_dict(states[key])
                restored.append(key)
            else:
                fresh.append(key)
        if restored:
            logger.info(f"Restored the state of callback(s) {', '.join(restored)}{where}.")
        unclaimed = sorted(k for k in states if k not in keys)
        if unclaimed:
            logger.warning(
                f"Saved callback state{where} that no callback of this run claims, not used: {', '.join(unclaimed)}. "
                "A callback whose class or identifying arguments changed has another state_key; set its state_key "
                "to the saved one to continue its state.")
        if fresh:
            logger.warning(f"Stateful callback(s) with no saved state{where}, starting fresh: {', '.join(fresh)}.")

    def _read_resume_states(self, checkpoint: str | None) -> None:
        """Remember the callback states saved beside ``checkpoint`` (the restored one), given
        to the callbacks when training starts."""
        if checkpoint:
            self._resume_states = _ckpt.read_callback_states(checkpoint)
            self._resume_states_file = _ckpt.state_file(checkpoint)

    def _restore_callback_states(self) -> None:
        if self._resume_states is not None:
            self.load_callback_states(self._resume_states, self._resume_states_file)

    # ------------------------------------------------------------------ position in the first epoch
    def _done_in_first_epoch(self) -> int:
        """Steps of the starting epoch already done by the run this one resumes (0 unless the
        restored global step lies strictly inside the starting epoch)."""
        loop = self.loop  # type: ignore[attr-defined]
        if self.global_step_shared:
            return 0
        done = loop.global_step - (loop.starting_epoch - 1) * loop.steps_per_epoch
        return done if 0 < done < loop.steps_per_epoch else 0

    def _skip_consumed_datapoints(self) -> str:
        """Before the input starts: when resuming inside an epoch over an input that makes one
        pass of its data per epoch (its size is steps_per_epoch) and can skip ahead, have it pass
        over the datapoints the interrupted epoch consumed. Returns the sentence saying which
        policy applies."""
        done = self._done_in_first_epoch()
        if not done:
            return ""
        src = self._input_source  # type: ignore[attr-defined]
        try:
            one_pass = src is not None and int(src.size()) == self.loop.steps_per_epoch  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - an input of unknown size
            one_pass = False
        if one_pass and src.skip_datapoints(done):
            return (f"The input passes over the {done} datapoints this epoch already consumed, so the epoch sees "
                    "the rest of its pass.")
        why = "its size is not steps_per_epoch" if src is not None and not one_pass else "it cannot skip ahead"
        return (f"The input starts where it starts ({why}): the {done} datapoints this epoch already consumed are "
                "not skipped.")

    def _first_local_step(self, data_policy: str = "") -> int:
        """Where the first epoch starts: a run resumed in the middle of epoch N (its global step
        between the ends of epochs N-1 and N) runs only that epoch's remaining steps, so that
        every epoch N ends at global step N * steps_per_epoch."""
        loop = self.loop  # type: ignore[attr-defined]
        done = self._done_in_first_epoch()
        if done:
            logger.info(f"Resuming inside epoch {loop.starting_epoch} at global step {loop.global_step}: it runs its "
                        f"remaining {loop.steps_per_epoch - done} steps and ends at global step "
                        f"{loop.starting_epoch * loop.steps_per_epoch}. {data_policy}".rstrip())
        return done
