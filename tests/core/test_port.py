"""``trainbus port`` / :func:`trainbus.port.port_tree`: each rule on a small TF 1-style file of
our own (exact expected text: only the changed characters move), the refusals with their report
line, idempotency, ``--diff`` writing nothing, ``--in-place``'s backup and the exit statuses.
(Ported scripts that really train: tests/ecosystem/test_port_trains.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import zygote  # tests/_support

from trainbus.cli import main
from trainbus.port import REPORT_NAME, PortArgumentError, port_tree


def _tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(textwrap.dedent(content))
    return root


def _port_one(tmp_path: Path, text: str, name: str = "script.py"):
    src = _tree(tmp_path / "src", {name: text})
    report = port_tree(src, tmp_path / "dst")
    return (tmp_path / "dst" / name).read_text(), report


IMPORTS = """\
    # tensorpack's script (this comment names tensorpack and stays)
    import tensorpack
    import tensorpack as tp
    import tensorpack.dataflow
    import tensorpack.utils.viz as viz
    from tensorpack import *
    from tensorpack.tfutils.summary import (add_moving_summary,
                                           add_param_summary)
    from tensorpack.dataflow import DataFlow
    import importlib
    mod = importlib.import_module("tensorpack.utils")
    print("tensorpack", tensorpack.dataflow.DataFlow, tp.ModelDesc)
"""

IMPORTS_PORTED = """\
    # tensorpack's script (this comment names tensorpack and stays)
    import trainbus
    import trainbus as tp
    import trainbus.dataflow
    import trainbus.utils.viz as viz
    from trainbus import *
    from trainbus.tfutils.summary import (add_moving_summary,
                                           add_param_summary)
    from trainbus.dataflow import DataFlow
    import importlib
    mod = importlib.import_module("trainbus.utils")
    print("tensorpack", trainbus.dataflow.DataFlow, tp.ModelDesc)
"""


def test_every_tensorpack_import_form_becomes_trainbus_and_nothing_else_changes(tmp_path):
    out, report = _port_one(tmp_path, IMPORTS)
    assert out == textwrap.dedent(IMPORTS_PORTED)
    assert report.exit_code == 0 and not report.problems
    assert report.files[0].route == "none"
    lines = {c.line for c in report.changes}
    assert lines == {2, 3, 4, 5, 6, 7, 9, 11, 12}
    assert all("trainbus" in " ".join(c.reasons) for c in report.changes)
    md = (tmp_path / "dst" / REPORT_NAME).read_text()
    assert "`script.py:7`" in md and "tensorpack import -> trainbus" in md


def test_tfv1_import_form_keeps_tf1_names(tmp_path):
    text = """\
        from tensorpack import tfv1 as tf
        from tensorpack.compat import tfv1
        x = tf.placeholder(tf.float32, [None, 2])   # TF 1 name, fine under tf.compat.v1
        v = tfv1.get_variable('v', [2])
    """
    out, report = _port_one(tmp_path, text)
    assert out == textwrap.dedent(text).replace("from tensorpack", "from trainbus")
    assert report.files[0].route == "v1"


COMPAT = """\
    #!/usr/bin/env python
    \"\"\"A TF 1 script.\"\"\"
    import numpy as np
    import tensorflow as tf   # TF 1.x

    def net(x):
        w = tf.get_variable('w', [int(x.get_shape()[1].value), 3],
                            initializer=tf.truncated_normal_initializer(stddev=0.1))   # odd   spacing
        return tf.matmul(x, w)

    x = tf.placeholder(tf.float32, [None, 4])
    y = net(x)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        print(sess.run(y, {x: np.ones((2, 4))}).shape)
