"""Porting one Python file: the rules, in the order they run.

1. tensorpack imports become trainbus imports (only the module paths in import statements, and
   the name ``tensorpack`` where a plain ``import tensorpack[.x]`` bound it).
2. The file's TensorFlow route is chosen (see :class:`trainbus.port.FileRoute`); on the upgrade
   route TensorFlow's upgrader rewrites the TF 1 names.
3. ``tf.contrib`` pieces go to their maintained homes: the hand-written rules of
   :mod:`trainbus.port._tables` first, then TensorFlow's own ``tf.contrib`` rules.
4. The compat route switches the import and adds ``tf.disable_v2_behavior()``.
5. What needs Keras 2 is found in the result; lines are inserted last (``tf_slim`` import, the
   ``TF_USE_LEGACY_KERAS`` setting), so every earlier edit keeps the original's line numbers.
"""

from __future__ import annotations

import ast
import difflib
import io
import re
import tokenize
from dataclasses import dataclass, field

from trainbus.port import _tables
from trainbus.port._edits import Edit, Lines, apply, token_edits
from trainbus.port._report import Change, Problem

#: modules whose ``tfv1`` attribute is ``tf.compat.v1``
_TFV1_HOMES = {"trainbus", "trainbus.compat", "tensorpack", "tensorpack.compat"}
ENV_MARK = "TF_USE_LEGACY_KERAS"
#: the two lines that choose Keras 2 before TensorFlow is imported
ENV_LINES = ("import os  # trainbus port: Keras 2 (package tf_keras) for tf.layers / tf.keras / tf.nn.rnn_cell",
             f'os.environ.setdefault("{ENV_MARK}", "1")')
_SHAPE_VALUE = re.compile(r"(?:get_shape\(\)|\.shape)\s*\[[^\]\n]*\]\s*\.value\b")


@dataclass
class Binding:
    name: str
    kind: str  # "tf2" (import tensorflow) or "v1" (tf.compat.v1)
    node: ast.stmt | None = None
    alias: ast.alias | None = None


@dataclass
class FileResult:
    rel: str
    original: str
    text: str
    route: str
    why: str
    problems: list[Problem] = field(default_factory=list)
    packages: dict[str, str] = field(default_factory=dict)
    keras2: list[tuple[int, str]] = field(default_factory=list)
    reasons: dict[int, list[str]] = field(default_factory=dict)
    #: orig line -> lines to insert after it (line 0: before the first statement)
    after: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    is_script: bool = False
    local_imports: set[str] = field(default_factory=set)
    imports_tf_or_trainbus: bool = False
    first_stmt_line: int = 1

    def final_text(self, env: bool) -> str:
        nl = "\r\n" if "\r\n" in self.original else "\n"
        after = {k: list(v) for k, v in self.after.items()}
        if env and ENV_MARK not in self.text:
            after.setdefault(self.first_stmt_line - 1, []).insert(0, (
                nl.join(ENV_LINES),
                "sets TF_USE_LEGACY_KERAS=1 before TensorFlow is imported: tf.layers / tf.keras need Keras 2 "
                "(tf_keras) in graph mode"))
        if not after:
            return self.text
        lines = self.text.splitlines(keepends=True)
        out: list[str] = []
        for i in range(len(lines) + 1):
            if i > 0:
                out.append(lines[i - 1])
            for text, _ in after.get(i, ()):
                if out and not out[-1].endswith("\n"):
                    out[-1] += nl
                out.append(text + nl)
        return "".join(out)

    def changes(self, env: bool) -> list[Change]:
        final = self.final_text(env)
        a, b = self.original.splitlines(), final.splitlines()
        inserted: dict[str, str] = {}
        for items in self.after.values():
            for text, why in items:
                for ln in text.splitlines():
                    inserted[ln.strip()] = why
        if env:
            inserted[ENV_LINES[0]] = "sets TF_USE_LEGACY_KERAS=1 before TensorFlow is imported (Keras 2 for " \
                                     "tf.layers / tf.keras / tf.nn.rnn_cell)"
            inserted[ENV_LINES[1]] = "(same)"
        out: list[Change] = []
        for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if op == "equal":
                continue
            if op == "replace" and i2 - i1 == j2 - j1:
                for k in range(i2 - i1):
                    line = i1 + k + 1
                    out.append(Change(self.rel, line, a[i1 + k], b[j1 + k],
                                      tuple(self.reasons.get(line, ["rewritten"]))))
                continue
            reasons: list[str] = []
            for line in range(i1 + 1, i2 + 1):
                reasons += [r for r in self.reasons.get(line, []) if r not in reasons]
            for ln in b[j1:j2]:
                why = inserted.get(ln.strip())
                if why and why != "(same)" and why not in reasons:
                    reasons.append(f"added: {why}")
            out.append(Change(self.rel, max(i1 + (0 if op == "insert" else 1), 1), "\n".join(a[i1:i2]),
                              "\n".join(b[j1:j2]), tuple(reasons or ["rewritten"])))
        return out


