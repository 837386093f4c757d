"""Multi-device trainers on logical CPU devices: placement, numerics, broadcast, errors."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import trainbus.train
from trainbus.callbacks import Callback
from trainbus.testing import TinyModel, tiny_dataflow
from trainbus.tfutils.sessinit import SessionInit

tf1 = tf.compat.v1

N_CPU = 4


def cpu_config(n: int = N_CPU):
    conf = tf1.ConfigProto(device_count={"CPU": n}, allow_soft_placement=True)
    conf.intra_op_parallelism_threads = 1
    conf.inter_op_parallelism_threads = 2
    return conf


class Grab(Callback):
    """Reads variables (by name) after training, and the collections of the graph."""

    _chief_only = False

    def __init__(self, names):
        self.names = names
        self.values = {}
        self.ran = []

    def _setup_graph(self):
        by_name = {v.op.name: v for v in tf1.global_variables() + tf1.local_variables()}
        self._vars = {n: by_name[n].read_value() for n in self.names}

    def _before_train(self):
        self.at_start = self.trainer.sess.run(self._vars)

    def _trigger_epoch(self):
        self.ran.append(self.epoch_num)

    def _after_train(self):
        self.values = self.trainer.sess.run(self._vars)


def run(trainer, batch, steps, callbacks=(), max_epoch=1, session_init=None, data="queue", model=None, n=32):
    ds = tiny_dataflow(n=n, batch=batch)
    kw = {}
    if data == "queue":
        kw["data"] = trainbus.input_source.QueueInput(ds)
    else:
        kw["dataflow"] = ds
    cfg = trainbus.train.TrainConfig(model=model or TinyModel(), callbacks=list(callbacks), extra_callbacks=[],
                                     monitors=[], max_epoch=max_epoch, steps_per_epoch=steps,
                                     session_config=cpu_config(), session_init=session_init, **kw)
    trainbus.train.launch_train_with_config(cfg, trainer)
    return trainer


def simple_reference(batch, steps, max_epoch=1):
    g = Grab(["W", "b"])
    run(trainbus.train.SimpleTrainer(), batch, steps, [g], max_epoch=max_epoch)
    return g.values


def test_replicated_towers_are_placed_one_per_device(logdir):
    g = Grab(["W", "tower1/W", "tower2/W"])
    tr = run(trainbus.train.SyncMultiGPUTrainerReplicated(3), 2, 2, [g])
    assert tr.devices == [0, 1, 2] and tr.mode == "cpu"
    towers = tr.towers.training()
    assert [t.ns_name for t in towers] == ["tower0", "tower1", "tower2"]
    assert [t.vs_name for t in towers] == ["", "tower1", "tower2"]
    graph = tr.graph
    for i in range(3):
        dev = tf.DeviceSpec.from_string(towers[i]["logits"].op.device)
        assert (dev.device_type, dev.device_index) == ("CPU", i)
    w1 = graph.get_operation_by_name("tower1/W")
    assert tf.DeviceSpec.from_string(w1.device).device_index == 1
    # summaries and update ops come from tower 0 only
    summaries = graph.get_collection(tf1.GraphKeys.SUMMARIES)
    assert summaries and all(not s.name.startswith(("tower1", "tower2")) for s in summaries)


@pytest.mark.parametrize("mode,ntower", [("cpu", 2), ("hierarchical", 4)])
def test_replicated_equals_single_tower_with_total_batch(logdir, mode, ntower):
    total, steps = 8, 3
    ref = simple_reference(total, steps)
    names = ["W", "b"] + [f"tower{i}/{v}" for i in range(1, ntower) for v in ("W", "b")]
    g = Grab(names)
    run(trainbus.train.SyncMultiGPUTrainerReplicated(ntower, mode=mode), total // ntower, steps, [g])
    assert not np.allclose(ref["W"], 0)
    np.testing.assert_allclose(g.values["W"], ref["W"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.values["b"], ref["b"], rtol=1e-5, atol=1e-6)
    for i in range(1, ntower):
        np.testing.assert_array_equal(g.values[f"tower{i}/W"], g.values["W"])
        np.testing.assert_array_equal(g.values[f"tower{i}/b"], g.values["b"])


def test_replicated_sum_mode_doubles_the_update(logdir):
    ref = simple_reference(8, 1)
    g = Grab(["W", "tower1/W"])
    run(trainbus.train.SyncMultiGPUTrainerReplicated([0, 1], average=False), 4, 1, [g])
    # one step from zeros: summing two half-batch mean gradients gives twice the averaged update
    np.testing.assert_allclose(g.values["W"], 2 * ref["W"], rtol=1e-5, atol=1e-6)


def test_replicated_broadcasts_main_tower_after_session_init(logdir):
    g = Grab(["W", "tower1/W"])

    class Loader(SessionInit):
        def _run_init(self, sess):
            var = [v for v in tf1.global_variables() if v.op.name == "W"][0]
            var.load(np.full(var.shape.as_list(), 0.5, "float32"), sess)

    run(trainbus.train.SyncMultiGPUTrainerReplicated(2), 4, 1, [g], session_init=Loader())
    np.testing.assert_array_equal(g.at_start["W"], np.full((4, 3), 0.5, "float32"))
    np.testing.assert_array_equal(g.at_start["tower1/W"], g.at_start["W"])


class Perturb(Callback):
    """Adds 1 to tower 1's copy of W before training, and records W copies at the end."""

    _chief_only = False

    def _setup_graph(self):
        by_name = {v.op.name: v for v in tf1.global_variables() + tf1.local_variables()}
        v = by_name["tower1/W"]
        self.op = tf1.assign_add(v, tf.ones(v.shape))
        self.w = by_name["W"].read_value()
        self.w1 = v.read_value()

    def _before_train(self):
        self.trainer.sess.run(self.op)

    def _after_train(self):
        self.final = self.trainer.sess.run([self.w, self.w1])


