"""tensorpack's public surface at the same paths under trainbus: every module path of
tensorpack 0.11 imports as ``trainbus.<path>`` and holds the same public names, and
``from trainbus import *`` binds what ``from tensorpack import *`` binds.

The two tables below were recorded from tensorpack 0.11 (its modules' ``__all__`` and the
names its star import binds). A name trainbus does not provide must be listed in
``trainbus.bus.registry.OUT_OF_SCOPE`` with its reason, and then raises an ``ImportError`` saying so.
"""

import importlib

import pytest

from trainbus.bus import registry as _registry

#: module path -> the public names tensorpack's module of that path exports
TENSORPACK_MODULES = {'trainbus.callbacks': (),
 'trainbus.callbacks.base': ('Callback', 'ProxyCallback', 'CallbackFactory'),
 'trainbus.callbacks.concurrency': ('StartProcOrThread',),
 'trainbus.callbacks.graph': ('RunOp', 'RunUpdateOps', 'ProcessTensors', 'DumpTensors', 'DumpTensor',
                              'DumpTensorAsImage', 'DumpParamAsImage', 'CheckNumerics'),
 'trainbus.callbacks.group': ('Callbacks',),
 'trainbus.callbacks.hooks': ('CallbackToHook', 'HookToCallback', 'TFLocalCLIDebugHook'),
 'trainbus.callbacks.inference': ('ScalarStats', 'Inferencer', 'ClassificationError', 'BinaryClassificationStats'),
 'trainbus.callbacks.inference_runner': ('InferenceRunnerBase', 'InferenceRunner', 'DataParallelInferenceRunner'),
 'trainbus.callbacks.misc': ('SendStat', 'InjectShell', 'EstimatedTimeLeft'),
 'trainbus.callbacks.monitor': ('MonitorBase', 'Monitors', 'TFEventWriter', 'JSONWriter', 'ScalarPrinter',
                                'SendMonitorData', 'CometMLMonitor'),
 'trainbus.callbacks.param': ('HyperParam', 'GraphVarParam', 'ObjAttrParam', 'HyperParamSetter',
                              'HumanHyperParamSetter', 'ScheduledHyperParamSetter', 'StatMonitorParamSetter',
                              'HyperParamSetterWithFunc'),
 'trainbus.callbacks.prof': ('GPUUtilizationTracker', 'GraphProfiler', 'PeakMemoryTracker', 'GPUMemoryTracker',
                             'HostMemoryTracker', 'ThroughputTracker'),
 'trainbus.callbacks.saver': ('ModelSaver', 'MinSaver', 'MaxSaver'),
 'trainbus.callbacks.stats': (),
 'trainbus.callbacks.steps': ('TensorPrinter', 'ProgressBar', 'SessionRunTimeout'),
 'trainbus.callbacks.summary': ('MovingAverageSummary', 'MergeAllSummaries', 'SimpleMovingAverage'),
 'trainbus.callbacks.trigger': ('PeriodicTrigger', 'PeriodicCallback', 'EnableCallbackIf'),
 'trainbus.compat': (),
 'trainbus.compat.tensor_spec': (),
 'trainbus.contrib': (),
 'trainbus.contrib.keras': ('KerasPhaseCallback', 'setup_keras_trainer', 'KerasModel'),
 'trainbus.dataflow': ('imgaug', 'dataset'),
 'trainbus.dataflow.base': ('DataFlow', 'ProxyDataFlow', 'RNGDataFlow', 'DataFlowTerminated'),
 'trainbus.dataflow.common': ('TestDataSpeed', 'PrintData', 'BatchData', 'BatchDataByShape', 'FixedSizeData',
                              'MapData', 'MapDataComponent', 'RepeatedData', 'RepeatedDataPoint',
                              'RandomChooseData', 'RandomMixData', 'JoinData', 'ConcatData', 'SelectComponent',
                              'LocallyShuffleData', 'CacheData'),
 'trainbus.dataflow.dataset': (),
 'trainbus.dataflow.dataset.bsds500': ('BSDS500',),
 'trainbus.dataflow.dataset.caltech101': ('Caltech101Silhouettes',),
 'trainbus.dataflow.dataset.cifar': ('CifarBase', 'Cifar10', 'Cifar100'),
 'trainbus.dataflow.dataset.ilsvrc': ('ILSVRCMeta', 'ILSVRC12', 'ILSVRC12Files', 'TinyImageNet'),
 'trainbus.dataflow.dataset.mnist': ('Mnist', 'FashionMnist'),
 'trainbus.dataflow.dataset.places': (),
 'trainbus.dataflow.dataset.svhn': ('SVHNDigit',),
 'trainbus.dataflow.format': ('HDF5Data', 'LMDBData', 'LMDBDataDecoder', 'CaffeLMDB', 'SVMLightData'),
 'trainbus.dataflow.image': ('ImageFromFile', 'AugmentImageComponent', 'AugmentImageCoordinates',
                             'AugmentImageComponents'),
 'trainbus.dataflow.imgaug': (),
 'trainbus.dataflow.imgaug.base': ('Augmentor', 'ImageAugmentor', 'AugmentorList', 'PhotometricAugmentor'),
 'trainbus.dataflow.imgaug.convert': ('ColorSpace', 'Grayscale', 'ToUint8', 'ToFloat32'),
 'trainbus.dataflow.imgaug.crop': ('RandomCrop', 'CenterCrop', 'RandomCropRandomShape',
                                   'GoogleNetRandomCropAndResize', 'RandomCutout'),
 'trainbus.dataflow.imgaug.deform': (),
 'trainbus.dataflow.imgaug.external': ('IAAugmentor', 'Albumentations'),
 'trainbus.dataflow.imgaug.geometry': ('Shift', 'Rotation', 'RotationAndCropValid', 'Affine'),
 'trainbus.dataflow.imgaug.imgproc': ('Hue', 'Brightness', 'BrightnessScale', 'Contrast', 'MeanVarianceNormalize',
                                      'GaussianBlur', 'Gamma', 'Clip', 'Saturation', 'Lighting',
                                      'MinMaxNormalize'),
 'trainbus.dataflow.imgaug.meta': ('RandomChooseAug', 'MapImage', 'Identity', 'RandomApplyAug', 'RandomOrderAug'),
 'trainbus.dataflow.imgaug.misc': ('Flip', 'Resize', 'RandomResize', 'ResizeShortestEdge', 'Transpose'),
 'trainbus.dataflow.imgaug.noise': ('JpegNoise', 'GaussianNoise', 'SaltPepperNoise'),
 'trainbus.dataflow.imgaug.paste': ('CenterPaste', 'BackgroundFiller', 'ConstantBackgroundFiller', 'RandomPaste'),
 'trainbus.dataflow.imgaug.transform': ('Transform', 'ResizeTransform', 'CropTransform', 'FlipTransform',
                                        'TransformList', 'TransformFactory'),
 'trainbus.dataflow.parallel': ('PrefetchData', 'MultiProcessPrefetchData', 'MultiProcessRunner',
                                'MultiProcessRunnerZMQ', 'MultiThreadRunner', 'PrefetchDataZMQ',
                                'MultiThreadPrefetchData'),
 'trainbus.dataflow.parallel_map': ('MultiThreadMapData', 'MultiProcessMapData', 'MultiProcessMapDataZMQ',
                                    'MultiProcessMapAndBatchData', 'MultiProcessMapAndBatchDataZMQ'),
 'trainbus.dataflow.raw': ('FakeData', 'DataFromQueue', 'DataFromList', 'DataFromGenerator', 'DataFromIterable'),
 'trainbus.dataflow.remote': (),
 'trainbus.dataflow.serialize': ('LMDBSerializer', 'NumpySerializer', 'TFRecordSerializer', 'HDF5Serializer'),
 'trainbus.graph_builder': (),
 'trainbus.graph_builder.distributed': (),
 'trainbus.graph_builder.model_desc': (),
 'trainbus.graph_builder.training': ('DataParallelBuilder',),
 'trainbus.graph_builder.utils': ('LeastLoadedDeviceSetter', 'allreduce_grads'),
 'trainbus.input_source': (),
 'trainbus.input_source.input_source': ('PlaceholderInput', 'FeedInput', 'FeedfreeInput', 'QueueInput',
                                        'BatchQueueInput', 'DummyConstantInput', 'TensorInput', 'ZMQInput',
                                        'TFDatasetInput', 'StagingInput'),
 'trainbus.input_source.input_source_base': ('InputSource', 'remap_input_source'),
 'trainbus.models': (),
 'trainbus.models.batch_norm': ('BatchNorm', 'BatchRenorm'),
 'trainbus.models.common': ('layer_register', 'VariableHolder', 'rename_tflayer_get_variable',
                            'disable_layer_logging'),
 'trainbus.models.conv2d': ('Conv2D', 'Deconv2D', 'Conv2DTranspose'),
 'trainbus.models.fc': ('FullyConnected',),
 'trainbus.models.layer_norm': ('LayerNorm', 'InstanceNorm'),
 'trainbus.models.linearwrap': ('LinearWrap',),
 'trainbus.models.nonlin': ('Maxout', 'PReLU', 'BNReLU'),
 'trainbus.models.pool': ('MaxPooling', 'FixedUnPooling', 'AvgPooling', 'GlobalAvgPooling'),
 'trainbus.models.registry': ('layer_register', 'disable_layer_logging'),
 'trainbus.models.regularize': ('regularize_cost', 'regularize_cost_from_collection', 'l2_regularizer',
                                'l1_regularizer', 'Dropout'),
 'trainbus.models.shape_utils': (),
 'trainbus.models.shapes': ('ConcatWith',),
 'trainbus.models.tflayer': (),
 'trainbus.models.utils': (),
 'trainbus.predict': (),
 'trainbus.predict.base': ('PredictorBase', 'OnlinePredictor', 'OfflinePredictor'),
 'trainbus.predict.concurrency': ('MultiThreadAsyncPredictor',),
 'trainbus.predict.config': ('PredictConfig',),
 'trainbus.predict.dataset': ('DatasetPredictorBase', 'SimpleDatasetPredictor', 'MultiProcessDatasetPredictor'),
 'trainbus.predict.feedfree': ('FeedfreePredictor',),
 'trainbus.predict.multigpu': ('MultiTowerOfflinePredictor', 'DataParallelOfflinePredictor'),
 'trainbus.tfutils': ('get_current_tower_context', 'TowerContext', 'sessinit', 'summary', 'optimizer', 'sesscreate',
                      'gradproc', 'varreplace', 'tower'),
 'trainbus.tfutils.argscope': ('argscope', 'get_arg_scope', 'enable_argscope_for_module',
                               'enable_argscope_for_function'),
 'trainbus.tfutils.collect_env': (),
 'trainbus.tfutils.collection': ('backup_collection', 'restore_collection', 'freeze_collection'),
 'trainbus.tfutils.common': ('get_default_sess_config', 'get_global_step_value', 'get_global_step_var',
                             'get_tf_version_tuple', 'collect_env_info'),
 'trainbus.tfutils.dependency': ('dependency_of_targets', 'dependency_of_fetches'),
 'trainbus.tfutils.export': ('ModelExporter',),
 'trainbus.tfutils.gradproc': ('GradientProcessor', 'FilterNoneGrad', 'GlobalNormClip', 'MapGradient',
                               'SummaryGradient', 'PrintGradient', 'CheckGradient', 'ScaleGradient'),
 'trainbus.tfutils.model_utils': (),
 'trainbus.tfutils.optimizer': ('apply_grad_processors', 'ProxyOptimizer', 'PostProcessOptimizer',
                                'VariableAssignmentOptimizer', 'AccumGradOptimizer'),
 'trainbus.tfutils.scope_utils': ('auto_reuse_variable_scope', 'cached_name_scope', 'under_name_scope'),
 'trainbus.tfutils.sesscreate': ('NewSessionCreator', 'ReuseSessionCreator', 'SessionCreatorAdapter'),
 'trainbus.tfutils.sessinit': ('SessionInit', 'ChainInit', 'SaverRestore', 'SaverRestoreRelaxed', 'DictRestore',
                               'JustCurrentSession', 'get_model_loader', 'SmartInit'),
 'trainbus.tfutils.summary': ('add_tensor_summary', 'add_param_summary', 'add_activation_summary',
                              'add_moving_summary'),
 'trainbus.tfutils.symbolic_functions': ('print_stat', 'rms'),
 'trainbus.tfutils.tower': ('get_current_tower_context', 'BaseTowerContext', 'TowerContext', 'TowerFuncWrapper',
                            'TowerFunc', 'TowerTensorHandle', 'TowerTensorHandles'),
 'trainbus.tfutils.varmanip': ('SessionUpdate', 'dump_session_params', 'load_chkpt_vars', 'save_chkpt_vars',
                               'load_checkpoint_vars', 'save_checkpoint_vars', 'get_checkpoint_path',
                               'get_all_checkpoints'),
 'trainbus.tfutils.varreplace': ('custom_getter_scope', 'freeze_variables', 'remap_variables'),
 'trainbus.train': (),
 'trainbus.train.base': ('StopTraining', 'Trainer'),
 'trainbus.train.config': ('TrainConfig', 'AutoResumeTrainConfig', 'DEFAULT_CALLBACKS', 'DEFAULT_MONITORS'),
 'trainbus.train.interface': ('launch_train_with_config',),
 'trainbus.train.model_desc': ('ModelDesc', 'ModelDescBase'),
 'trainbus.train.tower': ('SingleCostTrainer', 'TowerTrainer'),
 'trainbus.train.trainers': ('NoOpTrainer', 'SimpleTrainer', 'QueueInputTrainer', 'SyncMultiGPUTrainer',
                             'SyncMultiGPUTrainerReplicated', 'SyncMultiGPUTrainerParameterServer',
                             'AsyncMultiGPUTrainer', 'DistributedTrainerParameterServer',
                             'DistributedTrainerReplicated', 'HorovodTrainer', 'BytePSTrainer'),
 'trainbus.train.utility': (),
 'trainbus.utils': ('logger',),
 'trainbus.utils.argtools': ('map_arg', 'memoized', 'memoized_method', 'graph_memoized', 'shape2d', 'shape4d',
                             'memoized_ignoreargs', 'log_once'),
 'trainbus.utils.compatible_serialize': (),
 'trainbus.utils.concurrency': ('StoppableThread', 'LoopThread', 'ShareSessionThread', 'ensure_proc_terminate',
                                'start_proc_mask_signal'),
 'trainbus.utils.debug': (),
 'trainbus.utils.develop': (),
 'trainbus.utils.fs': ('mkdir_p', 'download', 'recursive_walk', 'get_dataset_path', 'normpath'),
 'trainbus.utils.gpu': ('change_gpu', 'get_nr_gpu', 'get_num_gpu'),
 'trainbus.utils.logger': ('set_logger_dir', 'auto_set_dir', 'get_logger_dir', 'warn'),
 'trainbus.utils.naming': (),
 'trainbus.utils.nvml': ('NVMLContext',),
 'trainbus.utils.palette': ('PALETTE_RGB',),
 'trainbus.utils.serialize': ('loads', 'dumps'),
 'trainbus.utils.stats': ('StatCounter', 'BinaryStatistics', 'RatioCounter', 'Accuracy', 'OnlineMoments'),
 'trainbus.utils.timer': ('timed_operation', 'IterSpeedCounter', 'Timer'),
 'trainbus.utils.utils': ('change_env', 'get_rng', 'fix_rng_seed', 'get_tqdm', 'execute_only_once',
                          'humanize_time_delta'),
 'trainbus.utils.viz': ('interactive_imshow', 'stack_patches', 'gen_stack_patches', 'dump_dataflow_images',
                        'intensity_to_rgb', 'draw_boxes')}

