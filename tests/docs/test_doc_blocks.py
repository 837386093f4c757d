"""Every ```python and ```toml block of docs/*.md and README.md runs as written.

Python blocks of one page run in order in one fresh namespace (a block may use what an earlier
block of its page defined), in a fresh working directory, with a fresh TensorFlow graph and
log directory. A TOML block that is a run file (it has a ``[model]``, ``[data]``, ``[train]``,
... table) is checked by the run-file checker (``trainbus.runfile.load_run_file``); any
other TOML block (a ``pyproject.toml`` excerpt) is parsed.

A block that cannot run here (it needs a GPU, a cluster, ``horovodrun``, the network, a
dataset download, a distribution that must not be installed) is preceded, on the line before
its fence, by ``<!-- not-run: the reason -->``; the reason must be given.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import pathlib
import re
import sys

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]

FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w+-]*)\s*$")
NOT_RUN = re.compile(r"^\s*<!--\s*not-run:(?P<reason>.*?)-->\s*$")
RUN_FILE_TABLES = {"model", "data", "trainer", "callbacks", "monitors", "session_init", "train"}

# Pages whose examples need an optional package the development environment keeps under
# <venv>/opt (tools/bootstrap.sh): the page's process gets those folders on its path.
PAGE_OPT_PACKAGES: dict[str, tuple[str, ...]] = {
    "imgaug.md": ("image",),  # OpenCV: trainbus-dataflow[image]
}

# Pages whose python blocks another test module runs, each block alone in a namespace of its own
# and with its output checked: running the page here too would run every block twice (the
# MLflow and Comet examples of docs/monitors.md take seconds). That module must run every python
# block of the page, word for word, and the page may mark none "not-run"
# (test_pages_run_elsewhere_are_run_there).
PAGES_RUN_ELSEWHERE: dict[str, str] = {
    "docs/monitors.md": "tests/monitors/test_monitors_docs.py",
}

# Blocks of pages this module's authors may not edit, known to fail, with the fix they need.
# The xfail is strict: once the page is fixed, the test passes and this entry must go.
KNOWN_BROKEN: dict[str, str] = {
}


@dataclasses.dataclass
class Block:
    page: pathlib.Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    not_run: str | None  # the reason given, or None when the block runs

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks_of(page: pathlib.Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or not m.group("lang"):
            i += 1
            continue
        indent, lang, start = m.group("indent"), m.group("lang"), i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        nm = NOT_RUN.match(prev)
        found.append(Block(page, start + 1, lang, "\n".join(body) + "\n", nm.group("reason").strip() if nm else None))
    return found


def _page_param(page: pathlib.Path):
    name = str(page.relative_to(ROOT))
    marks = [pytest.mark.xfail(reason=KNOWN_BROKEN[name], strict=True)] if name in KNOWN_BROKEN else []
    return pytest.param(page, id=name, marks=marks)


def _python_pages() -> list:
    return [_page_param(p) for p in PAGES if any(b.lang == "python" for b in blocks_of(p))
            and str(p.relative_to(ROOT)) not in PAGES_RUN_ELSEWHERE]


def _toml_blocks() -> list:
    return [pytest.param(b, id=b.where) for p in PAGES for b in blocks_of(p) if b.lang == "toml"]


def test_blocks_are_found_and_every_not_run_has_a_reason() -> None:
    every = [b for p in PAGES for b in blocks_of(p)]
    assert sum(b.lang == "python" for b in every) >= 50, "the fence parser lost python blocks"
    assert any(b.lang == "toml" for b in every)
    for b in every:
        if b.not_run is not None:
            assert b.not_run, f"{b.where}: <!-- not-run: ... --> must say why the block cannot run here"
            assert b.lang in ("python", "toml"), f"{b.where}: not-run marks a {b.lang} block, which never runs"


@pytest.mark.parametrize("page,runner", sorted(PAGES_RUN_ELSEWHERE.items()))
def test_pages_run_elsewhere_are_run_there(page: str, runner: str) -> None:
    """The module a page is left to runs each of the page's python blocks: its ``BLOCKS`` (what
    its tests run) are the page's python blocks, in order, none of them marked not-run."""
    import importlib.util

    blocks = [b for b in blocks_of(ROOT / page) if b.lang == "python"]
    assert blocks and not [b.where for b in blocks if b.not_run is not None], f"{page} has not-run blocks"
    spec = importlib.util.spec_from_file_location("_page_runner", ROOT / runner)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert [c.strip() for c in module.BLOCKS] == [b.code.strip() for b in blocks], \
        f"{runner} does not run the python blocks of {page} as the page has them"
    runs = getattr(module, "test_example_runs")
    params = next(m for m in runs.pytestmark if m.name == "parametrize").args[1]
    indexes = [getattr(p, "values", (p,))[0] for p in params]
    assert indexes == list(range(len(blocks))), f"{runner} runs blocks {indexes} of {len(blocks)}"


