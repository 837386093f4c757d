"""The public API matches tensorpack's documented API: every class and function named on the
callbacks, train and tfutils reference pages resolves through its public trainbus path with the
documented parameters (names, kinds, defaults, in order), the documented members and the
documented base classes.

trainbus may add keyword-only parameters after the documented ones; nothing else may differ.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import pytest

_E = inspect.Parameter.empty


def _resolve(path: str) -> Any:
    """``trainbus.callbacks.ModelSaver`` -> the object, via attribute access on the facade."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


def _params(sig_text: str) -> list[tuple[str, str, Any]]:
    """Parse ``"(a, b=1, *args, c=None, **kw)"`` into (name, kind, default) triples."""
    ns: dict[str, Any] = {}
    exec(f"def _f{sig_text}: pass", {}, ns)  # noqa: S102 - fixed literals from the table below
    return [(p.name, p.kind.name, p.default) for p in inspect.signature(ns["_f"]).parameters.values()]


def _actual(obj: Any, drop_self: bool = False) -> list[tuple[str, str, Any]]:
    params = list(inspect.signature(obj).parameters.values())
    if drop_self and params and params[0].name == "self":
        params = params[1:]
    return [(p.name, p.kind.name, p.default) for p in params]


def _check(actual: list, expected: list, what: str) -> None:
    documented = {p[0] for p in expected}
    # trainbus additions are allowed only as keyword-only parameters; drop them, then the rest
    # must be exactly the documented list
    added = [p for p in actual if p[0] not in documented]
    bad = [p for p in added if p[1] != "KEYWORD_ONLY"]
    assert not bad, f"{what}: undocumented parameters that are not keyword-only: {bad}"
    kept = [p for p in actual if p[0] in documented]
    assert kept == expected, f"{what}: documented {expected}, implemented {actual}"