#: what ``from tensorpack import *`` binds (less its private switch and ``libinfo``)
TENSORPACK_STAR = ['AsyncMultiGPUTrainer', 'AugmentImageComponent', 'AugmentImageComponents', 'AugmentImageCoordinates',
 'AutoResumeTrainConfig', 'AvgPooling', 'BNReLU', 'BatchData', 'BatchDataByShape', 'BatchNorm', 'BatchQueueInput',
 'BatchRenorm', 'BinaryClassificationStats', 'BytePSTrainer', 'CacheData', 'CaffeLMDB', 'Callback',
 'CallbackFactory', 'CallbackToHook', 'Callbacks', 'ChainInit', 'CheckNumerics', 'ClassificationError',
 'CometMLMonitor', 'ConcatData', 'ConcatWith', 'Conv2D', 'Conv2DTranspose', 'DEFAULT_CALLBACKS', 'DEFAULT_MONITORS',
 'DataFlow', 'DataFlowTerminated', 'DataFromGenerator', 'DataFromIterable', 'DataFromList', 'DataFromQueue',
 'DataParallelInferenceRunner', 'DataParallelOfflinePredictor', 'DatasetPredictorBase', 'Deconv2D', 'DictRestore',
 'DistributedTrainerParameterServer', 'DistributedTrainerReplicated', 'Dropout', 'DummyConstantInput',
 'DumpParamAsImage', 'DumpTensor', 'DumpTensorAsImage', 'DumpTensors', 'EnableCallbackIf', 'EstimatedTimeLeft',
 'FakeData', 'FeedInput', 'FeedfreeInput', 'FeedfreePredictor', 'FixedSizeData', 'FixedUnPooling', 'FullyConnected',
 'GPUMemoryTracker', 'GPUUtilizationTracker', 'GlobalAvgPooling', 'GraphProfiler', 'GraphVarParam', 'HDF5Data',
 'HDF5Serializer', 'HookToCallback', 'HorovodTrainer', 'HostMemoryTracker', 'HumanHyperParamSetter', 'HyperParam',
 'HyperParamSetter', 'HyperParamSetterWithFunc', 'ImageFromFile', 'InferenceRunner', 'InferenceRunnerBase',
 'Inferencer', 'InjectShell', 'InputSource', 'InstanceNorm', 'JSONWriter', 'JoinData', 'JustCurrentSession',
 'LMDBData', 'LMDBDataDecoder', 'LMDBSerializer', 'LayerNorm', 'LinearWrap', 'LocallyShuffleData', 'MapData',
 'MapDataComponent', 'MaxPooling', 'MaxSaver', 'Maxout', 'MergeAllSummaries', 'MinSaver', 'ModelDesc',
 'ModelDescBase', 'ModelSaver', 'MonitorBase', 'Monitors', 'MovingAverageSummary', 'MultiProcessDatasetPredictor',
 'MultiProcessMapAndBatchData', 'MultiProcessMapAndBatchDataZMQ', 'MultiProcessMapData', 'MultiProcessMapDataZMQ',
 'MultiProcessPrefetchData', 'MultiProcessRunner', 'MultiProcessRunnerZMQ', 'MultiThreadAsyncPredictor',
 'MultiThreadMapData', 'MultiThreadPrefetchData', 'MultiThreadRunner', 'MultiTowerOfflinePredictor', 'NoOpTrainer',
 'NumpySerializer', 'ObjAttrParam', 'OfflinePredictor', 'OnlinePredictor', 'PReLU', 'PeakMemoryTracker',
 'PeriodicCallback', 'PeriodicTrigger', 'PlaceholderInput', 'PredictConfig', 'PredictorBase', 'PrefetchData',
 'PrefetchDataZMQ', 'PrintData', 'ProcessTensors', 'ProgressBar', 'ProxyCallback', 'ProxyDataFlow', 'QueueInput',
 'QueueInputTrainer', 'RNGDataFlow', 'RandomChooseData', 'RandomMixData', 'RemoteDataZMQ', 'RepeatedData',
 'RepeatedDataPoint', 'RunOp', 'RunUpdateOps', 'SVMLightData', 'SaverRestore', 'SaverRestoreRelaxed',
 'ScalarPrinter', 'ScalarStats', 'ScheduledHyperParamSetter', 'SelectComponent', 'SendMonitorData', 'SendStat',
 'SessionInit', 'SessionRunTimeout', 'SimpleDatasetPredictor', 'SimpleMovingAverage', 'SimpleTrainer',
 'SingleCostTrainer', 'SmartInit', 'StagingInput', 'StartProcOrThread', 'StatMonitorParamSetter', 'StopTraining',
 'SyncMultiGPUTrainer', 'SyncMultiGPUTrainerParameterServer', 'SyncMultiGPUTrainerReplicated', 'TFDatasetInput',
 'TFEventWriter', 'TFLocalCLIDebugHook', 'TFRecordSerializer', 'TensorInput', 'TensorPrinter', 'TestDataSpeed',
 'ThroughputTracker', 'TowerContext', 'TowerTrainer', 'TrainConfig', 'Trainer', 'VariableHolder', 'ZMQInput',
 'argscope', 'callbacks', 'change_env', 'collect_env_info', 'compat', 'dataflow', 'dataset',
 'disable_layer_logging', 'enable_argscope_for_function', 'enable_argscope_for_module', 'execute_only_once',
 'fix_rng_seed', 'get_arg_scope', 'get_current_tower_context', 'get_default_sess_config', 'get_global_step_value',
 'get_global_step_var', 'get_model_loader', 'get_rng', 'get_tf_version_tuple', 'get_tqdm', 'gradproc',
 'graph_builder', 'humanize_time_delta', 'imgaug', 'input_source', 'l1_regularizer', 'l2_regularizer',
 'launch_train_with_config', 'layer_register', 'logger', 'models', 'optimizer', 'predict', 'regularize_cost',
 'regularize_cost_from_collection', 'remap_input_source', 'rename_tflayer_get_variable', 'send_dataflow_zmq',
 'sesscreate', 'sessinit', 'summary', 'tfutils', 'tfv1', 'tower', 'train', 'utils', 'varreplace']


