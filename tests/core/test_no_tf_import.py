"""The event core and name resolution import without TensorFlow (TF blocked in a subprocess)."""

import subprocess
import sys
import textwrap

CODE = textwrap.dedent("""
    import sys
    sys.modules['tensorflow'] = None          # any 'import tensorflow' now raises ImportError
    import trainbus
    from trainbus.bus import hookspecs, manager as _manager, registry as _registry
    from trainbus import _defaults, hookimpl
    import trainbus.callbacks, trainbus.train, trainbus.tfutils, trainbus.tfutils.sessinit
    from trainbus.callbacks import Callback, ProxyCallback, CallbackFactory, Callbacks, PeriodicTrigger, \\
        PeriodicCallback, EnableCallbackIf, MonitorBase, Monitors
    from trainbus.train import StopTraining, DEFAULT_CALLBACKS
    from trainbus.tfutils.sessinit import SessionInit, JustCurrentSession, ChainInit
    # resolution reads metadata; the names are known without importing any plugin module
    names = set(dir(trainbus.train)) | set(dir(trainbus.callbacks))
    assert 'SimpleTrainer' in names, sorted(names)
    class C(Callback):
        def _trigger(self): pass
    pm = _manager.TrainbusPluginManager()
    pm.register_ordered([C(), C()])
    assert 'tensorflow' not in [m for m in sys.modules if sys.modules[m] is not None and m.startswith('tensorflow')]
    loaded = [m for m in sys.modules if m.startswith('trainbus_')]
    assert loaded == [], loaded              # no plugin was imported to learn names
    print('OK')
""")


def test_event_core_imports_without_tensorflow():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("OK")


def test_using_tf_side_without_tensorflow_fails_clearly():
    code = "import sys; sys.modules['tensorflow'] = None\nimport trainbus\ntry:\n    trainbus.ModelDesc\nexcept ImportError as e:\n    print('ImportError', e)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "ImportError" in out.stdout, out.stdout + out.stderr