# (public path, documented signature of the constructor / function)
CALLBACKS = [
    ("ProxyCallback", "(cb)"),
    ("CallbackFactory", "(setup_graph=None, before_train=None, trigger=None, after_train=None)"),
    ("StartProcOrThread", "(startable, stop_at_last=True)"),
    ("RunOp", "(op, run_before=True, run_as_trigger=True, run_step=False, verbose=False)"),
    ("RunUpdateOps", "(collection=None)"),
    ("ProcessTensors", "(names, fn)"),
    ("DumpTensors", "(names)"),
    ("DumpTensorAsImage", "(tensor_name, prefix=None, map_func=None, scale=255)"),
    ("CheckNumerics", "(run_as_trigger=True, run_step=False)"),
    ("Callbacks", "(cbs)"),
    ("CallbackToHook", "(cb)"),
    ("HookToCallback", "(hook)"),
    ("TFLocalCLIDebugHook", "(*args, **kwargs)"),
    ("ScalarStats", "(names, prefix='validation')"),
    ("Inferencer", "()"),
    ("ClassificationError", "(wrong_tensor_name='incorrect_vector', summary_name='validation_error')"),
    ("BinaryClassificationStats", "(pred_tensor_name, label_tensor_name, prefix='val')"),
    ("InferenceRunnerBase", "(input, infs)"),
    ("InferenceRunner", "(input, infs, tower_name='InferenceTower', tower_func=None, device=0)"),
    ("DataParallelInferenceRunner", "(input, infs, gpus, tower_name='InferenceTower', tower_func=None)"),
    ("SendStat", "(command, names)"),
    ("InjectShell", "(file='INJECT_SHELL.tmp', shell='ipython')"),
    ("EstimatedTimeLeft", "(last_k_epochs=5, median=True)"),
    ("MonitorBase", "()"),
    ("Monitors", "(monitors)"),
    ("TFEventWriter", "(logdir=None, max_queue=10, flush_secs=120, split_files=False)"),
    ("JSONWriter", "()"),
    ("ScalarPrinter", "(enable_step=False, enable_epoch=True, whitelist=None, blacklist=None)"),
    ("SendMonitorData", "(command, names)"),
    ("CometMLMonitor", "(experiment=None, tags=None, **kwargs)"),
    ("GraphVarParam", "(name, shape=())"),
    ("ObjAttrParam", "(obj, attrname, readable_name=None)"),
    ("HyperParamSetter", "(param)"),
    ("HumanHyperParamSetter", "(param, file_name='hyper.txt')"),
    ("ScheduledHyperParamSetter", "(param, schedule, interp=None, step_based=False, set_at_beginning=True)"),
    ("StatMonitorParamSetter", "(param, stat_name, value_func, threshold, last_k, reverse=False)"),
    ("HyperParamSetterWithFunc", "(param, func)"),
    ("GPUUtilizationTracker", "(devices=None)"),
    ("GraphProfiler", "(dump_metadata=False, dump_tracing=True, dump_event=False)"),
    ("GPUMemoryTracker", "(devices=0)"),
    ("HostMemoryTracker", "()"),
    ("ThroughputTracker", "(samples_per_step=None)"),
    ("ModelSaver", "(max_to_keep=10, keep_checkpoint_every_n_hours=0.5, checkpoint_dir=None, var_collections=None)"),
    ("MinSaver", "(monitor_stat, reverse=False, filename=None, checkpoint_dir=None)"),
    ("MaxSaver", "(monitor_stat, filename=None, checkpoint_dir=None)"),
    ("TensorPrinter", "(names)"),
    ("ProgressBar", "(names=())"),
    ("SessionRunTimeout", "(timeout_in_ms)"),
    ("MovingAverageSummary", "(collection='MOVING_SUMMARY_OPS', train_op=None)"),
    ("MergeAllSummaries", "(period=0, run_alone=False, key=None)"),
    ("SimpleMovingAverage", "(tensors, window_size)"),
    ("PeriodicTrigger", "(triggerable, every_k_steps=None, every_k_epochs=None, before_train=False)"),
    ("PeriodicCallback", "(callback, every_k_steps=None, every_k_epochs=None)"),
    ("EnableCallbackIf", "(callback, pred)"),
]
TRAIN = [
    ("Trainer", "()"),
    ("TrainConfig", "(dataflow=None, data=None, model=None, callbacks=None, extra_callbacks=None, monitors=None, "
                    "session_creator=None, session_config=None, session_init=None, starting_epoch=1, "
                    "steps_per_epoch=None, max_epoch=99999, **kwargs)"),
    ("AutoResumeTrainConfig", "(always_resume=True, **kwargs)"),
    ("DEFAULT_CALLBACKS", "()"),
    ("DEFAULT_MONITORS", "()"),
    ("launch_train_with_config", "(config, trainer)"),
    ("SingleCostTrainer", "()"),
    ("TowerTrainer", "()"),
    ("NoOpTrainer", "()"),
    ("SimpleTrainer", "()"),
    ("SyncMultiGPUTrainer", "(gpus)"),
    ("SyncMultiGPUTrainerReplicated", "(gpus, average=True, mode=None, use_nccl=None)"),
    ("SyncMultiGPUTrainerParameterServer", "(gpus, ps_device=None)"),
    ("AsyncMultiGPUTrainer", "(gpus, scale_gradient=True)"),
    ("DistributedTrainerParameterServer", "(gpus, server, caching_device='cpu')"),
    ("DistributedTrainerReplicated", "(gpus, server)"),
    ("HorovodTrainer", "(average=True, compression=None)"),
]
TFUTILS = [
    ("argscope.argscope", "(layers, **kwargs)"),
    ("argscope.get_arg_scope", "()"),
    ("argscope.enable_argscope_for_module", "(module, log_shape=True)"),
    ("argscope.enable_argscope_for_function", "(func, log_shape=True)"),
    ("collection.backup_collection", "(keys=None)"),
    ("collection.restore_collection", "(backup)"),
    ("collection.freeze_collection", "(keys)"),
    ("gradproc.GradientProcessor", "()"),
    ("gradproc.FilterNoneGrad", "(verbose=True)"),
    ("gradproc.GlobalNormClip", "(global_norm)"),
    ("gradproc.MapGradient", "(func, regex='.*')"),
    ("gradproc.SummaryGradient", "(regex='.*', collections=None)"),
    ("gradproc.PrintGradient", "(regex='.*')"),
    ("gradproc.CheckGradient", "()"),
    ("gradproc.ScaleGradient", "(multipliers, verbose=True)"),
    ("tower.get_current_tower_context", "()"),
    ("tower.BaseTowerContext", "(ns_name, vs_name='')"),
    ("tower.TowerContext", "(tower_name, is_training, vs_name='')"),
    ("tower.TowerFunc", "(tower_fn, input_signature)"),
    ("tower.TowerTensorHandle", "(ctx, inputs, outputs, input_signature=None)"),
    ("tower.TowerTensorHandles", "(handles)"),
    ("scope_utils.auto_reuse_variable_scope", "(func)"),
    ("scope_utils.cached_name_scope", "(name, top_level=True)"),
    ("scope_utils.under_name_scope", "(name_scope=None)"),
    ("scope_utils.under_variable_scope", "()"),
    ("optimizer.apply_grad_processors", "(opt, gradprocs)"),
    ("optimizer.ProxyOptimizer", "(opt, name='ProxyOptimizer')"),
    ("optimizer.PostProcessOptimizer", "(opt, func, colocate=True)"),
    ("optimizer.VariableAssignmentOptimizer", "(opt, func)"),
    ("optimizer.AccumGradOptimizer", "(opt, niter)"),
    ("sesscreate.NewSessionCreator", "(target='', config=None)"),
    ("sesscreate.ReuseSessionCreator", "(sess)"),
    ("sesscreate.SessionCreatorAdapter", "(session_creator, func)"),
    ("sessinit.SessionInit", "()"),
    ("sessinit.ChainInit", "(sess_inits)"),
    ("sessinit.SaverRestore", "(model_path, prefix=None, ignore=())"),
    ("sessinit.SaverRestoreRelaxed", "(model_path, prefix=None, ignore=())"),
    ("sessinit.DictRestore", "(variable_dict, ignore_mismatch=False)"),
    ("sessinit.JustCurrentSession", "()"),
    ("sessinit.SmartInit", "(obj, *, ignore_mismatch=False)"),
    ("summary.add_tensor_summary", "(x, types, name=None, collections=None, main_tower_only=True)"),
    # documented as (*summary_lists, **kwargs) with the keyword `collections`
    ("summary.add_param_summary", "(*summary_lists, collections=None)"),
    ("summary.add_activation_summary", "(x, types=None, name=None, collections=None)"),
    # documented as (*args, **kwargs) with the keywords decay, collection, summary_collections
    ("summary.add_moving_summary", "(*args, decay=0.95, collection='MOVING_SUMMARY_OPS', summary_collections=None)"),
    ("varmanip.dump_session_params", "(path)"),
    ("varmanip.load_checkpoint_vars", "(path)"),
    ("varmanip.save_checkpoint_vars", "(dic, path)"),
    ("varmanip.get_all_checkpoints", "(dir, prefix='model')"),
    ("varreplace.custom_getter_scope", "(custom_getter)"),
    ("varreplace.freeze_variables", "(stop_gradient=True, skip_collection=False)"),
    ("varreplace.remap_variables", "(fn)"),
    ("export.ModelExporter", "(config)"),
    ("dependency.dependency_of_targets", "(targets, op)"),
    ("dependency.dependency_of_fetches", "(fetches, op)"),
    ("get_default_sess_config", "(mem_fraction=0.99)"),
    ("get_global_step_var", "()"),
    ("get_global_step_value", "()"),
    ("get_tf_version_tuple", "()"),
]
SIGNATURES = ([(f"trainbus.callbacks.{n}", s) for n, s in CALLBACKS] + [(f"trainbus.train.{n}", s) for n, s in TRAIN]
              + [(f"trainbus.tfutils.{n}", s) for n, s in TFUTILS])