"""


def test_compat_route_changes_the_import_and_adds_disable_v2_behavior_only(tmp_path):
    out, report = _port_one(tmp_path, COMPAT)
    expected = textwrap.dedent(COMPAT).replace(
        "import tensorflow as tf   # TF 1.x\n",
        "import tensorflow.compat.v1 as tf   # TF 1.x\ntf.disable_v2_behavior()\n")
    assert out == expected
    f = report.files[0]
    assert f.route == "compat" and "shape[i].value" in f.why
    assert [c.line for c in report.changes] == [4]
    # the ported file runs on TensorFlow 2.21
    (tmp_path / "dst" / "script.py").write_text(out)
    # forked from the worker's zygote (tests/_support/zygote.py): its own process, TensorFlow imported
    r = zygote.run([sys.executable, str(tmp_path / "dst" / "script.py")], timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().endswith("(2, 3)")


def test_compat_route_is_chosen_when_it_changes_fewer_lines_and_says_why(tmp_path):
    text = """\
        import tensorflow as tf
        a = tf.placeholder(tf.float32)
        b = tf.get_variable('b', [])
        c = tf.train.AdamOptimizer(0.1)
        d = tf.log(a)
    """
    out, report = _port_one(tmp_path, text)
    assert out.splitlines()[:2] == ["import tensorflow.compat.v1 as tf", "tf.disable_v2_behavior()"]
    assert out.splitlines()[2:] == textwrap.dedent(text).splitlines()[1:]
    why = report.files[0].why
    assert why.startswith("compat:") and "changes 2 lines where tf_upgrade_v2 changes 4" in why


def test_upgrade_route_uses_tensorflows_upgrader_for_a_one_line_change(tmp_path):
    text = """\
        import tensorflow as tf
        def f(x):
            return tf.nn.relu(x) + tf.log(x)  # one TF 1 name
    """
    out, report = _port_one(tmp_path, text)
    assert out == textwrap.dedent(text).replace("tf.log(x)", "tf.math.log(x)")
    assert report.files[0].route == "upgrade"
    assert "tf_upgrade_v2" in report.changes[0].reasons[0]


def test_upgrade_route_when_tf2_only_names_are_used(tmp_path):
    text = """\
        import tensorflow as tf
        w = tf.summary.create_file_writer('/tmp/unused')
        p = tf.placeholder(tf.float32)
        q = tf.get_variable('q', [])
    """
    out, report = _port_one(tmp_path, text)
    assert report.files[0].route == "upgrade" and "tf.compat.v1 lacks" in report.files[0].why
    assert "w = tf.summary.create_file_writer('/tmp/unused')" in out
    assert "tf.compat.v1.placeholder(tf.float32)" in out and "tf.compat.v1.get_variable('q', [])" in out


def test_keep_route_leaves_a_tf2_clean_file_alone(tmp_path):
    text = """\
        import tensorflow as tf
        def f(x):
            try:
                resize = tf.compat.v2.image.resize_images  # a fallback for another version
            except AttributeError:
                resize = tf.image.resize
            return tf.reduce_mean(tf.nn.relu(x))
    """
    out, report = _port_one(tmp_path, text)
    assert out == textwrap.dedent(text)
    assert report.files[0].route == "keep" and not report.changes


CONTRIB = """\
    import tensorflow as tf
    import tensorflow.contrib.slim as slim
    from tensorflow.contrib.slim.nets import resnet_v1
    rnn = tf.contrib.rnn

    def model(x, seq):
        reg = tf.contrib.layers.l2_regularizer(1e-4)
        h = tf.contrib.layers.fully_connected(x, 4, weights_regularizer=reg)
        with tf.contrib.framework.arg_scope([slim.conv2d], padding='SAME'):
            pass
        cell = rnn.MultiRNNCell([rnn.LSTMBlockCell(4), rnn.BasicLSTMCell(4)])
        cell = tf.contrib.rnn.DropoutWrapper(cell, output_keep_prob=0.5)
        outs, st = rnn.static_rnn(cell, seq, dtype=tf.float32)
        step = tf.contrib.framework.get_or_create_global_step()
        return tf.contrib.slim.flatten(h), tf.placeholder(tf.float32)
"""

CONTRIB_PORTED = """\
    import tensorflow as tf
    import tf_slim
    import tf_slim as slim
    from tf_slim.nets import resnet_v1
    rnn = tf.compat.v1.nn.rnn_cell

    def model(x, seq):
        reg = tf.keras.regularizers.l2(0.5 * (1e-4))
        h = tf_slim.fully_connected(x, 4, weights_regularizer=reg)
        with tf_slim.arg_scope([slim.conv2d], padding='SAME'):
            pass
        cell = rnn.MultiRNNCell([rnn.LSTMCell(4), rnn.BasicLSTMCell(4)])
        cell = tf.compat.v1.nn.rnn_cell.DropoutWrapper(cell, output_keep_prob=0.5)
        outs, st = tf.compat.v1.nn.static_rnn(cell, seq, dtype=tf.float32)
        step = tf.compat.v1.train.get_or_create_global_step()
        return tf_slim.flatten(h), tf.compat.v1.placeholder(tf.float32)