class _Porter:
    def __init__(self, rel: str, text: str) -> None:
        self.rel = rel
        self.res = FileResult(rel, text, text, "none", "no TensorFlow import")
        self._routes: dict[str, str] = {}

    # -- helpers ---------------------------------------------------------------------------
    def problem(self, line: int, construct: str, reason: str, suggestion: str) -> None:
        p = Problem(self.rel, line, construct, reason, suggestion)
        if p not in self.res.problems:
            self.res.problems.append(p)

    def edit(self, edits: list[Edit]) -> None:
        self.res.text, done = apply(self.res.text, edits)
        for e in done:
            bucket = self.res.reasons.setdefault(e.line, [])
            if e.reason not in bucket:
                bucket.append(e.reason)

    def parse(self) -> tuple[ast.Module, Lines, list[tokenize.TokenInfo], list[int]]:
        tree = ast.parse(self.res.text)
        lines = Lines(self.res.text)
        toks = list(tokenize.generate_tokens(io.StringIO(self.res.text).readline))
        offs = [lines.offset(*t.start) for t in toks]
        return tree, lines, toks, offs

    @staticmethod
    def span(lines: Lines, node: ast.AST) -> tuple[int, int]:
        return (lines.byte_offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                lines.byte_offset(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def stmt_tokens(self, lines: Lines, toks: list, offs: list[int],
                    node: ast.AST) -> list[tuple[int, tokenize.TokenInfo]]:
        s, e = self.span(lines, node)
        return [(o, t) for o, t in zip(offs, toks) if s <= o < e and t.type in (tokenize.NAME, tokenize.OP)]

    def import_spans(self, lines: Lines, toks: list, offs: list[int], node: ast.Import | ast.ImportFrom
                     ) -> list[tuple[int, int, str]]:
        """(start, end, dotted name) of each module path in an import statement, in order."""
        seq = self.stmt_tokens(lines, toks, offs, node)
        out: list[tuple[int, int, str]] = []
        i = 1  # after `import` / `from`
        if isinstance(node, ast.ImportFrom):
            while i < len(seq) and seq[i][1].string in (".", "..."):
                i += 1
            if i < len(seq) and seq[i][1].string != "import":
                out.append(self._dotted(lines, seq, i))
            return out
        while i < len(seq):
            if seq[i][1].type == tokenize.NAME and seq[i][1].string not in ("as",):
                s, e, name, i = *self._dotted(lines, seq, i)[:3], self._skip_dotted(seq, i)
                out.append((s, e, name))
                if i < len(seq) and seq[i][1].string == "as":
                    i += 2
            i += 1
        return out

    @staticmethod
    def _skip_dotted(seq: list, i: int) -> int:
        i += 1
        while i + 1 < len(seq) and seq[i][1].string == "." and seq[i + 1][1].type == tokenize.NAME:
            i += 2
        return i

    def _dotted(self, lines: Lines, seq: list, i: int) -> tuple[int, int, str]:
        j = self._skip_dotted(seq, i)
        start = seq[i][0]
        last = seq[j - 1][1]
        end = lines.offset(*last.end)
        return start, end, ".".join(t.string for _, t in seq[i:j] if t.string != ".")

    # -- 1. tensorpack imports ---------------------------------------------------------------
    def tensorpack_imports(self) -> None:
        from trainbus.bus.registry import OUT_OF_SCOPE

        tree, lines, toks, offs = self.parse()
        edits: list[Edit] = []
        rename_uses = False
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                spans = self.import_spans(lines, toks, offs, node)
                for (s, e, name), alias in zip(spans, node.names):
                    if name == "tensorpack" or name.startswith("tensorpack."):
                        new = "trainbus" + name[len("tensorpack"):]
                        edits.append(Edit(s, e, new, node.lineno, "tensorpack import -> trainbus"))
                        rename_uses = rename_uses or alias.asname is None
                        self._out_of_scope(node.lineno, new, [], OUT_OF_SCOPE)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                    node.module == "tensorpack" or node.module.startswith("tensorpack.")):
                s, e, name = self.import_spans(lines, toks, offs, node)[0]
                new = "trainbus" + name[len("tensorpack"):]
                edits.append(Edit(s, e, new, node.lineno, "tensorpack import -> trainbus"))
                self._out_of_scope(node.lineno, new, [a.name for a in node.names], OUT_OF_SCOPE)
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str) and re.match(r"tensorpack(\.|$)", node.args[0].value):
                fn = node.func
                fname = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
                if fname in ("import_module", "__import__"):
                    s, e = self.span(lines, node.args[0])
                    lit = self.res.text[s:e]
                    edits.append(Edit(s, e, lit.replace("tensorpack", "trainbus", 1), node.lineno,
                                      "tensorpack module imported by name -> trainbus"))
        if rename_uses:
            for node in ast.walk(tree):
                if isinstance(node, ast.Name) and node.id == "tensorpack":
                    s, e = self.span(lines, node)
                    edits.append(Edit(s, e, "trainbus", node.lineno,
                                      "the module bound by `import tensorpack...` is trainbus"))
        self.edit(edits)

    def _out_of_scope(self, line: int, module: str, names: list[str], table: dict[str, str]) -> None:
        if module in table:
            self.problem(line, module.replace("trainbus", "tensorpack", 1),
                         f"trainbus does not provide it: {table[module]}",
                         "remove the import and the code using it, or keep that part on tensorpack")
        for n in names:
            if n in table:
                self.problem(line, n, f"trainbus does not provide it: {table[n]}",
                             "remove the import and the code using it")

    # -- analysis ------------------------------------------------------------------------------
    def bindings(self, tree: ast.Module) -> list[Binding]:
        out: list[Binding] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "tensorflow":
                        out.append(Binding(a.asname or "tensorflow", "tf2", node, a))
                    elif a.name == "tensorflow.compat.v1" and a.asname:
                        out.append(Binding(a.asname, "v1", node, a))
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                for a in node.names:
                    if (node.module in _TFV1_HOMES and a.name == "tfv1") or (
                            node.module == "tensorflow.compat" and a.name == "v1"):
                        out.append(Binding(a.asname or a.name, "v1", node, a))
        return out

    @staticmethod
    def chains(tree: ast.Module, names: set[str]) -> list[tuple[ast.Attribute, str, list[str], ast.AST | None]]:
        """Outermost attribute chains ``name.a.b...`` on a bound name: (node, root, parts, parent)."""
        parent: dict[int, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parent[id(child)] = node
        out = []
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            p = parent.get(id(node))
            if isinstance(p, ast.Attribute) and p.value is node:
                continue
            parts: list[str] = []
            cur: ast.AST = node
            while isinstance(cur, ast.Attribute):
                parts.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name) and cur.id in names:
                out.append((node, cur.id, parts[::-1], p))
        return out

    # -- 2. the TensorFlow route ---------------------------------------------------------------
    def choose_route(self) -> dict[str, str]:
        """The route for each TensorFlow binding; sets the file's route and reason."""
        from trainbus.port import _tfup

        tree, *_ = self.parse()
        binds = self.bindings(tree)
        if not binds:
            return {}
        self.res.imports_tf_or_trainbus = True
        routes: dict[str, str] = {}
        v1_names = sorted({b.name for b in binds if b.kind == "v1"})
        whys: list[str] = []
        if v1_names:
            for n in v1_names:
                routes[n] = "v1"
            whys.append(f"`{'`, `'.join(v1_names)}` is already tf.compat.v1: TF 1 names work as written")
        for b in binds:
            if b.kind != "tf2" or b.name in routes:
                continue
            guarded = self.guarded(tree)
            chains = [c for c in self.chains(tree, {b.name}) if c[2][0] != "contrib" and id(c[0]) not in guarded]
            missing = sorted({".".join(c[2][:3]) for c in chains if not _tfup.resolve(c[2], v1=False)})
            # tf.layers / tf.keras are there in tf.compat.v1 once Keras 2 is chosen (see keras())
            v2only = sorted({".".join(c[2][:3]) for c in chains
                             if c[2][0] not in ("layers", "keras", "estimator") and not _tfup.resolve(c[2], v1=True)})
            shape_value = bool(_SHAPE_VALUE.search(self.res.text))
            shown = ", ".join(f"{b.name}.{m}" for m in missing[:4]) + (", ..." if len(missing) > 4 else "")
            if not missing and not shape_value:
                routes[b.name] = "keep"
                whys.append(f"every `{b.name}.` name it uses exists in TensorFlow 2.21: nothing to change")
                continue
            if b.name != "tf":
                routes[b.name] = "compat"
                whys.append(f"compat: TensorFlow is bound to `{b.name}`, which tf_upgrade_v2 does not follow; "
                            f"TF 1 names used: {shown}" + (f" (check the TF 2-only {', '.join(v2only[:3])})"
                                                           if v2only else ""))
                continue
            new, logs = _tfup.upgrade(self.res.text, contrib=False)
            up_lines = sum(1 for x, y in zip(self.res.text.splitlines(), new.splitlines()) if x != y)
            errors = [lg for lg in logs if lg.severity == "ERROR"]
            if v2only:
                routes[b.name] = "upgrade"
                whys.append(f"tf_upgrade_v2: it also uses TF 2-only names ({', '.join(v2only[:3])}) that "
                            f"tf.compat.v1 lacks, which the compat route would break; {up_lines} line(s) converted")
                for lg in errors:
                    self.problem(lg.line, "TF 1 code", f"tf_upgrade_v2: {lg.message[:200]}",
                                 "edit it by hand (see TensorFlow's migration guide)")
            elif shape_value:
                routes[b.name] = "compat"
                whys.append("compat: it reads TF 1 shapes (`shape[i].value`), which only TF 1 behaviour "
                            "(`tf.disable_v2_behavior()`) keeps working")
            elif errors:
                routes[b.name] = "compat"
                whys.append(f"compat: tf_upgrade_v2 cannot convert line {errors[0].line} ({errors[0].message[:90]}); "
                            "tf.compat.v1 still has it")
            elif up_lines <= 1 and not self.still_missing(new, guarded_from=b.name):
                routes[b.name] = "upgrade"
                whys.append(f"tf_upgrade_v2: {up_lines} line changed, fewer than the compat route's 2, and no "
                            "process-wide switch to TF 1 behaviour")
            else:
                routes[b.name] = "compat"
                whys.append(f"compat: `import tensorflow.compat.v1 as tf` + `tf.disable_v2_behavior()` changes 2 lines "
                            f"where tf_upgrade_v2 changes {up_lines} (TF 1 names used: {shown}), and keeps TF 1 "
                            "behaviour (graph mode, v1 shapes and variables) the script was written for")
            if routes[b.name] == "upgrade":
                reason_at: dict[int, str] = {}
                for lg in logs:
                    if lg.severity == "INFO" and lg.line not in reason_at:
                        reason_at[lg.line] = f"tf_upgrade_v2: {lg.message}"
                self.edit(token_edits(self.res.text, new, reason_at, "tf_upgrade_v2"))
        kinds = set(routes.values())
        main = next((k for k in ("upgrade", "compat", "keep", "v1") if k in kinds), "none")
        self.res.route, self.res.why = main, "; ".join(whys)
        return routes

    def guarded(self, tree: ast.Module) -> set[int]:
        """ids of the nodes inside a ``try`` whose handler catches AttributeError / ImportError (a
        fallback for another TensorFlow version: what is missing there is expected)."""
        out: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Try):
                caught = set()
                for h in node.handlers:
                    if h.type is None:
                        caught.add("*")
                    for t in (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]) if h.type else []:
                        caught.add(getattr(t, "id", ""))
                if caught & {"*", "AttributeError", "ImportError", "Exception", "ModuleNotFoundError"}:
                    for stmt in node.body:
                        out.update(id(n) for n in ast.walk(stmt))
        return out

    def still_missing(self, text: str, guarded_from: str) -> bool:
        from trainbus.port import _tfup

        tree = ast.parse(text)
        guarded = self.guarded(tree)
        return any(c[2][0] != "contrib" and id(c[0]) not in guarded and not _tfup.resolve(c[2], v1=False)
                   and not (c[2][:2] == ["compat", "v1"] and _tfup.resolve(c[2][2:], v1=True))
                   for c in self.chains(tree, {guarded_from}))

    # -- 3. tf.contrib -------------------------------------------------------------------------
    def contrib(self, routes: dict[str, str]) -> None:
        from trainbus.port import _tfup

        self._routes = routes

        tree, lines, toks, offs = self.parse()
        edits: list[Edit] = []
        need_slim = False

        def v1(root: str) -> str:
            return f"{root}." if routes.get(root) in ("v1", "compat") else f"{root}.compat.v1."

        def rep(node: ast.AST, new: str, why: str) -> None:
            s, e = self.span(lines, node)
            edits.append(Edit(s, e, new, node.lineno, why))  # type: ignore[attr-defined]

        tf_known = _tfup.contrib_names() if any(c[2][0] == "contrib" for c in self.chains(tree, set(routes))) else set()
        for node, root, parts, parent in self.chains(tree, set(routes)):
            if parts[0] != "contrib" or len(parts) < 2:
                if parts == ["contrib"]:
                    self.problem(node.lineno, f"{root}.contrib", "tf.contrib is gone in TensorFlow 2",
                                 "name the piece used (tf.contrib.X) so that it can be mapped")
                continue
            sub, rest = parts[1], parts[2:]
            full = "tf.contrib." + ".".join(parts[1:])
            if sub == "slim":
                rep(node, ".".join(["tf_slim", *rest]), "tf.contrib.slim -> tf_slim")
                need_slim = True
            elif sub == "rnn" and not rest:
                self.rnn_alias(tree, lines, node, root, parent, v1(root), edits)
            elif sub == "rnn":
                x = rest[0]
                if full in tf_known and root == "tf":
                    continue
                if x in _tables.RNN_CELL:
                    rep(node, f"{v1(root)}nn.rnn_cell.{'.'.join(rest)}", f"tf.contrib.rnn.{x} -> tf.nn.rnn_cell.{x}")
                elif x in _tables.RNN_REPLACED:
                    new, note = _tables.RNN_REPLACED[x]
                    rep(node, f"{v1(root)}nn.rnn_cell.{new}", note)
                else:
                    self.problem(node.lineno, full, "tf.contrib.rnn is gone and this member has no maintained home",
                                 "use a cell of tf.compat.v1.nn.rnn_cell (LSTMCell, GRUCell, ...)")
            elif sub in ("layers", "framework") and rest and full not in tf_known:
                x = rest[0]
                if sub == "framework" and x in _tables.FRAMEWORK_CORE:
                    rep(node, v1(root) + _tables.FRAMEWORK_CORE[x], f"tf.contrib.framework.{x} -> core TensorFlow")
                elif x in _tables.TF_SLIM:
                    rep(node, ".".join(["tf_slim", *rest]), f"tf.contrib.{sub}.{x} -> tf_slim.{x}")
                    need_slim = True
                else:
                    self.problem(node.lineno, full, f"tf.contrib.{sub} is gone and {x} is not in tf_slim",
                                 "replace it by its tf.compat.v1 / tf.nn equivalent")
            elif full in tf_known or any(k.startswith(full + ".") for k in tf_known):
                if root != "tf":
                    self.problem(node.lineno, f"{root}.contrib.{'.'.join(parts[1:])}",
                                 f"TensorFlow's upgrader converts {full} only when TensorFlow is named `tf`",
                                 f"bind TensorFlow to `tf` and port again, or write what {full} became by hand")
                continue
            else:
                self.problem(node.lineno, full, f"tf.contrib.{sub} is gone in TensorFlow 2 and has no maintained home "
                             "that a rule maps to", _tables.CONTRIB_NO_HOME.get(
                                 sub, "replace it by core TensorFlow (tf.compat.v1) code or keep a copy of it"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.contrib_import(lines, toks, offs, node, edits)  # binds its own names: no `import tf_slim`
        self.edit(edits)
        # TensorFlow's own tf.contrib rules, for what is left (only on the name `tf`)
        tree = ast.parse(self.res.text)
        if "tf" in routes and any(c[2][0] == "contrib" for c in self.chains(tree, {"tf"})):
            new, logs = _tfup.upgrade(self.res.text, contrib=True)
            reason_at: dict[int, str] = {}
            for lg in logs:
                if lg.severity == "INFO" and lg.line not in reason_at:
                    reason_at[lg.line] = f"tf_upgrade_v2: {lg.message}"
                elif lg.severity == "ERROR" and not any(p.line == lg.line for p in self.res.problems):
                    self.problem(lg.line, "tf.contrib", f"TensorFlow's upgrader: {lg.message[:200]}",
                                 "replace it by core TensorFlow (tf.compat.v1) code or a maintained package")
            edits = token_edits(self.res.text, new, reason_at, "tf_upgrade_v2 (tf.contrib)")
            if routes["tf"] in ("v1", "compat"):
                edits = [Edit(e.start, e.end, e.new.replace("tf.compat.v1.", "tf."), e.line, e.reason) for e in edits]
            self.edit(edits)
        if need_slim or "tf_slim" in self.res.text:
            self.res.packages["tf_slim"] = "the home of tf.contrib.slim and of tf.contrib.layers' layers"
        if need_slim and not re.search(r"^\s*import tf_slim\s*(#.*)?$", self.res.text, re.M):
            t = ast.parse(self.res.text)
            where = next((b.node.end_lineno for b in self.bindings(t)  # type: ignore[union-attr]
                          if b.node is not None), None)
            indent = ""
            if where is None:
                where = self.res.first_stmt_line - 1
            else:
                node = next(b.node for b in self.bindings(t) if b.node is not None)
                indent = " " * node.col_offset  # type: ignore[union-attr]
            self.res.after.setdefault(where, []).append((f"{indent}import tf_slim",
                                                         "imports tf_slim, the home of the tf.contrib pieces used"))

    def _any_v1_prefix(self) -> str | None:
        """How this file can write a tf.compat.v1 name (after its route), or None."""
        for name, route in self._routes.items():
            return f"{name}." if route in ("v1", "compat") else f"{name}.compat.v1."
        return None

    def rnn_alias(self, tree: ast.Module, lines: Lines, node: ast.AST, root: str, parent: ast.AST | None,
                  v1: str, edits: list[Edit]) -> None:
        if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1
                and isinstance(parent.targets[0], ast.Name)):
            self.problem(node.lineno, f"{root}.contrib.rnn",  # type: ignore[attr-defined]
                         "the tf.contrib.rnn module is used other than through `name = tf.contrib.rnn`",
                         "name its members: tf.compat.v1.nn.rnn_cell.X / tf.compat.v1.nn.static_rnn")
            return
        alias = parent.targets[0].id
        s, e = self.span(lines, node)
        edits.append(Edit(s, e, f"{v1}nn.rnn_cell", node.lineno,  # type: ignore[attr-defined]
                          "tf.contrib.rnn -> tf.nn.rnn_cell (TF 1's cells live on there)"))
        self.rnn_uses(tree, lines, alias, v1, edits)

    def rnn_uses(self, tree: ast.Module, lines: Lines, alias: str, v1: str | None, edits: list[Edit]) -> None:
        """Uses ``alias.X`` of a name now bound to ``tf.compat.v1.nn.rnn_cell`` (was ``tf.contrib.rnn``)."""
        for use, _, parts, _ in self.chains(tree, {alias}):
            x = parts[0]
            us, ue = self.span(lines, use)
            attr_end = us + len(alias) + 1 + len(x)
            if x in _tables.RNN_CELL:
                continue
            if x in _tables.RNN_NN and v1 is not None:
                edits.append(Edit(us, attr_end, f"{v1}nn.{x}", use.lineno, f"tf.contrib.rnn.{x} -> tf.nn.{x}"))
            elif x in _tables.RNN_REPLACED:
                new, note = _tables.RNN_REPLACED[x]
                edits.append(Edit(us, attr_end, f"{alias}.{new}", use.lineno, note))
            elif x in _tables.RNN_NN:
                self.problem(use.lineno, f"{alias}.{x} (tf.contrib.rnn.{x})", "it moved to tf.compat.v1.nn and this "
                             "file has no TensorFlow name to write it with", f"import tensorflow.compat.v1 as tf and "
                             f"write tf.nn.{x}")
            else:
                self.problem(use.lineno, f"{alias}.{x} (tf.contrib.rnn.{x})",
                             "tf.contrib.rnn is gone and this member has no maintained home",
                             "use a cell of tf.compat.v1.nn.rnn_cell (LSTMCell, GRUCell, ...)")

    def contrib_import(self, lines: Lines, toks: list, offs: list[int], node: ast.Import | ast.ImportFrom,
                       edits: list[Edit]) -> bool:
        spans = self.import_spans(lines, toks, offs, node)
        slim = False
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level or not (mod == "tensorflow.contrib" or mod.startswith("tensorflow.contrib.")):
                return False
            if mod.startswith("tensorflow.contrib.slim"):
                s, e, _ = spans[0]
                edits.append(Edit(s, e, "tf_slim" + mod[len("tensorflow.contrib.slim"):], node.lineno,
                                  "tensorflow.contrib.slim -> tf_slim"))
                return True
            if mod == "tensorflow.contrib" and [a.name for a in node.names] == ["slim"]:
                s, e = self.span(lines, node)
                edits.append(Edit(s, e, f"import tf_slim as {node.names[0].asname or 'slim'}", node.lineno,
                                  "tensorflow.contrib.slim -> tf_slim"))
                return True
            names = [a.name for a in node.names]
            if mod in ("tensorflow.contrib.layers", "tensorflow.contrib.framework") and \
                    all(n in _tables.TF_SLIM for n in names):
                s, e, _ = spans[0]
                edits.append(Edit(s, e, "tf_slim", node.lineno, f"{mod} -> tf_slim"))
                return False
            if mod == "tensorflow.contrib.rnn" and all(n in _tables.RNN_CELL for n in names):
                s, e, _ = spans[0]
                edits.append(Edit(s, e, "tensorflow.compat.v1.nn.rnn_cell", node.lineno,
                                  "tensorflow.contrib.rnn -> tf.nn.rnn_cell (TF 1's cells live on there)"))
                return False
            if mod == "tensorflow.contrib.rnn" and all(n in _tables.RNN_NN for n in names):
                s, e, _ = spans[0]
                edits.append(Edit(s, e, "tensorflow.compat.v1.nn", node.lineno, "tensorflow.contrib.rnn -> tf.nn"))
                return False
            if mod == "tensorflow.contrib" and len(names) == 1 and names[0] in ("layers", "framework"):
                s, e = self.span(lines, node)
                edits.append(Edit(s, e, f"import tf_slim as {node.names[0].asname or names[0]}", node.lineno,
                                  f"tensorflow.contrib.{names[0]} -> tf_slim"))
                return False
            if mod == "tensorflow.contrib" and names == ["rnn"]:
                alias = node.names[0].asname or "rnn"
                s, e = self.span(lines, node)
                edits.append(Edit(s, e, f"from tensorflow.compat.v1.nn import rnn_cell as {alias}", node.lineno,
                                  "tensorflow.contrib.rnn -> tf.nn.rnn_cell (TF 1's cells live on there)"))
                self.rnn_uses(ast.parse(self.res.text), lines, alias, self._any_v1_prefix(), edits)
                return False
            sub = (mod.split(".") + [node.names[0].name])[2]
            self.problem(node.lineno, f"from {mod} import ...", f"tensorflow.contrib.{sub} is gone in TensorFlow 2",
                         _tables.CONTRIB_NO_HOME.get(sub, "import its maintained home (tf_slim, "
                                                          "tf.compat.v1.nn.rnn_cell, ...) instead"))
            return False
        for (s, e, name), a in zip(spans, node.names):
            if not name.startswith("tensorflow.contrib"):
                continue
            if name == "tensorflow.contrib.rnn" and a.asname:
                edits.append(Edit(s, e, "tensorflow.compat.v1.nn.rnn_cell", node.lineno,
                                  "tensorflow.contrib.rnn -> tf.nn.rnn_cell (TF 1's cells live on there)"))
                self.rnn_uses(ast.parse(self.res.text), lines, a.asname, self._any_v1_prefix(), edits)
                continue
            if name in ("tensorflow.contrib.layers", "tensorflow.contrib.framework") and a.asname:
                edits.append(Edit(s, e, "tf_slim", node.lineno, f"{name} -> tf_slim"))
                slim = True
                continue
            if name.startswith("tensorflow.contrib.slim") and a.asname:
                edits.append(Edit(s, e, "tf_slim" + name[len("tensorflow.contrib.slim"):], node.lineno,
                                  "tensorflow.contrib.slim -> tf_slim"))
                slim = True
            else:
                sub = (name.split(".") + ["?"])[2]
                self.problem(node.lineno, f"import {name}", f"tensorflow.contrib.{sub} is gone in TensorFlow 2",
                             _tables.CONTRIB_NO_HOME.get(sub, "import its maintained home (tf_slim, "
                                                              "tf.compat.v1.nn.rnn_cell, ...) instead"))
        return slim

    # -- 4. compat route ---------------------------------------------------------------------
    def compat(self, routes: dict[str, str]) -> None:
        tree, lines, toks, offs = self.parse()
        edits: list[Edit] = []
        disabled: set[str] = set()
        for b in self.bindings(tree):
            if b.kind != "tf2" or routes.get(b.name) != "compat":
                continue
            node = b.node
            assert isinstance(node, ast.Import)
            for (s, e, name), a in zip(self.import_spans(lines, toks, offs, node), node.names):
                if a is b.alias:
                    new = "tensorflow.compat.v1" + ("" if a.asname else " as tensorflow")
                    edits.append(Edit(s, e, new, node.lineno, "compat route: TensorFlow's TF 1 API "
                                      "(tf.compat.v1) under the same name"))
            if b.name not in disabled:
                disabled.add(b.name)
                self.res.after.setdefault(node.end_lineno or node.lineno, []).insert(0, (
                    " " * node.col_offset + f"{b.name}.disable_v2_behavior()",
                    "compat route: TF 1 behaviour (graph mode, v1 variables, shapes and control flow)"))
        self.edit(edits)

    # -- 5. keras ----------------------------------------------------------------------------
    def keras(self) -> None:
        tree, lines, toks, offs = self.parse()
        edits: list[Edit] = []
        names = {b.name for b in self.bindings(tree)}
        for node, root, parts, _ in self.chains(tree, names):
            dotted = ".".join(parts)
            if any(dotted == p or dotted.startswith(p + ".") for p in _tables.KERAS2_PREFIXES):
                self.res.keras2.append((node.lineno, f"{root}.{dotted}"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for (s, e, name), a in zip(self.import_spans(lines, toks, offs, node), node.names):
                    if name.startswith(("tensorflow.keras", "tensorflow.compat.v1.nn.rnn_cell")):
                        self.res.keras2.append((node.lineno, name))
                    elif name == "keras" or name.startswith("keras."):
                        bind = "" if a.asname or "." in name else " as keras"
                        edits.append(Edit(s, e, "tf_keras" + name[5:] + bind,
                                          node.lineno, "Keras 2 is the tf_keras package on TensorFlow 2.21"))
                        self.res.keras2.append((node.lineno, name))
                    elif name.startswith(("tf_keras", "trainbus.contrib.keras")):
                        self.res.keras2.append((node.lineno, name))
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mod = node.module
                if (mod == "tensorflow" and any(a.name == "keras" for a in node.names)) or \
                        mod.startswith(("tensorflow.keras", "tf_keras", "trainbus.contrib.keras",
                                        "tensorflow.compat.v1.nn.rnn_cell")) or \
                        (mod == "tensorflow.compat.v1.nn" and any(a.name == "rnn_cell" for a in node.names)) or \
                        (mod == "trainbus.contrib" and any(a.name == "keras" for a in node.names)):
                    self.res.keras2.append((node.lineno, f"from {mod} import ..."))
                elif mod == "keras" or mod.startswith("keras."):
                    s, e, _ = self.import_spans(lines, toks, offs, node)[0]
                    edits.append(Edit(s, e, "tf_keras" + mod[5:], node.lineno,
                                      "Keras 2 is the tf_keras package on TensorFlow 2.21"))
                    self.res.keras2.append((node.lineno, mod))
        self.edit(edits)
        if self.res.keras2:
            self.res.packages["tf_keras"] = "Keras 2, which tf.layers / tf.keras need in graph mode"

    def info(self) -> None:
        tree = ast.parse(self.res.text)
        body = tree.body
        i = 0
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            i = 1
        while i < len(body) and isinstance(body[i], ast.ImportFrom) and body[i].module == "__future__":
            i += 1
        self.res.first_stmt_line = body[i].lineno if i < len(body) else len(self.res.text.splitlines()) + 1
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "__name__" and \
                    any(isinstance(c, ast.Constant) and c.value == "__main__" for c in node.comparators):
                self.res.is_script = True
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                self.res.local_imports.update(m.split(".")[0] for m in mods if m)
                if isinstance(node, ast.ImportFrom) and node.level and not node.module:
                    self.res.local_imports.update(a.name for a in node.names)
                if any(m.split(".")[0] in ("tensorflow", "trainbus") for m in mods):
                    self.res.imports_tf_or_trainbus = True


_IMAGE = ("trainbus-dataflow[image]", "OpenCV, for image augmentation, image files and the image datasets")
_MAT = ("trainbus-dataflow[mat]", "scipy, for the datasets stored as MATLAB .mat files")
#: names whose use needs an extra of trainbus-dataflow -> the extras (OpenCV and scipy are not
#: requirements: Keras imports them during every ``import tensorflow`` once they are installed)
_DATAFLOW_EXTRAS: dict[str, tuple[tuple[str, str], ...]] = {
    **dict.fromkeys(("imgaug", "ImageFromFile", "AugmentImageComponent", "AugmentImageComponents",
                     "AugmentImageCoordinates", "ILSVRC12", "Places365Standard", "cv2"), (_IMAGE,)),
    "SVHNDigit": (_MAT,), "Caltech101Silhouettes": (_MAT,), "BSDS500": (_IMAGE, _MAT),
}


def _dataflow_extras(res: FileResult) -> None:
    """Add to ``res.packages`` the trainbus-dataflow extras the file uses, each with the name and
    line (of the original file) that first needs it."""
    first: dict[str, int] = {}
    for node in ast.walk(ast.parse(res.original)):
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, ast.Import):
            names = [part for a in node.names for part in a.name.split(".")]
        elif isinstance(node, ast.ImportFrom):
            names = [*(node.module or "").split("."), *(a.name for a in node.names)]
        else:
            continue
        for name in names:
            if name in _DATAFLOW_EXTRAS:
                first[name] = min(first.get(name, node.lineno), node.lineno)
    for name, line in sorted(first.items(), key=lambda kv: (kv[1], kv[0])):
        for extra, why in _DATAFLOW_EXTRAS[name]:
            res.packages.setdefault(extra, f"{why} (first needed by `{name}` at {res.rel}:{line})")


def port_source(rel: str, text: str) -> FileResult:
    """Port the text of one Python file (``rel`` names it in the report)."""
    p = _Porter(rel, text)
    try:
        ast.parse(text)
    except SyntaxError as e:
        p.res.route, p.res.why = "unparsed", f"not Python 3 ({e.msg}, line {e.lineno}): left unchanged"
        p.problem(e.lineno or 1, "the whole file", f"it does not parse as Python 3: {e.msg}",
                  "convert it to Python 3 (e.g. with `2to3 -w`), then port again")
        return p.res
    p.tensorpack_imports()
    p.info()
    routes = p.choose_route()
    if routes:
        p.contrib(routes)
        p.compat(routes)
    p.keras()
    p.info()
    _dataflow_extras(p.res)
    return p.res
