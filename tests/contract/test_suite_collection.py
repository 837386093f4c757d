"""The suite's own cost: every pytest-xdist worker collects every test file, also those it will
not run, so a test file binds a library that takes seconds to import (W&B, MLflow, comet_ml)
through ``lazymod.lazy`` and collecting it must not import that library."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lazymod import lazy

ROOT = Path(__file__).resolve().parents[2]
#: test file -> the slow libraries it binds lazily
LAZY_FILES = {
    "plugins/monitor-wandb/tests/test_monitor_wandb.py": ("wandb",),
    "plugins/monitor-mlflow/tests/test_monitor_mlflow.py": ("mlflow",),
    "plugins/monitor-comet/tests/test_monitor_comet.py": ("comet_ml",),
}


def test_collecting_the_monitor_tests_imports_none_of_their_libraries(tmp_path):
    files = [str(ROOT / f) for f in LAZY_FILES]
    libraries = sorted({m for mods in LAZY_FILES.values() for m in mods})
    code = textwrap.dedent(f"""
        import sys
        import pytest
        status = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *{files!r}])
        print("STATUS", int(status))
        print("IMPORTED", sorted(m for m in {libraries!r} if m in sys.modules))
    """)
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "STATUS 0" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    assert "IMPORTED []" in r.stdout, r.stdout[-3000:]
    # every test of those files was collected (none lost to a name the stand-in hides)
    collected = [ln for ln in r.stdout.splitlines() if "::test_" in ln]
    for f in LAZY_FILES:
        assert any(ln.startswith(f + "::") for ln in collected), (f, collected[:5])


def test_the_stand_in_imports_at_the_first_public_attribute():
    mod = lazy("colorsys")  # a small standard module, imported by no test before this one needs it
    for probe in ("__test__", "__wrapped__", "__bases__", "_mock_name"):
        with pytest.raises(AttributeError):
            getattr(mod, probe)
    assert "(imported)" not in repr(mod)  # none of the probes imported it
    assert mod.rgb_to_hsv(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0)
    assert "(imported)" in repr(mod)
    assert mod.__name__ == "colorsys"  # once imported, every attribute is the module's