"""


def test_contrib_pieces_go_to_their_maintained_homes(tmp_path):
    out, report = _port_one(tmp_path, CONTRIB)
    body = out.split("\n", 2)[2]  # after the Keras 2 lines (tf.keras.regularizers needs Keras 2)
    assert out.startswith("import os  # trainbus port: ")
    assert out.split("\n")[1] == 'os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")'
    assert body == textwrap.dedent(CONTRIB_PORTED)
    # its one TF 1 name outside tf.contrib is one line for tf_upgrade_v2 (the compat route: two)
    assert [f.route for f in report.files] == ["upgrade"], report.files
    assert report.exit_code == 0, report.problems
    assert set(report.packages) == {"tf_slim", "tf_keras"}
    reasons = " | ".join(r for c in report.changes for r in c.reasons)
    assert "tf_upgrade_v2: Multiplying scale arg of tf.contrib.layers.l2_regularizer" in reasons
    assert "LSTMBlockCell" in reasons and "tf.contrib.rnn.static_rnn -> tf.nn.static_rnn" in reasons
    assert any("TF_USE_LEGACY_KERAS=1" in r for r in report.runtime)


def test_every_file_is_ported_with_the_same_rules(tmp_path):
    # TensorFlow's upgrader puts all its rules back after each file: the tf.contrib rules must
    # not leak into the route choice of the next file (it chose the compat route then)
    first, report1 = _port_one(tmp_path / "1", CONTRIB)
    second, report2 = _port_one(tmp_path / "2", CONTRIB)
    assert first == second
    assert [f.route for f in report1.files] == [f.route for f in report2.files] == ["upgrade"]
    assert [f.why for f in report1.files] == [f.why for f in report2.files]


CONTRIB_IMPORTS = """\
    import tensorflow as tf
    from tensorflow.contrib import rnn
    from tensorflow.contrib.layers import xavier_initializer, conv2d
    from tensorflow.contrib.rnn import LSTMCell, MultiRNNCell
    import tensorflow.contrib.layers as layers
    from tensorflow.contrib import slim
    cell = rnn.BasicLSTMCell(3)
    outs = rnn.static_rnn(cell, [], dtype=tf.float32)
"""

CONTRIB_IMPORTS_PORTED = """\
    import tensorflow as tf
    from tensorflow.compat.v1.nn import rnn_cell as rnn
    from tf_slim import xavier_initializer, conv2d
    from tensorflow.compat.v1.nn.rnn_cell import LSTMCell, MultiRNNCell
    import tf_slim as layers
    import tf_slim as slim
    cell = rnn.BasicLSTMCell(3)
    outs = tf.compat.v1.nn.static_rnn(cell, [], dtype=tf.float32)
"""


def test_contrib_import_statements_go_to_their_maintained_homes(tmp_path):
    out, report = _port_one(tmp_path, CONTRIB_IMPORTS)
    assert out.split("\n", 2)[2] == textwrap.dedent(CONTRIB_IMPORTS_PORTED)  # after the Keras 2 lines
    assert report.exit_code == 0, report.problems
    assert report.files[0].route == "keep"
    assert set(report.packages) == {"tf_slim", "tf_keras"}


def test_importing_the_port_imports_no_tensorflow(tmp_path):
    """``import trainbus.port`` and porting a file without TensorFlow never import TensorFlow."""
    _tree(tmp_path / "src", {"a.py": IMPORTS})
    code = textwrap.dedent(f"""
        import sys
        sys.modules['tensorflow'] = None
        from trainbus.port import port_tree
        r = port_tree({str(tmp_path / 'src')!r}, {str(tmp_path / 'dst')!r})
        assert r.exit_code == 0 and len(r.changes) == 9, r
        print('OK', [m for m in sys.modules if m.startswith('tensorflow') and sys.modules[m] is not None])
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "OK []"