def test_broadcast_every_epoch_resynchronizes_copies(logdir):
    p = Perturb()
    run(trainbus.train.SyncMultiGPUTrainerReplicated(2), 4, 2, [p])
    np.testing.assert_array_equal(p.final[0], p.final[1])

    class NoBroadcast(trainbus.train.SyncMultiGPUTrainerReplicated):
        BROADCAST_EVERY_EPOCH = False

    p2 = Perturb()
    run(NoBroadcast(2), 4, 2, [p2])
    np.testing.assert_allclose(p2.final[1] - p2.final[0], np.ones((4, 3)), rtol=1e-6)


@pytest.mark.parametrize("ps_device", ["cpu", "gpu"])
def test_parameter_server_equals_single_tower(logdir, ps_device):
    ref = simple_reference(8, 3)
    g = Grab(["W", "b"])
    tr = run(trainbus.train.SyncMultiGPUTrainerParameterServer([0, 1], ps_device=ps_device), 4, 3, [g])
    np.testing.assert_allclose(g.values["W"], ref["W"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.values["b"], ref["b"], rtol=1e-5, atol=1e-6)
    graph = tr.graph
    assert not [op for op in graph.get_operations() if op.name.startswith("tower1/W")]
    wdev = tf.DeviceSpec.from_string(graph.get_operation_by_name("W").device)
    bdev = tf.DeviceSpec.from_string(graph.get_operation_by_name("b").device)
    if ps_device == "cpu":
        assert (wdev.device_index, bdev.device_index) == (0, 0)
    else:  # spread over the tower devices, least loaded first
        assert {wdev.device_index, bdev.device_index} == {0, 1}
    t1 = tf.DeviceSpec.from_string(tr.towers.training()[1]["logits"].op.device)
    assert t1.device_index == 1


def test_sync_multigpu_factory_and_staged_dataflow(logdir):
    tr = trainbus.train.SyncMultiGPUTrainer(2)
    assert isinstance(tr, trainbus.train.SyncMultiGPUTrainerParameterServer) and tr.ps_device == "cpu"
    g = Grab(["W"])
    # a DataFlow (not an InputSource) gets staged prefetching because the trainer has 2 devices
    run(tr, 4, 3, [g], data="dataflow")
    assert not np.allclose(g.values["W"], 0)
    assert any(op.type == "Stage" for op in tr.graph.get_operations())


def test_async_trains_shared_variables(logdir):
    g = Grab(["W", "b"])
    rec = []

    class Cost(Callback):
        _chief_only = False

        def _before_run(self, ctx):
            return [self.trainer.towers.training()[0]["cost"]]

        def _after_run(self, ctx, values):
            rec.append(float(values.results[0]))

    tr = run(trainbus.train.AsyncMultiGPUTrainer(2), 4, 8, [g, Cost()], max_epoch=2)
    assert not [op for op in tr.graph.get_operations() if op.name == "tower1/W"]
    assert len(rec) == 16 and np.mean(rec[-4:]) < np.mean(rec[:4])
    # one tower: identical to SimpleTrainer (scale 1/1)
    ref = simple_reference(4, 3)
    g1 = Grab(["W"])
    run(trainbus.train.AsyncMultiGPUTrainer(1), 4, 3, [g1])
    np.testing.assert_allclose(g1.values["W"], ref["W"], rtol=1e-6)


def test_chief_only_callbacks_run_in_one_process(logdir):
    chief, everyone = Grab(["W"]), Grab(["W"])
    chief._chief_only = True
    tr = run(trainbus.train.SyncMultiGPUTrainerReplicated(2), 4, 1, [chief, everyone], max_epoch=2)
    assert tr.is_chief is True
    assert chief.ran == [1, 2] and everyone.ran == [1, 2]


def test_missing_devices_are_reported(logdir, caplog):
    from trainbus.utils import logger

    msgs = []
    orig = logger.warning
    logger.warning = lambda m, *a, **k: (msgs.append(str(m)), orig(m, *a, **k))
    try:
        cfg = trainbus.train.TrainConfig(model=TinyModel(), data=trainbus.input_source.QueueInput(tiny_dataflow(batch=4)),
                                         extra_callbacks=[], monitors=[], max_epoch=1, steps_per_epoch=1,
                                         session_config=cpu_config(1))
        trainbus.train.launch_train_with_config(cfg, trainbus.train.SyncMultiGPUTrainerReplicated(2))
    finally:
        logger.warning = orig
    assert any("/cpu:1" in m and "device_count" in m for m in msgs), msgs


def test_bad_arguments_fail_at_construction():
    T = trainbus.train.SyncMultiGPUTrainerReplicated
    with pytest.raises(ValueError, match="mode='nccl' needs GPUs"):
        T(2, mode="nccl")
    with pytest.raises(ValueError, match="needs GPUs"):
        T(2, use_nccl=True)
    with pytest.raises(ValueError, match="mode must be one of"):
        T(2, mode="ring")
    with pytest.raises(ValueError, match="at least one device"):
        T(0)
    with pytest.raises(ValueError, match="lists a device twice"):
        T([0, 0])
    with pytest.raises(TypeError, match="non-negative int"):
        T(["0", 1])
    with pytest.raises(ValueError, match="ps_device must be 'cpu' or 'gpu'"):
        trainbus.train.SyncMultiGPUTrainerParameterServer(2, ps_device="tpu")
    assert T(2).mode == "cpu"  # no GPU here: the heuristic never picks nccl
    assert T(2, use_nccl=False).mode == "cpu"
    assert trainbus.train.SyncMultiGPUTrainerParameterServer(2).ps_device == "gpu"
    assert trainbus.train.SyncMultiGPUTrainerParameterServer(4).ps_device == "cpu"
    assert T.BROADCAST_EVERY_EPOCH is True


def test_non_main_towers_do_not_duplicate_update_ops_or_summaries(logdir):
    class CountingModel(TinyModel):
        def build_graph(self, x, y):
            cost = super().build_graph(x, y)
            tf1.add_to_collection(tf1.GraphKeys.UPDATE_OPS, tf.identity(cost, name="fake_update"))
            tf1.summary.scalar("per_tower_cost", cost)
            return cost

    tr = run(trainbus.train.SyncMultiGPUTrainerReplicated(3), 2, 1, model=CountingModel())
    updates = tr.graph.get_collection(tf1.GraphKeys.UPDATE_OPS)
    assert [u.name for u in updates] == ["tower0/fake_update:0"]
    names = [s.name for s in tr.graph.get_collection(tf1.GraphKeys.SUMMARIES) if "per_tower_cost" in s.name]
    assert len(names) == 1 and names[0].startswith("tower0/")
    # the towers were still all built
    assert len(tr.towers.training()) == 3 and tr.graph.get_operation_by_name("tower2/fake_update")


def test_the_multi_device_trainers_build_from_the_cores_graph_builder():
    """The trainers of this distribution and of trainbus-trainers-distributed build from
    ``trainbus.graph_builder`` itself (no copy of their own)."""
    import importlib.util

    import trainbus.graph_builder as gb
    import trainbus_trainers_distributed.trainers as dist
    import trainbus_trainers_multigpu.trainers as multi

    assert multi.SyncMultiGPUReplicatedBuilder is gb.SyncMultiGPUReplicatedBuilder
    assert dist.DataParallelBuilder is gb.DataParallelBuilder
    assert importlib.util.find_spec("trainbus_trainers_multigpu._build") is None