@pytest.mark.parametrize("path,sig", SIGNATURES, ids=[p for p, _ in SIGNATURES])
def test_documented_signature(path: str, sig: str) -> None:
    obj = _resolve(path)
    _check(_actual(obj), _params(sig), path)


# (public path of the class, member, documented signature without self / "property" / "staticmethod(...)" /
#  "= <value>" for a class attribute)
MEMBERS = [
    ("trainbus.callbacks.Callback", "setup_graph", "(trainer)"),
    ("trainbus.callbacks.Callback", "before_train", "()"),
    ("trainbus.callbacks.Callback", "after_train", "()"),
    ("trainbus.callbacks.Callback", "before_epoch", "()"),
    ("trainbus.callbacks.Callback", "after_epoch", "()"),
    ("trainbus.callbacks.Callback", "trigger_step", "()"),
    ("trainbus.callbacks.Callback", "trigger_epoch", "()"),
    ("trainbus.callbacks.Callback", "trigger", "()"),
    ("trainbus.callbacks.Callback", "_setup_graph", "()"),
    ("trainbus.callbacks.Callback", "_before_train", "()"),
    ("trainbus.callbacks.Callback", "_after_train", "()"),
    ("trainbus.callbacks.Callback", "_before_run", "(ctx)"),
    ("trainbus.callbacks.Callback", "_after_run", "(run_context, run_values)"),
    ("trainbus.callbacks.Callback", "_before_epoch", "()"),
    ("trainbus.callbacks.Callback", "_after_epoch", "()"),
    ("trainbus.callbacks.Callback", "_trigger_step", "()"),
    ("trainbus.callbacks.Callback", "_trigger_epoch", "()"),
    ("trainbus.callbacks.Callback", "_trigger", "()"),
    ("trainbus.callbacks.Callback", "chief_only", "property"),
    ("trainbus.callbacks.Callback", "get_tensors_maybe_in_tower", "(names)"),
    ("trainbus.callbacks.Callback", "name_scope", "= ''"),
    ("trainbus.callbacks.Callback", "set_chief_only", "(v=True)"),
    ("trainbus.callbacks.TFLocalCLIDebugHook", "add_tensor_filter", "(*args, **kwargs)"),
    ("trainbus.callbacks.Inferencer", "_before_inference", "()"),
    ("trainbus.callbacks.Inferencer", "_after_inference", "()"),
    ("trainbus.callbacks.Inferencer", "_get_fetches", "()"),
    ("trainbus.callbacks.Inferencer", "_on_fetches", "(results)"),
    ("trainbus.callbacks.Inferencer", "get_fetches", "()"),
    ("trainbus.callbacks.Inferencer", "on_fetches", "(results)"),
    ("trainbus.callbacks.MonitorBase", "_setup_graph", "()"),
    ("trainbus.callbacks.MonitorBase", "process", "(name, val)"),
    ("trainbus.callbacks.MonitorBase", "process_event", "(evt)"),
    ("trainbus.callbacks.MonitorBase", "process_image", "(name, val)"),
    ("trainbus.callbacks.MonitorBase", "process_scalar", "(name, val)"),
    ("trainbus.callbacks.MonitorBase", "process_summary", "(summary)"),
    ("trainbus.callbacks.Monitors", "get_history", "(name)"),
    ("trainbus.callbacks.Monitors", "get_latest", "(name)"),
    ("trainbus.callbacks.Monitors", "put_event", "(evt)"),
    ("trainbus.callbacks.Monitors", "put_image", "(name, val)"),
    ("trainbus.callbacks.Monitors", "put_scalar", "(name, val)"),
    ("trainbus.callbacks.Monitors", "put_summary", "(summary)"),
    ("trainbus.callbacks.JSONWriter", "FILENAME", "= 'stats.json'"),
    ("trainbus.callbacks.JSONWriter", "load_existing_epoch_number", "staticmethod(dir=None)"),
    ("trainbus.callbacks.JSONWriter", "load_existing_json", "staticmethod(dir=None)"),
    ("trainbus.callbacks.CometMLMonitor", "experiment", "property"),
    ("trainbus.callbacks.HyperParam", "get_value", "()"),
    ("trainbus.callbacks.HyperParam", "set_value", "(v)"),
    ("trainbus.callbacks.HyperParam", "setup_graph", "()"),
    ("trainbus.callbacks.HyperParam", "readable_name", "property"),
    ("trainbus.callbacks.GraphVarParam", "get_value", "()"),
    ("trainbus.callbacks.GraphVarParam", "set_value", "(v)"),
    ("trainbus.callbacks.GraphVarParam", "setup_graph", "()"),
    ("trainbus.callbacks.ObjAttrParam", "get_value", "()"),
    ("trainbus.callbacks.ObjAttrParam", "set_value", "(v)"),
    ("trainbus.callbacks.HyperParamSetter", "get_current_value", "()"),
    ("trainbus.callbacks.HyperParamSetter", "get_value_to_set", "()"),
    ("trainbus.callbacks.HyperParamSetter", "_get_value_to_set", "()"),
    ("trainbus.callbacks.GPUUtilizationTracker", "worker", "staticmethod(evt, rst_queue, stop_evt, devices)"),
    ("trainbus.train.Trainer", "epoch_num", "property"),
    ("trainbus.train.Trainer", "global_step", "property"),
    ("trainbus.train.Trainer", "local_step", "property"),
    ("trainbus.train.Trainer", "hooked_sess", "= None"),
    ("trainbus.train.Trainer", "sess", "= None"),
    ("trainbus.train.Trainer", "is_chief", "= True"),
    ("trainbus.train.Trainer", "initialize", "(session_creator, session_init)"),
    ("trainbus.train.Trainer", "initialize_hooks", "()"),
    ("trainbus.train.Trainer", "main_loop", "(steps_per_epoch, starting_epoch, max_epoch)"),
    ("trainbus.train.Trainer", "register_callback", "(cb)"),
    ("trainbus.train.Trainer", "run_step", "()"),
    ("trainbus.train.Trainer", "setup_callbacks", "(callbacks, monitors)"),
    ("trainbus.train.Trainer", "train", "(callbacks, monitors, session_creator, session_init, steps_per_epoch, "
                                      "starting_epoch=1, max_epoch=9999999)"),
    ("trainbus.train.Trainer", "train_with_defaults",
     "(_sentinel=None, callbacks=None, monitors=None, session_creator=None, session_init=None, "
     "steps_per_epoch=None, starting_epoch=1, max_epoch=9999999, extra_callbacks=None)"),
    ("trainbus.train.SingleCostTrainer", "COLOCATE_GRADIENTS_WITH_OPS", "= True"),
    ("trainbus.train.SingleCostTrainer", "GATE_GRADIENTS", "= False"),
    ("trainbus.train.SingleCostTrainer", "AGGREGATION_METHOD", "= None"),
    ("trainbus.train.SingleCostTrainer", "XLA_COMPILE", "= False"),
    ("trainbus.train.SingleCostTrainer", "setup_graph", "(inputs_desc, input, get_cost_fn, get_opt_fn)"),
    ("trainbus.train.TowerTrainer", "get_predictor", "(input_names, output_names, device=0)"),
    ("trainbus.train.TowerTrainer", "inputs_desc", "property"),
    ("trainbus.train.TowerTrainer", "tower_func", "property"),
    ("trainbus.train.TowerTrainer", "towers", "property"),
    ("trainbus.train.NoOpTrainer", "run_step", "()"),
    ("trainbus.train.SyncMultiGPUTrainerReplicated", "BROADCAST_EVERY_EPOCH", "= True"),
    ("trainbus.train.SyncMultiGPUTrainerReplicated", "devices", "= None"),
    ("trainbus.train.SyncMultiGPUTrainerParameterServer", "devices", "= None"),
    ("trainbus.train.AsyncMultiGPUTrainer", "devices", "= None"),
    ("trainbus.tfutils.gradproc.GradientProcessor", "process", "(grads)"),
    ("trainbus.tfutils.gradproc.GradientProcessor", "_process", "(grads)"),
    ("trainbus.tfutils.tower.BaseTowerContext", "get_collection_in_tower", "(key)"),
    ("trainbus.tfutils.tower.BaseTowerContext", "has_own_variables", "property"),
    ("trainbus.tfutils.tower.BaseTowerContext", "is_main_training_tower", "property"),
    ("trainbus.tfutils.tower.BaseTowerContext", "is_training", "property"),
    ("trainbus.tfutils.tower.BaseTowerContext", "name", "property"),
    ("trainbus.tfutils.tower.BaseTowerContext", "ns_name", "property"),
    ("trainbus.tfutils.tower.BaseTowerContext", "vs_name", "property"),
    ("trainbus.tfutils.tower.TowerFunc", "input_signature", "property"),
    ("trainbus.tfutils.tower.TowerFunc", "towers", "property"),
    ("trainbus.tfutils.tower.TowerTensorHandle", "__getitem__", "(name)"),
    ("trainbus.tfutils.tower.TowerTensorHandle", "get_collection", "(key=None, name=None)"),
    ("trainbus.tfutils.tower.TowerTensorHandle", "get_tensor", "(name)"),
    ("trainbus.tfutils.tower.TowerTensorHandle", "get_tensors", "(names)"),
    ("trainbus.tfutils.tower.TowerTensorHandle", "get_variable", "(name)"),
    ("trainbus.tfutils.tower.TowerTensorHandle", "get_variables", "(names)"),
    ("trainbus.tfutils.tower.TowerTensorHandle", "inputs", "property"),
    ("trainbus.tfutils.tower.TowerTensorHandle", "is_training", "property"),
    ("trainbus.tfutils.tower.TowerTensorHandle", "ns_name", "property"),
    ("trainbus.tfutils.tower.TowerTensorHandle", "outputs", "property"),
    ("trainbus.tfutils.tower.TowerTensorHandle", "vs_name", "property"),
    ("trainbus.tfutils.tower.TowerTensorHandles", "__getitem__", "(name_or_index)"),
    ("trainbus.tfutils.tower.TowerTensorHandles", "training", "()"),
    ("trainbus.tfutils.tower.TowerTensorHandles", "inference", "()"),
    ("trainbus.tfutils.sessinit.SessionInit", "init", "(sess)"),
    ("trainbus.tfutils.export.ModelExporter", "export_compact", "(filename, optimize=True, toco_compatible=False)"),
    ("trainbus.tfutils.export.ModelExporter", "export_serving",
     "(filename, tags=None, signature_name='prediction_pipeline')"),
]