@pytest.mark.parametrize("path", sorted(TENSORPACK_MODULES))
def test_every_tensorpack_module_path_imports_with_its_names(path):
    module = importlib.import_module(path)
    missing = []
    for name in TENSORPACK_MODULES[path]:
        if name in _registry.OUT_OF_SCOPE:
            with pytest.raises(ImportError, match="not provided by trainbus"):
                getattr(module, name)
            continue
        if not hasattr(module, name):
            missing.append(name)
    assert not missing, f"{path} lacks {missing}"


def test_star_import_binds_what_tensorpacks_binds():
    ns: dict = {}
    exec("from trainbus import *", ns)
    missing = [n for n in TENSORPACK_STAR if n not in ns and n not in _registry.OUT_OF_SCOPE]
    assert not missing, missing
    # the same objects as the subpackages hold
    import trainbus.dataflow
    import trainbus.models
    import trainbus.tfutils
    assert ns["Conv2D"] is trainbus.models.Conv2D and ns["BatchData"] is trainbus.dataflow.BatchData
    tf = importlib.import_module("tensorflow")
    assert ns["tfv1"].get_variable is tf.compat.v1.get_variable  # the tf.compat.v1 API
    assert ns["summary"] is importlib.import_module("trainbus.tfutils.summary")
    assert ns["imgaug"] is importlib.import_module("trainbus.dataflow.imgaug")
    assert ns["dataset"] is importlib.import_module("trainbus.dataflow.dataset")