@pytest.fixture
def fresh_process_state(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch):
    """A working directory, sys.path entry, TensorFlow graph and log directory of its own."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    before = set(sys.modules)
    from trainbus.utils import logger

    logger._reset_for_tests()
    if "tensorflow" in sys.modules:
        sys.modules["tensorflow"].compat.v1.reset_default_graph()
    yield tmp_path
    logger._reset_for_tests()
    if "tensorflow" in sys.modules:
        sys.modules["tensorflow"].compat.v1.reset_default_graph()
    # modules a page wrote into its directory and imported are the page's own
    for name in set(sys.modules) - before:
        f = getattr(sys.modules[name], "__file__", None) or ""
        if f.startswith(str(tmp_path)):
            del sys.modules[name]


def _fresh_graph_if_finalized() -> None:
    """A block that trained leaves the default graph finalized; the next block starts a new one
    (as its own script would), while blocks that only build keep adding to the same graph."""
    tf = sys.modules.get("tensorflow")
    if tf is not None and tf.compat.v1.get_default_graph().finalized:
        tf.compat.v1.reset_default_graph()


def run_page(page: pathlib.Path) -> None:
    """Run the python blocks of ``page`` in order in one namespace (in this process); raise
    AssertionError naming the first block that fails, with its output."""
    namespace: dict = {"__name__": "__doc_example__"}
    for b in blocks_of(page):
        if b.lang != "python" or b.not_run is not None:
            continue
        _fresh_graph_if_finalized()
        out = io.StringIO()
        try:
            code = compile(b.code, b.where, "exec")
            with contextlib.redirect_stdout(out):
                exec(code, namespace)
        except BaseException as e:
            raise AssertionError(f"the python block at {b.where} fails: {type(e).__name__}: {e}\n"
                                 f"its output:\n{out.getvalue()[-2000:]}") from e


@pytest.mark.parametrize("page", _python_pages())
def test_python_blocks_of_page_run(page: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """Each page runs in a process of its own, as a reader's script would: a page may switch
    TensorFlow to graph mode (``disable_eager_execution``) or set other process-wide state.
    TensorFlow's C++ log level is the zygote's (the pages' output is not checked for it)."""
    assert any(b.lang == "python" and b.not_run is None for b in blocks_of(page)) or all(
        b.not_run for b in blocks_of(page) if b.lang == "python")
    from optdeps import opt_packages  # tests/_support

    extra = [opt_packages(name) for name in PAGE_OPT_PACKAGES.get(page.name, ())]
    # TMPDIR: what a page's blocks put in temporary folders (tempfile.mkdtemp() of a log directory,
    # a dataset's files) goes into the test's tmp_path, which pytest removes, not into /tmp
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "TMPDIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), *extra, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    import zygote  # tests/_support (not on the path of the page's own process)

    # forked from the worker's zygote: a process of its own without TensorFlow's import (zygote.py)
    proc = zygote.run([sys.executable, __file__, str(page)], cwd=tmp_path, env=env, timeout=540)
    if proc.returncode != 0:
        marker = proc.stderr.find("AssertionError: the python block")
        detail = proc.stderr[marker:] if marker >= 0 else proc.stderr[-3000:]
        raise AssertionError(f"{page.relative_to(ROOT)}: {detail.strip()}")


def _readers_own(problem) -> bool:
    """A run-file example names the reader's own modules (``mymodels:Net``) and checkpoints
    (``SmartInit``'s ``obj``); that they are not on this machine is the one kind of problem
    such an example may have."""
    m = re.match(r"cannot import module '([\w.]+)' \(No module named '([\w.]+)'\)", problem.message)
    if m:
        return not m.group(2).startswith("trainbus")
    return problem.where == "session_init" and bool(
        re.match(r"SmartInit\(obj='[^']+'\) failed: FileNotFoundError: SmartInit: '[^']+' does not exist",
                 problem.message))


@pytest.mark.parametrize("block", _toml_blocks())
def test_toml_block(block: Block, fresh_process_state: pathlib.Path) -> None:
    if block.not_run is not None:
        pytest.skip(f"not-run: {block.not_run}")  # the reason is asserted by the test above
    doc = tomllib.loads(block.code)  # raises on invalid TOML
    if not RUN_FILE_TABLES & set(doc):
        assert doc, f"{block.where}: an empty TOML block"
        return
    from trainbus.runfile import RunConfigError, load_run_file

    first = block.code.lstrip().splitlines()[0]
    named = re.fullmatch(r"#\s*([\w.-]+\.toml)\s*", first)
    path = fresh_process_state / (named.group(1) if named else "run.toml")
    path.write_text(block.code, encoding="utf-8")
    try:
        load_run_file(path)
    except RunConfigError as e:
        real = [p for p in e.problems if not _readers_own(p)]
        page = block.page.relative_to(ROOT)
        assert not real, f"the run file at {block.where} has mistakes:\n" + "\n".join(
            f"  {page}:{block.line + (p.line or 0)}: {p.where}: {p.message}" for p in real)


if __name__ == "__main__":  # one page's python blocks, in a process of their own (see above)
    sys.path.insert(0, os.getcwd())
    run_page(pathlib.Path(sys.argv[1]))