@pytest.mark.parametrize("path,member,spec", MEMBERS, ids=[f"{p}.{m}" for p, m, _ in MEMBERS])
def test_documented_member(path: str, member: str, spec: str) -> None:
    cls = _resolve(path)
    what = f"{path}.{member}"
    assert hasattr(cls, member), f"{what} is documented but missing"
    raw = inspect.getattr_static(cls, member)
    if spec == "property":
        assert isinstance(raw, property), f"{what} must be a property, is {type(raw).__name__}"
    elif spec.startswith("= "):
        assert not callable(raw) and not isinstance(raw, property), f"{what} must be a plain class attribute"
        assert getattr(cls, member) == eval(spec[2:]), f"{what}: documented {spec}"  # noqa: S307 - table literal
    elif spec.startswith("staticmethod"):
        assert isinstance(raw, staticmethod), f"{what} must be a static method, is {type(raw).__name__}"
        _check(_actual(getattr(cls, member)), _params(spec[len("staticmethod"):]), what)
    else:
        assert callable(raw) and not isinstance(raw, (staticmethod, classmethod)), f"{what} must be a method"
        _check(_actual(getattr(cls, member), drop_self=True), _params(spec), what)


# (public path, documented base given by public path)
BASES = [
    ("trainbus.callbacks.ProxyCallback", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.CallbackFactory", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.StartProcOrThread", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.RunOp", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.RunUpdateOps", "trainbus.callbacks.RunOp"),
    ("trainbus.callbacks.ProcessTensors", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.DumpTensors", "trainbus.callbacks.ProcessTensors"),
    ("trainbus.callbacks.DumpTensorAsImage", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.CheckNumerics", "trainbus.callbacks.RunOp"),
    ("trainbus.callbacks.Callbacks", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.HookToCallback", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.TFLocalCLIDebugHook", "trainbus.callbacks.HookToCallback"),
    ("trainbus.callbacks.Inferencer", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.ScalarStats", "trainbus.callbacks.Inferencer"),
    ("trainbus.callbacks.ClassificationError", "trainbus.callbacks.Inferencer"),
    ("trainbus.callbacks.BinaryClassificationStats", "trainbus.callbacks.Inferencer"),
    ("trainbus.callbacks.InferenceRunnerBase", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.InferenceRunner", "trainbus.callbacks.InferenceRunnerBase"),
    ("trainbus.callbacks.DataParallelInferenceRunner", "trainbus.callbacks.InferenceRunnerBase"),
    ("trainbus.callbacks.SendStat", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.InjectShell", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.EstimatedTimeLeft", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.MonitorBase", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.Monitors", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.TFEventWriter", "trainbus.callbacks.MonitorBase"),
    ("trainbus.callbacks.JSONWriter", "trainbus.callbacks.MonitorBase"),
    ("trainbus.callbacks.ScalarPrinter", "trainbus.callbacks.MonitorBase"),
    ("trainbus.callbacks.SendMonitorData", "trainbus.callbacks.MonitorBase"),
    ("trainbus.callbacks.CometMLMonitor", "trainbus.callbacks.MonitorBase"),
    ("trainbus.callbacks.GraphVarParam", "trainbus.callbacks.HyperParam"),
    ("trainbus.callbacks.ObjAttrParam", "trainbus.callbacks.HyperParam"),
    ("trainbus.callbacks.HyperParamSetter", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.HumanHyperParamSetter", "trainbus.callbacks.HyperParamSetter"),
    ("trainbus.callbacks.ScheduledHyperParamSetter", "trainbus.callbacks.HyperParamSetter"),
    ("trainbus.callbacks.StatMonitorParamSetter", "trainbus.callbacks.HyperParamSetter"),
    ("trainbus.callbacks.HyperParamSetterWithFunc", "trainbus.callbacks.HyperParamSetter"),
    ("trainbus.callbacks.GPUUtilizationTracker", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.GraphProfiler", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.GPUMemoryTracker", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.HostMemoryTracker", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.ThroughputTracker", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.ModelSaver", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.MinSaver", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.MaxSaver", "trainbus.callbacks.MinSaver"),
    ("trainbus.callbacks.TensorPrinter", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.ProgressBar", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.SessionRunTimeout", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.MovingAverageSummary", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.SimpleMovingAverage", "trainbus.callbacks.Callback"),
    ("trainbus.callbacks.PeriodicTrigger", "trainbus.callbacks.ProxyCallback"),
    ("trainbus.callbacks.PeriodicCallback", "trainbus.callbacks.EnableCallbackIf"),
    ("trainbus.callbacks.EnableCallbackIf", "trainbus.callbacks.ProxyCallback"),
    ("trainbus.train.StopTraining", "builtins.Exception"),
    ("trainbus.train.AutoResumeTrainConfig", "trainbus.train.TrainConfig"),
    ("trainbus.train.TowerTrainer", "trainbus.train.Trainer"),
    ("trainbus.train.SingleCostTrainer", "trainbus.train.TowerTrainer"),
    ("trainbus.train.SimpleTrainer", "trainbus.train.SingleCostTrainer"),
    ("trainbus.train.NoOpTrainer", "trainbus.train.SimpleTrainer"),
    ("trainbus.train.SyncMultiGPUTrainerReplicated", "trainbus.train.SingleCostTrainer"),
    ("trainbus.train.SyncMultiGPUTrainerParameterServer", "trainbus.train.SingleCostTrainer"),
    ("trainbus.train.AsyncMultiGPUTrainer", "trainbus.train.SingleCostTrainer"),
    ("trainbus.train.DistributedTrainerParameterServer", "trainbus.train.SingleCostTrainer"),
    ("trainbus.train.DistributedTrainerReplicated", "trainbus.train.SingleCostTrainer"),
    ("trainbus.train.HorovodTrainer", "trainbus.train.SingleCostTrainer"),
    ("trainbus.tfutils.gradproc.FilterNoneGrad", "trainbus.tfutils.gradproc.GradientProcessor"),
    ("trainbus.tfutils.gradproc.GlobalNormClip", "trainbus.tfutils.gradproc.GradientProcessor"),
    ("trainbus.tfutils.gradproc.MapGradient", "trainbus.tfutils.gradproc.GradientProcessor"),
    ("trainbus.tfutils.gradproc.SummaryGradient", "trainbus.tfutils.gradproc.MapGradient"),
    ("trainbus.tfutils.gradproc.PrintGradient", "trainbus.tfutils.gradproc.MapGradient"),
    ("trainbus.tfutils.gradproc.CheckGradient", "trainbus.tfutils.gradproc.MapGradient"),
    ("trainbus.tfutils.gradproc.ScaleGradient", "trainbus.tfutils.gradproc.MapGradient"),
    ("trainbus.tfutils.optimizer.PostProcessOptimizer", "trainbus.tfutils.optimizer.ProxyOptimizer"),
    ("trainbus.tfutils.optimizer.VariableAssignmentOptimizer", "trainbus.tfutils.optimizer.PostProcessOptimizer"),
    ("trainbus.tfutils.optimizer.AccumGradOptimizer", "trainbus.tfutils.optimizer.ProxyOptimizer"),
    ("trainbus.tfutils.sessinit.ChainInit", "trainbus.tfutils.sessinit.SessionInit"),
    ("trainbus.tfutils.sessinit.SaverRestore", "trainbus.tfutils.sessinit.SessionInit"),
    ("trainbus.tfutils.sessinit.SaverRestoreRelaxed", "trainbus.tfutils.sessinit.SaverRestore"),
    ("trainbus.tfutils.sessinit.DictRestore", "trainbus.tfutils.sessinit.SessionInit"),
    ("trainbus.tfutils.sessinit.JustCurrentSession", "trainbus.tfutils.sessinit.SessionInit"),
]


@pytest.mark.parametrize("path,base", BASES, ids=[p for p, _ in BASES])
def test_documented_base(path: str, base: str) -> None:
    cls = _resolve(path)
    assert inspect.isclass(cls), f"{path} must be a class"
    assert issubclass(cls, _resolve(base)), f"{path} must be a {base}; its bases: {cls.__mro__[1:]}"


def test_tensorflow_bases() -> None:
    import tensorflow as tf

    import trainbus.callbacks
    from trainbus.tfutils import optimizer, sesscreate

    assert issubclass(trainbus.callbacks.CallbackToHook, tf.compat.v1.train.SessionRunHook)
    assert issubclass(optimizer.ProxyOptimizer, tf.compat.v1.train.Optimizer)
    for name in ("NewSessionCreator", "ReuseSessionCreator", "SessionCreatorAdapter"):
        assert issubclass(getattr(sesscreate, name), tf.compat.v1.train.SessionCreator), name


def test_abstract_hyperparam() -> None:
    import trainbus.callbacks

    with pytest.raises(TypeError):
        trainbus.callbacks.HyperParam()  # get_value/set_value are abstract
    with pytest.raises(TypeError):
        trainbus.callbacks.HyperParamSetter("learning_rate")  # _get_value_to_set is abstract


def test_merge_all_summaries_is_a_function_returning_a_callback() -> None:
    import trainbus.callbacks as cbs

    assert inspect.isfunction(cbs.MergeAllSummaries)
    assert isinstance(cbs.MergeAllSummaries(), cbs.Callback)
    assert isinstance(cbs.MergeAllSummaries(period=3), cbs.Callback)


TOP_LEVEL = ([(n, f"trainbus.callbacks.{n}") for n, _ in CALLBACKS]
             + [(n, f"trainbus.callbacks.{n}") for n in ("Callback", "HyperParam")]
             + [(n, f"trainbus.train.{n}") for n, _ in TRAIN] + [("StopTraining", "trainbus.train.StopTraining")]
             + [(n.rsplit(".", 1)[1], f"trainbus.tfutils.{n}") for n, _ in TFUTILS
                if n.startswith("sessinit.")])


@pytest.mark.parametrize("name,path", TOP_LEVEL, ids=[n for n, _ in TOP_LEVEL])
def test_top_level_name(name: str, path: str) -> None:
    """``trainbus.<Name>`` is the same object as its documented module path (tensorpack.<Name>)."""
    import trainbus

    assert getattr(trainbus, name) is _resolve(path)
    assert name in trainbus.__all__


STAR = r"""
import sys
import trainbus
import trainbus.callbacks
assert not [m for m in sys.modules if m.split('.')[0] == 'tensorflow'], 'TF imported by import trainbus'
names = trainbus.__all__
# computing __all__ imports the core's subpackages (as tensorpack's star import does, so TensorFlow too)
# but learns the plugins' names from entry-point metadata: no plugin module is imported for it
assert not [m for m in sys.modules if m.startswith('trainbus_')], 'a plugin imported by __all__'
ns = {}
exec('from trainbus import *', ns)
missing = [n for n in EXPECTED if n not in ns]
assert not missing, missing
assert ns['ModelSaver'] is trainbus.callbacks.ModelSaver
assert ns['SimpleTrainer'] is trainbus.train.SimpleTrainer
assert ns['callbacks'] is trainbus.callbacks and ns['tfutils'] is trainbus.tfutils
print('OK', len(names))
"""


def test_star_import_brings_every_documented_name() -> None:
    import subprocess
    import sys

    expected = sorted({n for n, _ in TOP_LEVEL} | {"TrainConfig", "ModelDesc", "launch_train_with_config",
                                                   "TowerContext", "PredictConfig", "QueueInput", "FeedInput",
                                                   "DataFlow", "logger", "hookimpl"})
    code = f"EXPECTED = {expected!r}\n" + STAR
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().startswith("OK")
