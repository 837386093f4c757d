"""trainbus.graph_builder (this distribution's ``graph_builder``, under tensorpack's path) on
logical CPU devices: DataParallelBuilder as tensorpack's GAN example calls it, the Sync/Async
builders' results against single-device arithmetic, and the placement, local-variable and
gradient helpers."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import trainbus
import trainbus.graph_builder as gb
from trainbus.graph_builder import (
    AsyncMultiGPUBuilder,
    DataParallelBuilder,
    GradientPacker,
    LeastLoadedDeviceSetter,
    OverrideCachingDevice,
    SyncMultiGPUParameterServerBuilder,
    SyncMultiGPUReplicatedBuilder,
    aggregate_grads,
    allreduce_grads_naive,
    merge_grad_list,
    override_to_local_variable,
    split_grad_list,
)
from trainbus.input_source import QueueInput, StagingInput
from trainbus.testing import batch_dataflow
from trainbus.tfutils.sesscreate import NewSessionCreator
from trainbus.tfutils.summary import MOVING_SUMMARY_OPS_KEY, add_moving_summary
from trainbus.tfutils.tower import TowerFunc, get_current_tower_context
from trainbus.train import TowerTrainer

tf1 = tf.compat.v1


def cpu_config(n=4):
    conf = tf1.ConfigProto(device_count={"CPU": n}, allow_soft_placement=True)
    conf.intra_op_parallelism_threads = 1
    conf.inter_op_parallelism_threads = 2
    return conf


def device_index(op_or_tensor):
    op = getattr(op_or_tensor, "op", op_or_tensor)
    spec = tf.DeviceSpec.from_string(op.device)
    return spec.device_type, spec.device_index


# --- tensorpack's GAN example: a TowerTrainer building its towers with DataParallelBuilder ---

class TinyGAN(trainbus.ModelDesc):
    def inputs(self):
        return [tf.TensorSpec([None, 2], tf.float32, "real")]

    def build_graph(self, real):
        z = tf1.random_normal([tf.shape(real)[0], 2], seed=3)
        with tf1.variable_scope("gen"):
            gw = tf1.get_variable("W", [2, 2], initializer=tf1.glorot_uniform_initializer(seed=1))
            gb_ = tf1.get_variable("b", [2], initializer=tf1.zeros_initializer())
            fake = tf.matmul(z, gw) + gb_
        with tf1.variable_scope("discrim"):
            dw = tf1.get_variable("W", [2, 1], initializer=tf1.glorot_uniform_initializer(seed=2))
            db = tf1.get_variable("b", [1], initializer=tf1.zeros_initializer())
            logit_real = tf.matmul(real, dw) + db
            logit_fake = tf.matmul(fake, dw) + db
        xent = tf.nn.sigmoid_cross_entropy_with_logits
        self.d_loss = tf.reduce_mean(xent(labels=tf.ones_like(logit_real), logits=logit_real)
                                     + xent(labels=tf.zeros_like(logit_fake), logits=logit_fake), name="d_loss")
        self.g_loss = tf.reduce_mean(xent(labels=tf.ones_like(logit_fake), logits=logit_fake), name="g_loss")
        add_moving_summary(self.d_loss, self.g_loss)
        tf1.summary.scalar("d_loss_summary", self.d_loss)
        all_vars = tf1.trainable_variables()
        self.g_vars = [v for v in all_vars if v.name.startswith("gen/")]
        self.d_vars = [v for v in all_vars if v.name.startswith("discrim/")]

    def optimizer(self):
        return tf1.train.GradientDescentOptimizer(0.05)


class MultiTowerGANTrainer(TowerTrainer):
    """Written the way tensorpack's GAN example writes its multi-GPU trainer."""

    def __init__(self, num_tower, input, model):
        super().__init__()
        raw_devices = [f"/cpu:{k}" for k in range(num_tower)]
        input = StagingInput(input)
        self.register_callback(input.setup(model.get_input_signature()))

        def get_cost(*inputs):
            model.build_graph(*inputs)
            return [model.d_loss, model.g_loss]

        self.tower_func = TowerFunc(get_cost, model.get_input_signature())
        devices = [LeastLoadedDeviceSetter(d, raw_devices) for d in raw_devices]
        self.setters = devices
        cost_list = DataParallelBuilder.call_for_each_tower(
            list(range(num_tower)), lambda: self.tower_func(*input.get_input_tensors()), devices)
        with tf1.name_scope("optimize"):
            d_loss = tf.add_n([x[0] for x in cost_list]) * (1.0 / num_tower)
            g_loss = tf.add_n([x[1] for x in cost_list]) * (1.0 / num_tower)
            opt = model.get_optimizer()
            g_min = opt.minimize(g_loss, var_list=model.g_vars, colocate_gradients_with_ops=True, name="g_op")
            with tf.control_dependencies([g_min]):
                d_min = opt.minimize(d_loss, var_list=model.d_vars, colocate_gradients_with_ops=True, name="d_op")
        self.train_op = d_min