def test_contrib_on_the_upgrade_route_is_written_against_tf_compat_v1(tmp_path):
    text = """\
        import tensorflow as tf
        def f(x):
            c = tf.contrib.rnn.GRUCell(3)
            d = tf.contrib.rnn.DropoutWrapper(c)
            return tf.math.log(x)
    """
    out, report = _port_one(tmp_path, text)
    assert report.files[0].route == "keep"
    assert "c = tf.compat.v1.nn.rnn_cell.GRUCell(3)" in out
    assert "d = tf.compat.v1.nn.rnn_cell.DropoutWrapper(c)" in out


def test_constructs_without_a_home_are_refused_with_a_report_line(tmp_path, capsys):
    text = """\
        import tensorflow as tf
        from tensorpack.utils.loadcaffe import load_caffe
        x = tf.placeholder(tf.float32)
        ge = tf.contrib.graph_editor.reroute_ts
        import tensorflow.contrib.eager as tfe
    """
    src = _tree(tmp_path / "src", {"m.py": text})
    rc = main(["port", str(src), str(tmp_path / "dst")])
    out = capsys.readouterr().out
    assert rc == 1
    assert "`m.py:4`: `tf.contrib.graph_editor.reroute_ts`: tf.contrib.graph_editor is gone" in out
    assert "Suggestion: rebuild the graph" in out
    assert "`m.py:5`: `import tensorflow.contrib.eager`" in out
    assert "`m.py:2`: `tensorpack.utils.loadcaffe`: trainbus does not provide it" in out
    assert "exit status 1" in (tmp_path / "dst" / REPORT_NAME).read_text()
    # what could be converted still was
    ported = (tmp_path / "dst" / "m.py").read_text()
    assert "from trainbus.utils.loadcaffe import load_caffe" in ported
    # one TF 1 name outside tf.contrib: tf_upgrade_v2's one line (the upgrade route)
    assert ported.startswith("import tensorflow as tf\n") and "x = tf.compat.v1.placeholder(tf.float32)" in ported


def test_porting_a_ported_tree_changes_nothing(tmp_path):
    src = _tree(tmp_path / "src", {"a.py": CONTRIB, "b.py": COMPAT, "pkg/c.py": IMPORTS,
                                   "data/table.csv": "a,b\n1,2\n", "blob.bin": bytes(range(256))})
    first = port_tree(src, tmp_path / "one")
    assert first.exit_code == 0 and len(first.changed_files) == 3
    second = port_tree(tmp_path / "one", tmp_path / "two")
    assert second.changes == [] and second.changed_files == []
    for rel in ("a.py", "b.py", "pkg/c.py", "data/table.csv", "blob.bin"):
        assert (tmp_path / "two" / rel).read_bytes() == (tmp_path / "one" / rel).read_bytes(), rel
    # files that are not Python are copied unchanged
    assert (tmp_path / "one" / "blob.bin").read_bytes() == bytes(range(256))
    assert sorted(first.copied) == ["blob.bin", "data/table.csv"]


def test_diff_prints_the_unified_diff_and_writes_nothing(tmp_path, capsys):
    src = _tree(tmp_path / "src", {"b.py": COMPAT, "n.txt": "x"})
    before = {p: p.read_bytes() for p in src.rglob("*")if p.is_file()}
    rc = main(["port", str(src), "--diff"])
    cap = capsys.readouterr()
    assert rc == 0
    assert cap.out.startswith("--- a/b.py\n+++ b/b.py\n")
    assert "-import tensorflow as tf   # TF 1.x\n+import tensorflow.compat.v1 as tf   # TF 1.x\n" \
           "+tf.disable_v2_behavior()\n" in cap.out
    assert "# trainbus port report" in cap.err
    assert {p: p.read_bytes() for p in src.rglob("*") if p.is_file()} == before
    assert sorted(os.listdir(tmp_path)) == ["src"]


