"""Fixtures for the ecosystem tests: wheels of the repository's distributions and FRESH virtual
environments that install them the way users do (``pip install --no-index --find-links``).

The heavy third-party dependencies (TensorFlow, numpy, pluggy, ...) are not reinstalled: a
``.pth`` file in the fresh environment points to a directory of symlinks to the development
environment's site-packages entries, minus every trainbus distribution and pip (setuptools stays:
TensorBoard, which ``trainbus[standard]`` installs, requires it at run time).
So only what pip installs from the wheelhouse provides trainbus names in a fresh environment.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import sysconfig
import tomllib
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
_SKIP_SITE = ("pip", "_distutils_hack", "wheel", "__pycache__")


def _dist_dirs() -> list[pathlib.Path]:
    dirs = [ROOT / "core"]
    dirs += sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml"))
    return dirs


BUILD_SCRIPT = ROOT / "tools" / "build_wheels.sh"


def build_wheels(out: pathlib.Path) -> subprocess.CompletedProcess:
    """Run ``tools/build_wheels.sh out`` (the documented way to build the wheelhouse) with this
    interpreter; raises with its output when it fails."""
    env = dict(os.environ, PYTHON=sys.executable)
    r = subprocess.run(["bash", str(BUILD_SCRIPT), str(out)], capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"tools/build_wheels.sh failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory) -> pathlib.Path:
    """Wheels of the core and of every plugin directory, built once per test session by
    ``tools/build_wheels.sh`` (as users build them). The xdist workers of one run share them:
    the first to need them builds them under a lock in the run's common temporary directory."""
    import fcntl

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # pytest-of-<user>/pytest-<n>/, the workers' common parent
    out = root / "wheelhouse-shared" / "wheels"
    done = out.parent / "built"
    out.parent.mkdir(exist_ok=True)
    with open(out.parent / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            build_wheels(out)
            done.write_text("ok\n")
    return out


@pytest.fixture(scope="session")
def deps_dir(tmp_path_factory) -> pathlib.Path:
    """Symlinks to the development environment's third-party packages (no trainbus, no pip)."""
    site = pathlib.Path(sysconfig.get_paths()["purelib"])
    out = tmp_path_factory.mktemp("deps")
    for entry in site.iterdir():
        low = entry.name.lower()
        if "trainbus" in low or low.startswith("__editable__") or low.endswith((".pth", ".egg-link")):
            continue
        if low.split("-")[0] in _SKIP_SITE or low in _SKIP_SITE:
            continue
        (out / entry.name).symlink_to(entry)
    return out


def repo_plugin_names() -> dict[str, str]:
    """distribution name -> plugin directory name, from plugins/*/pyproject.toml."""
    out = {}
    for pp in sorted(ROOT.glob("plugins/*/pyproject.toml")):
        out[tomllib.loads(pp.read_text())["project"]["name"]] = pp.parent.name
    return out


@dataclasses.dataclass
class FreshVenv:
    """A new virtual environment with no trainbus in it until ``install`` puts it there.

    With ``zygote=True`` (for a test that runs several TensorFlow-importing commands after its
    installs), its Python commands (``python -c``/``-m``/a script, and its console scripts such as
    ``bin/trainbus``) run in children of a zygote of its own (tests/_support/zygote.py): an
    interpreter of this environment that imported TensorFlow (and nothing of trainbus) once
    the environment's site-packages had what the command sees, and forks a process per
    command. Anything that changes site-packages (pip) makes the next command start a new
    zygote, so a command never sees an older environment than a new interpreter would. A command
    that imports no TensorFlow (listing the distributions, ``trainbus new-plugin``) is run with
    ``zygote=False``: a new interpreter for it costs a tenth of a second, a zygote seconds."""

    path: pathlib.Path
    wheels: pathlib.Path
    site: pathlib.Path
    use_zygote: bool = False
    _zygote: Any = None
    _zygote_site: Any = None

    @property
    def python(self) -> str:
        return str(self.path / "bin" / "python")

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_"))}
        env["TF_CPP_MIN_LOG_LEVEL"] = "3"
        env["PATH"] = f"{self.path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        return env

    def install(self, *requirements: str, find_links: list[pathlib.Path] = ()) -> str:
        """``pip install --no-index --find-links <wheels>`` into this environment."""
        links = [a for d in (self.wheels, *find_links) for a in ("--find-links", str(d))]
        r = subprocess.run([sys.executable, "-m", "pip", "--python", self.python, "install", "-q", "--no-index",
                            *links, *requirements], capture_output=True, text=True, env=self.env())
        if r.returncode != 0:
            raise AssertionError(f"pip install {' '.join(requirements)} failed:\n{r.stdout}\n{r.stderr}")
        return r.stdout

    def _python_command(self, args: tuple[str, ...]) -> list[str] | None:
        """``args`` as ``[python, ...]`` when it runs this environment's Python (a console
        script is a Python file whose first line names it), else None."""
        if args[0] == self.python:
            return list(args)
        exe = pathlib.Path(args[0])
        if exe.parent == self.path / "bin" and exe.is_file():
            with open(exe, "rb") as f:
                if f.readline().strip() == f"#!{self.python}".encode():
                    return [self.python, *args]
        return None

    def _site_state(self) -> tuple:
        """What an install changes in site-packages: its entries, and when each distribution's
        metadata and each ``.pth`` file was written (not the packages' own folders, whose
        ``__pycache__`` a command may fill)."""
        return tuple(sorted((e.name, e.stat().st_mtime_ns if e.name.endswith((".dist-info", ".pth")) else 0)
                            for e in os.scandir(self.site)))

    def zygote(self) -> Any:
        """This environment's zygote, (re)started when site-packages changed since."""
        import zygote as zyg  # tests/_support

        state = self._site_state()
        if self._zygote is None or self._zygote_site != state or not self._zygote.alive():
            self.close()
            self._zygote = zyg.Zygote(python=self.python, env=self.env())
            self._zygote_site = state
        return self._zygote

    def close(self) -> None:
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None

    def run(self, *args: str, check: bool = True, cwd: str | None = None, timeout: float = 300,
            zygote: bool = True) -> subprocess.CompletedProcess:
        cmd = self._python_command(args)
        if (zygote and self.use_zygote and cmd is not None
                and (cmd[1:2] in (["-c"], ["-m"]) or not cmd[1].startswith("-"))):
            r = self.zygote().run(cmd, cwd=cwd or os.getcwd(), env=self.env(), timeout=timeout)
        else:
            r = subprocess.run(list(args), capture_output=True, text=True, env=self.env(), cwd=cwd, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        return r

    def py(self, code: str, check: bool = True, cwd: str | None = None,
           zygote: bool = True) -> subprocess.CompletedProcess:
        return self.run(self.python, "-c", code, check=check, cwd=cwd, zygote=zygote)

    def py_json(self, code: str, zygote: bool = True) -> object:
        """Run ``code`` (which prints one JSON document on its last line) and return it."""
        out = self.py(code, zygote=zygote).stdout.strip().splitlines()
        return json.loads(out[-1])

    def distributions(self) -> dict[str, str]:
        """trainbus* distributions installed in this environment: name -> version."""
        return self.py_json(
            "import json, importlib.metadata as m\n"
            "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions() "
            "if d.metadata['Name'].startswith('trainbus')}))", zygote=False,
        )  # type: ignore[return-value]


@pytest.fixture()
def fresh_venv(tmp_path, wheelhouse, deps_dir):
    """A factory of fresh virtual environments (``fresh_venv()`` -> FreshVenv)."""
    made = []

    def make(name: str = "venv", zygote: bool = False) -> FreshVenv:
        path = tmp_path / name
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
        site = pathlib.Path(subprocess.run(
            [str(path / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True).stdout.strip())
        (site / "_trainbus_test_deps.pth").write_text(str(deps_dir) + "\n")
        v = FreshVenv(path, wheelhouse, site, use_zygote=zygote)
        made.append(v)
        return v

    yield make
    for v in made:
        v.close()