def real_points(n=64, batch=8):
    rng = np.random.RandomState(0)
    pts = (rng.randn(n, 2) * 0.3 + 2.0).astype("float32")
    return batch_dataflow([pts], batch)


def test_gan_example_multi_tower_trainer_trains_on_cpu_towers(logdir):
    class Grab(trainbus.Callback):
        def _setup_graph(self):
            self._vars = {v.op.name: v.read_value() for v in tf1.trainable_variables()}

        def _before_train(self):
            self.start = self.trainer.sess.run(self._vars)

        def _after_train(self):
            self.end = self.trainer.sess.run(self._vars)

    grab = Grab()
    with tf.Graph().as_default() as g:
        model = TinyGAN()
        trainer = MultiTowerGANTrainer(2, QueueInput(real_points()), model)
        trainer.train_with_defaults(callbacks=[grab], steps_per_epoch=4, max_epoch=2, extra_callbacks=[], monitors=[],
                                    session_creator=NewSessionCreator(config=cpu_config()))
    assert trainer.global_step == 8
    towers = trainer.towers.training()
    assert [t.ns_name for t in towers] == ["tower0", "tower1"]
    assert [device_index(t["d_loss"]) for t in towers] == [("CPU", 0), ("CPU", 1)]
    # variables exist once and are spread over both devices, largest first to the emptiest
    names = sorted(grab.start)
    assert names == ["discrim/W", "discrim/b", "gen/W", "gen/b"]
    placed = {n: device_index(g.get_operation_by_name(n))[1] for n in names}
    assert placed == {"gen/W": 0, "gen/b": 1, "discrim/W": 1, "discrim/b": 0}
    # tower 0 created every variable (moving-summary averages included); its setter counted them
    totals = [0, 0]
    for v in g.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES):
        if v.op.name != "global_step":
            totals[device_index(v.op)[1]] += v.shape.num_elements()
    assert trainer.setters[0].ps_sizes == totals and trainer.setters[1].ps_sizes == [0, 0]
    for n in names:
        assert not np.allclose(grab.start[n], grab.end[n]), n
    # the second tower added no summaries or moving-summary ops
    assert [s.op.name for s in g.get_collection(tf1.GraphKeys.SUMMARIES) if "d_loss_summary" in s.op.name] == \
        ["tower0/d_loss_summary"]
    assert all(not m.name.startswith("tower1/") for m in g.get_collection(MOVING_SUMMARY_OPS_KEY))


# --- the Sync/Async builders, checked against one device's arithmetic ---

X = np.random.RandomState(1).rand(8, 3).astype("float32")
T = np.random.RandomState(2).rand(8, 2).astype("float32")
LR = 0.1


def expected_after_one_step(w0):
    """One plain gradient-descent step on the full batch, loss mean((XW - T)^2)."""
    grad = 2.0 * X.T @ (X @ w0 - T) / T.size
    return w0 - LR * grad