def test_in_place_keeps_a_backup_of_the_original(tmp_path, capsys):
    src = _tree(tmp_path / "proj", {"b.py": COMPAT, "keep.py": "print('no tf')\n"})
    original = (src / "b.py").read_bytes()
    rc = main(["port", str(src), "--in-place"])
    assert rc == 0
    backup = tmp_path / "proj.port-backup"
    assert (backup / "b.py").read_bytes() == original
    assert (src / "b.py").read_text().startswith("#!/usr/bin/env python\n\"\"\"A TF 1 script.\"\"\"\nimport numpy")
    assert "import tensorflow.compat.v1 as tf" in (src / "b.py").read_text()
    assert (src / REPORT_NAME).exists()
    assert f"The original tree is kept in `{backup}`" in capsys.readouterr().out
    # a second in-place port has nothing to do: no second backup
    assert main(["port", str(src), "--in-place"]) == 0
    assert not (tmp_path / "proj.port-backup-1").exists()


@pytest.mark.parametrize("argv, message", [
    (["port", "{tmp}/missing"], "the source {tmp}/missing does not exist"),
    (["port", "{tmp}/src"], "give DST (where to write the ported tree), --in-place or --diff"),
    (["port", "{tmp}/src", "{tmp}/out", "--diff"], "give exactly one of DST, --in-place or --diff"),
    (["port", "{tmp}/src", "{tmp}/src/sub"], "is inside the source"),
    (["port", "{tmp}/src", "{tmp}/full"], "exists and is not an empty directory"),
    (["port", "{tmp}/src/n.txt", "{tmp}/x.py"], "is not a .py file"),
])
def test_bad_arguments_are_one_line_and_status_2(tmp_path, capsys, argv, message):
    _tree(tmp_path, {"src/a.py": "import tensorpack\n", "src/n.txt": "x", "full/f": "x"})
    rc = main([a.format(tmp=tmp_path) for a in argv])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("trainbus port: ") and message.format(tmp=tmp_path) in err
    with pytest.raises(PortArgumentError):
        port_tree(tmp_path / "missing", tmp_path / "o")


def test_dataflow_extras_the_tree_needs_are_in_the_packages_to_install(tmp_path):
    """OpenCV and scipy are extras of trainbus-dataflow: a tree using imgaug, the image dataflows
    or a .mat dataset is told which to install, with the name and line that first needs each."""
    src = _tree(tmp_path / "src", {
        "data.py": """\
            from tensorpack.dataflow import dataset, imgaug
            from tensorpack import AugmentImageComponent


            def get_data():
                ds = dataset.SVHNDigit("train")
                return AugmentImageComponent(ds, [imgaug.Resize((40, 40))])
            """,
        "plain.py": """\
            from tensorpack.dataflow import DataFromList, dataset
            import tensorflow as tf

            ds = dataset.Cifar10("train")  # no extra: Cifar10 reads pickles with numpy
            """,
        "edges.py": """\
            from tensorpack.dataflow.dataset import BSDS500
            ds = BSDS500("train")
            """,
    })
    report = port_tree(src, tmp_path / "dst")  # files in name order: data.py names each extra first
    assert report.packages == {
        "trainbus-dataflow[image]": "OpenCV, for image augmentation, image files and the image datasets "
                                    "(first needed by `imgaug` at data.py:1)",
        "trainbus-dataflow[mat]": "scipy, for the datasets stored as MATLAB .mat files (first needed by `SVHNDigit` "
                                  "at data.py:6)",
    }
    text = (tmp_path / "dst" / REPORT_NAME).read_text()
    assert "    pip install 'trainbus-dataflow[image]' 'trainbus-dataflow[mat]'\n" in text
    edges = port_tree(_tree(tmp_path / "src2", {"edges.py": (src / "edges.py").read_text()}), tmp_path / "dst2")
    assert edges.packages == {
        "trainbus-dataflow[image]": "OpenCV, for image augmentation, image files and the image datasets "
                                    "(first needed by `BSDS500` at edges.py:1)",
        "trainbus-dataflow[mat]": "scipy, for the datasets stored as MATLAB .mat files (first needed by `BSDS500` "
                                  "at edges.py:1)",
    }
    plain = port_tree(_tree(tmp_path / "src3", {"plain.py": (src / "plain.py").read_text()}), tmp_path / "dst3")
    assert plain.packages == {}
