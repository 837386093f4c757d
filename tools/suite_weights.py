"""Write tests/suite_weights.json from the ``--durations`` table of a pytest run.

    .venv/bin/python -m pytest -n 3 --dist loadfile --durations=0 | tee /tmp/suite.log
    .venv/bin/python tools/suite_weights.py /tmp/suite.log

The root conftest.py hands the test files to the xdist workers heaviest first (by these
seconds), so that a long file does not start last and run alone while the other core idles.
Files missing from the table weigh nothing and keep their collection order after the others.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
LINE = re.compile(r"^\s*(?P<sec>\d+(?:\.\d+)?)s\s+(?:call|setup|teardown)\s+(?P<node>\S+)")


def weights(log: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in log.splitlines():
        m = LINE.match(line)
        if m:
            path = m.group("node").split("::")[0]
            out[path] = out.get(path, 0.0) + float(m.group("sec"))
    return {k: round(v, 1) for k, v in sorted(out.items(), key=lambda kv: -kv[1]) if v >= 1.0}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: tools/suite_weights.py PYTEST_LOG (a run with --durations=0)", file=sys.stderr)
        return 2
    found = weights(pathlib.Path(argv[0]).read_text(errors="replace"))
    if not found:
        print(f"{argv[0]}: no --durations table in it; run pytest with --durations=0", file=sys.stderr)
        return 1
    target = ROOT / "tests" / "suite_weights.json"
    target.write_text(json.dumps(found, indent=1) + "\n")
    print(f"{target}: {len(found)} files, {sum(found.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