def make_tower_fn(k):
    def tower_fn():
        ctx = get_current_tower_context()
        i = ctx.index
        w = tf1.get_variable("W", [3, 2], initializer=tf1.constant_initializer(0.5))
        part = slice(i * 8 // k, (i + 1) * 8 // k)
        cost = tf.reduce_mean(tf.square(tf.matmul(tf.constant(X[part]), w) - tf.constant(T[part])))
        varlist = ctx.get_collection_in_tower(tf1.GraphKeys.TRAINABLE_VARIABLES) if ctx.has_own_variables \
            else tf1.trainable_variables()
        return tf1.train.GradientDescentOptimizer(LR).compute_gradients(cost, var_list=varlist)
    return tower_fn


def run_step(g, fetch_names, *ops):
    with tf1.Session(graph=g, config=cpu_config()) as sess:
        sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
        for op in ops:
            sess.run(op)
        by_name = {v.op.name: v for v in tf1.global_variables() + tf1.local_variables()}
        return {n: sess.run(by_name[n]) for n in fetch_names}


@pytest.mark.parametrize("mode", ["cpu", "gpu", "hierarchical", "collective"])
def test_replicated_builder_equals_one_device_step(mode):
    k = 2 if mode != "hierarchical" else 4
    with tf.Graph().as_default() as g:
        builder = SyncMultiGPUReplicatedBuilder(list(range(k)), average=True, mode=mode)
        grad_list = builder.call_for_each_tower(make_tower_fn(k))
        assert [v.op.name for _, v in grad_list[1]] == ["tower1/W"]
        train_op, post_init = builder.build(grad_list, lambda: tf1.train.GradientDescentOptimizer(LR))
        assert train_op.name == "train_op" and post_init.name == "sync_variables/sync_variables_from_main_tower"
        # copies are local variables: checkpoints hold the main copy only
        assert [v.op.name for v in tf1.global_variables()] == ["W"]
        assert {v.op.name for v in tf1.local_variables()} == {f"tower{i}/W" for i in range(1, k)}
        assert device_index(g.get_operation_by_name("tower1/W")) == ("CPU", 1)
        assert len(builder.grads) == k
        # tower 1 starts from different values until post_init copies tower 0's
        init_t1 = tf1.assign(g.get_collection(tf1.GraphKeys.LOCAL_VARIABLES)[0], tf.zeros([3, 2]))
        names = ["W"] + [f"tower{i}/W" for i in range(1, k)]
        vals = run_step(g, names, init_t1, post_init, train_op)
    want = expected_after_one_step(np.full((3, 2), 0.5, "float32"))
    for n in names:
        np.testing.assert_allclose(vals[n], want, rtol=1e-5, atol=1e-6)


def test_replicated_builder_sums_without_average_and_checks_arguments():
    with tf.Graph().as_default() as g:
        builder = SyncMultiGPUReplicatedBuilder([0, 1], average=False, mode="cpu")
        grad_list = builder.call_for_each_tower(make_tower_fn(2))
        train_op, post_init = builder.build(grad_list, lambda: tf1.train.GradientDescentOptimizer(LR))
        vals = run_step(g, ["W"], post_init, train_op)
    w0 = np.full((3, 2), 0.5, "float32")
    np.testing.assert_allclose(vals["W"], w0 - 2 * (w0 - expected_after_one_step(w0)), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="mode must be one of"):
        SyncMultiGPUReplicatedBuilder([0, 1], True, "ring")
    with pytest.raises(ValueError, match="mode='nccl' needs GPUs"):
        SyncMultiGPUReplicatedBuilder([0, 1], True, "nccl")
    with tf.Graph().as_default():
        single = SyncMultiGPUReplicatedBuilder([0], True, "cpu")
        train_op, post_init = single.build(single.call_for_each_tower(make_tower_fn(1)),
                                           lambda: tf1.train.GradientDescentOptimizer(LR))
        assert post_init is None
        with pytest.raises(ValueError, match="2 gradient lists for 1 towers"):
            single.build([[], []], lambda: None)


@pytest.mark.parametrize("ps_device", ["cpu", "gpu"])
def test_parameter_server_builder_equals_one_device_step(ps_device):
    with tf.Graph().as_default() as g:
        builder = SyncMultiGPUParameterServerBuilder([0, 1], ps_device=ps_device)
        grad_list = builder.call_for_each_tower(make_tower_fn(2))
        assert grad_list[0][0][1] is grad_list[1][0][1]      # one shared variable
        train_op = builder.build(grad_list, lambda: tf1.train.GradientDescentOptimizer(LR))
        assert len(builder.grads) == 1 and builder.grads[0][1].op.name == "W"
        assert device_index(g.get_operation_by_name("W")) == ("CPU", 0)
        assert device_index(builder.grads[0][0]) == ("CPU", 0)   # averaged next to the variable
        vals = run_step(g, ["W"], train_op)
    np.testing.assert_allclose(vals["W"], expected_after_one_step(np.full((3, 2), 0.5, "float32")), rtol=1e-5)
    with pytest.raises(ValueError, match="ps_device must be 'cpu' or 'gpu'"):
        SyncMultiGPUParameterServerBuilder([0, 1], "tpu")


def test_async_builder_applies_every_tower_scaled():
    with tf.Graph().as_default() as g:
        builder = AsyncMultiGPUBuilder([0, 1])
        assert builder.ps_device == "gpu" and AsyncMultiGPUBuilder(4).ps_device == "cpu"
        grad_list = builder.call_for_each_tower(make_tower_fn(2))
        train_op = builder.build(grad_list, lambda: tf1.train.GradientDescentOptimizer(LR))
        assert train_op.name == "train_op"
        applies = [op for op in g.get_operations() if op.name.startswith("async_apply_gradients/apply_grad_0")]
        assert applies
        vals = run_step(g, ["W"], train_op)
    w0 = np.full((3, 2), 0.5, "float32")
    # both halves' gradients at w0, each scaled by 1/2 (the variable is read before either update)
    # or the second tower's read after the first update: either way about one full-batch step
    np.testing.assert_allclose(vals["W"], expected_after_one_step(w0), rtol=0.02, atol=1e-3)


# --- helpers ---

def test_call_for_each_tower_scopes_devices_and_errors():
    with tf.Graph().as_default() as g:
        seen = []

        def fn():
            ctx = get_current_tower_context()
            seen.append((ctx.ns_name, ctx.vs_name, ctx.index, ctx.total, ctx.has_own_variables))
            return tf1.get_variable("v", [2], initializer=tf1.zeros_initializer())

        out = DataParallelBuilder.call_for_each_tower([0, 1, 2], fn, use_vs=[False, True, False])
        assert seen == [("tower0", "", 0, 3, True), ("tower1", "tower1", 1, 3, True), ("tower2", "", 2, 3, False)]
        assert [v.op.name for v in out] == ["v", "tower1/v", "v"]
        assert out[0] is out[2]
        assert [v.op.name for v in tf1.global_variables()] == ["v"]
        assert [v.op.name for v in tf1.local_variables()] == ["tower1/v"]
        assert [device_index(v.op) for v in out[:2]] == [("CPU", 0), ("CPU", 1)]
        assert DataParallelBuilder.build_on_towers is DataParallelBuilder.call_for_each_tower
        with pytest.raises(ValueError, match="1 devices for 2 towers"):
            DataParallelBuilder.call_for_each_tower([0, 1], fn, devices=["/cpu:0"])
        assert g.get_collection(tf1.GraphKeys.SUMMARIES) == []


def test_least_loaded_device_setter_balances_variables_by_size():
    with tf.Graph().as_default():
        setter = LeastLoadedDeviceSetter("/cpu:2", ["/cpu:0", "/cpu:1"])
        with tf1.device(setter):
            a = tf1.get_variable("a", [10])
            b = tf1.get_variable("b", [3])
            c = tf1.get_variable("c", [4])
            d = tf1.get_variable("d", [20])
            y = tf.add(a, 1.0, name="compute")
            with tf1.device("/cpu:3"):
                pinned = tf.identity(a, name="pinned")
        assert [device_index(v.op)[1] for v in (a, b, c, d)] == [0, 1, 1, 1]
        assert setter.ps_sizes == [10, 27]
        assert device_index(y) == ("CPU", 2) and device_index(pinned) == ("CPU", 3)
        assert str(setter) == "LeastLoadedDeviceSetter-/cpu:2"
    with pytest.raises(ValueError, match="ps_devices is empty"):
        LeastLoadedDeviceSetter("/cpu:0", [])


def test_override_to_local_variable_and_caching_device():
    with tf.Graph().as_default():
        with override_to_local_variable():
            lv = tf1.get_variable("lv", [2])
            with tf1.variable_scope("inner"):
                inner = tf1.get_variable("w", [2], collections=["custom", tf1.GraphKeys.GLOBAL_VARIABLES])
        with override_to_local_variable(enable=False):
            gv = tf1.get_variable("gv", [2])
        assert tf1.global_variables() == [gv]
        assert tf1.local_variables() == [lv, inner]
        assert lv in tf1.trainable_variables() and tf1.get_collection("custom") == [inner]

        caching = OverrideCachingDevice(["/cpu:1", "/cpu:2"], "/cpu:0", small_variable_size_threshold=5)
        with tf1.variable_scope("cached", custom_getter=caching):
            small = tf1.get_variable("small", [2])
            big1 = tf1.get_variable("big1", [8])
            big2 = tf1.get_variable("big2", [6])
            frozen = tf1.get_variable("frozen", [6], trainable=False)
        assert caching.sizes == [8, 6]
        assert frozen in tf1.local_variables() and small in tf1.global_variables()
        assert [v.op.name for v in (big1, big2)] == ["cached/big1", "cached/big2"]


def test_gradient_lists_reduce_and_pack():
    with tf.Graph().as_default():
        v1, v2 = tf.Variable([1.0, 2.0], name="v1"), tf.Variable([[3.0]], name="v2")
        g00, g01 = tf.constant([1.0, 2.0]), tf.constant([[4.0]])
        g10, g11 = tf.constant([3.0, 6.0]), tf.constant([[8.0]])
        grad_list = [[(g00, v1), (g01, v2)], [(g10, v1), (g11, v2)]]
        grads, variables = split_grad_list(grad_list)
        assert grads == [[g00, g01], [g10, g11]] and variables == [[v1, v2], [v1, v2]]
        assert merge_grad_list(grads, variables) == grad_list
        naive_avg = allreduce_grads_naive(grads, devices=["/cpu:0"])
        naive_sum = allreduce_grads_naive(grads, average=False)
        agg = aggregate_grads(grad_list)
        agg_dev = aggregate_grads(grad_list, colocation=False, devices=["/cpu:0"], average=False)
        with pytest.raises(ValueError, match="cannot be used with colocation=True"):
            aggregate_grads(grad_list, devices=["/cpu:0"])

        big = [tf.constant(np.arange(3000, dtype="float32").reshape(1000, 3)), tf.constant(np.ones(2000, "float32"))]
        packer = GradientPacker(2)
        assert packer.compute_strategy(big)
        packs = packer.pack(big)
        assert [p.shape.as_list() for p in packs] == [[2500], [2500]]
        back = packer.unpack(packs)
        assert not GradientPacker(8).compute_strategy([tf.constant([1.0])])   # too small to pack
        with pytest.raises(RuntimeError, match="only once"):
            packer.compute_strategy(big)
        with tf1.Session() as sess:
            r = sess.run([naive_avg, naive_sum, [g for g, _ in agg], [g for g, _ in agg_dev], back])
    np.testing.assert_allclose(r[0][0], [2.0, 4.0])
    np.testing.assert_allclose(r[0][1], [[6.0]])
    np.testing.assert_allclose(r[1][0], [4.0, 8.0])
    np.testing.assert_allclose(r[2][1], [[6.0]])
    np.testing.assert_allclose(r[3][0], [4.0, 8.0])
    np.testing.assert_array_equal(r[4][0], np.arange(3000, dtype="float32").reshape(1000, 3))
    np.testing.assert_array_equal(r[4][1], np.ones(2000, "float32"))


def test_public_names():
    for name in ["ModelDesc", "ModelDescBase", "InputDesc", "DataParallelBuilder", "SyncMultiGPUParameterServerBuilder",
                 "SyncMultiGPUReplicatedBuilder", "AsyncMultiGPUBuilder", "LeastLoadedDeviceSetter",
                 "override_to_local_variable", "allreduce_grads", "aggregate_grads", "OverrideCachingDevice",
                 "merge_grad_list", "split_grad_list", "GradientPacker"]:
        assert name in gb.__all__ and getattr(gb, name) is not None
    assert trainbus.graph_builder is gb


def test_tensorpacks_paths_give_this_distributions_modules_and_the_cores_model_desc():
    import trainbus_trainers_multigpu.graph_builder as real
    from trainbus.train.model_desc import InputDesc, ModelDesc, ModelDescBase

    import trainbus.graph_builder.distributed
    import trainbus.graph_builder.model_desc as gm
    import trainbus.graph_builder.utils as gu

    assert gb is real and gu is real.utils and trainbus.graph_builder.distributed.__all__ == []
    assert gb.ModelDesc is gm.ModelDesc is trainbus.ModelDesc is ModelDesc
    assert gb.ModelDescBase is ModelDescBase and gb.InputDesc is InputDesc

