"""The import edges between perfguard's packages, and every way the tree could break its layering.

    python scripts/import_edges.py [--all]

A package is a first-level name under perfguard/ (`sim`, `predict`, or a module such as
`config`). Every one of them has its place in ORDER below; a new one must be given a place (an
unlisted name fails, so the order cannot silently leave modules out). Imports anywhere in a file
count, including those inside functions: a lazy import is still a dependency.

The script fails (exit status 1) on any of:
- an edge against the order: a package importing one at its own level or above it (a tuple in
  ORDER holds packages side by side: neither may import the other);
- a cycle between modules (files), lazy imports included;
- a private name (`_x`) of one module used in another: imported, read off the module
  (`module._x`), or read off an object (`obj._x`, obj not `self` or `cls`) where `_x` is a
  private member of a class in another module and no class of the reading module has one;
- an import inside a function that is neither of a heavy optional dependency (HEAVY, with the
  reason) nor explained by a comment on its line or on the line above its group of imports.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "perfguard"

# Bottom to top: each package imports only those before it. A tuple holds packages side by side.
ORDER = (
    # shared modules: errors and atomic writes, records that carry their digest, processes and signals, the registry type, the
    # job stage clock, fingerprints, user code imports, FLOP formulas, target profiles, executors,
    # the typed reads a config section makes of its table (sections are owned by the layers above)
    "errors",
    "signals",
    "process",
    "atomic",
    "jsonfile",
    "sealed",
    "registry",
    "timings",
    "fingerprints",
    "user_code",
    "flopcount",
    "targets",
    "machines",
    "executors",
    "sections",
    # measuring: lower a TVM module to an object and link it; run a binary in a simulator (or
    # llvm-mca on its blocks). Neither knows the config.
    "compile",
    "sim",
    # the config (perfguard.toml) composes the sections of the layers below it (sim/settings.py's
    # Simulation, judging.py's Judging and Judgement) with its own, so it sits above them; the kernels
    # it configures (families, user kernels, whole models) read it
    "judging",
    "config",
    "kernels",
    # one job (job/: build -> simulate -> check outputs, its record, the output check, the same
    # binary timed natively); timing models
    "job",
    "predict",
    # the guard: committed baselines (working tree, git revision, lock); the typed report
    # document (schema, upgrades, verdict names, model kernel labels); beside each other, judging
    # (judge.decide: the one verdict, limits applied, model totals, attribution, analysis, history,
    # merging reports) and the renderers (report/ renders a document and knows nothing else of the
    # guard); the runs (check, compare, bisect) that judge and build a report; autotuning
    "baselines",
    "document",
    ("judge", "report"),
    "runs",
    "tune",
    # the shells: the command line (shells/cli.py, commands/), the pytest plugin, the GitHub Action
    "shells",
)

# Edges the order allows but the layers deny: the renderers read a report document and nothing
# else of the guard (beyond the shared modules), and a run hands its outputs to the shells to word.
DENIED = {
    ("report", name) for name in ("compile", "sim", "judging", "config", "kernels", "job", "predict", "baselines")
} | {("runs", "report"), ("tune", "report")}
LEVEL = {name: level for level, layer in enumerate(ORDER) for name in ((layer,) if isinstance(layer, str) else layer)}

# Third-party packages imported inside functions, and why (nothing else may be, unexplained).
HEAVY = {
    "tvm": "TVM takes seconds to import; only building or tuning a kernel needs it",
    "tvm_ffi": "part of TVM (above)",
    "sklearn": "scikit-learn takes seconds to import; only calibrated predictors need it",
    "scipy": "only a few statistics and the tuner's search need it",
    "xgboost": "only the XGBoost predictor needs it",
    "dask": "optional: only `--executor dask`",
    "distributed": "optional: only `--executor dask`",
    "onnx": "optional: only [[model]]s read from ONNX files",
    "git": "GitPython: only reading baselines from git history needs it",
}
_IMPORT_LINE = re.compile(r"\s*(from \S+ import|import )")


def package_of(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 0 else ""


def module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST, module: str, is_package: bool):
    """(imported module names, node, inside a function) for every import statement."""
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.append(([a.name for a in child.names], child, in_function))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:  # relative: from the module's package
                    package = module.split(".") if is_package else module.split(".")[:-1]
                    base = ".".join(package[: len(package) - child.level + 1] + ([base] if base else []))
                found.append(([base] + [f"{base}.{a.name}" for a in child.names], child, in_function))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


class Tree:
    def __init__(self, root: Path):
        self.root = root
        self.files = {module_of(p): p for p in sorted(root.rglob("*.py"))}
        self.edges: Counter = Counter()  # (package, package) -> imports
        self.module_edges: dict[str, set[str]] = {m: set() for m in self.files}
        self.unexplained: list[str] = []
        self.private: list[str] = []
        self.members: dict[str, set[str]] = {}  # module -> private members of its classes
        self.reads: dict[str, list[tuple[int, str]]] = {}  # module -> (line, `_x` read off an object)
        self.classes: dict[str, set[str]] = {}  # module -> names of its classes
        self.bases: dict[str, set[str]] = {}  # module -> names its classes derive from
        for module, path in self.files.items():
            self._read(module, path)
        self._private_members()

    def _read(self, module: str, path: Path) -> None:
        text = path.read_text()
        lines = text.splitlines()
        tree = ast.parse(text, str(path))
        source = package_of(path)
        aliases: dict[str, str] = {}
        for names, node, in_function in _imports(tree, module, path.name == "__init__.py"):
            ours = [n for n in names if n in self.files]
            for target in dict.fromkeys(ours):
                if target != module:
                    self.module_edges[module].add(target)
            targets = {n.split(".")[1] for n in names if n.startswith("perfguard.") and n in self.files}
            for target in targets:
                if target != source and source != "__init__":
                    self.edges[(source, target)] += 1
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("perfguard"):
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        self.private.append(f"{module} imports {node.module}.{a.name}")
            if isinstance(node, ast.Import):
                aliases.update({(a.asname or a.name): a.name for a in node.names if a.name.startswith("perfguard")})
            elif node.module and node.module.startswith("perfguard"):
                aliases.update({(a.asname or a.name): f"{node.module}.{a.name}" for a in node.names})
            if in_function and names[0].split(".")[0] not in HEAVY and not _explained(lines, node.lineno):
                self.unexplained.append(f"{module}:{node.lineno} imports {names[0]} inside a function")
        self._scan_members(module, tree)
        for node in ast.walk(tree):  # perfguard_module._private
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and aliases[node.value.id] in self.files
            ):
                self.private.append(f"{module} uses {aliases[node.value.id]}.{node.attr}")

    def _scan_members(self, module: str, tree: ast.AST) -> None:
        members, reads = set(), []
        self.classes[module], self.bases[module] = set(), set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                self.classes[module].add(node.name)
                self.bases[module].update(
                    b.id if isinstance(b, ast.Name) else b.attr
                    for b in node.bases
                    if isinstance(b, (ast.Name, ast.Attribute))
                )
                for item in ast.walk(node):
                    name = None
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item is not node:
                        name = item.name
                    elif isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Store):
                        name = item.attr
                    elif isinstance(item, ast.Name) and isinstance(item.ctx, ast.Store):
                        name = item.id
                    if name and name.startswith("_") and not name.startswith("__"):
                        members.add(name)
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Load)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                reads.append((node.lineno, node.attr))
        self.members[module], self.reads[module] = members, reads

    def _private_members(self) -> None:
        owners: dict[str, set[str]] = {}
        for module, names in self.members.items():
            for name in names:
                owners.setdefault(name, set()).add(module)
        for module, reads in self.reads.items():
            for line, name in reads:
                others = owners.get(name, set()) - {module}
                # a subclass may use what its base class keeps for its subclasses
                others = {o for o in others if not self.classes[o] & self.bases[module]}
                if others and name not in self.members[module]:
                    self.private.append(f"{module}:{line} reads ._{name[1:]} of {', '.join(sorted(others))}")

    def cycles(self) -> list[list[str]]:
        """Strongly connected groups of more than one module (Tarjan)."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        found = []

        def visit(v: str) -> None:
            index[v] = low[v] = len(index)
            stack.append(v)
            for w in sorted(self.module_edges[v]):
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in stack:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    found.append(sorted(group))

        sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(self.files) + 100))
        for v in sorted(self.module_edges):
            if v not in index:
                visit(v)
        return sorted(found)

    def packages(self) -> set[str]:
        return {package_of(p) for p in self.files.values()} - {"__init__"}


def _explained(lines: list[str], lineno: int) -> bool:
    """A comment on the import's line, on another line of its group of imports, or on the line above the group."""
    first = lineno - 1
    while first > 0 and _IMPORT_LINE.match(lines[first - 1]):
        first -= 1
    last = lineno - 1
    while last + 1 < len(lines) and _IMPORT_LINE.match(lines[last + 1]):
        last += 1
    return any("#" in line for line in lines[first : last + 1]) or (
        first > 0 and lines[first - 1].strip().startswith("#")
    )


def order_text() -> str:
    return " -> ".join(layer if isinstance(layer, str) else " | ".join(layer) for layer in ORDER)


def main(argv: list[str]) -> int:
    tree = Tree(ROOT)
    found = tree.edges
    unlisted = sorted(tree.packages() - set(LEVEL))
    upward = {(a, b): n for (a, b), n in found.items() if a in LEVEL and b in LEVEL and LEVEL[b] >= LEVEL[a]}
    cycles = tree.cycles()
    shown = found if "--all" in argv else {e: n for e, n in found.items() if e in upward or not _shared(e[1])}
    print(
        f"{len(found)} edges between perfguard packages "
        f"({'all' if '--all' in argv else 'without those into the shared modules'}):"
    )
    for (a, b), n in sorted(shown.items()):
        print(f"  {a} -> {b} ({n} import{'s' if n != 1 else ''})")
    print(f"{len(tree.files)} modules in {len(tree.packages())} packages; order: {order_text()}")
    problems = [
        ("packages not in the order", unlisted),
        ("edges against the order", [f"{a} -> {b} ({n})" for (a, b), n in sorted(upward.items())]),
        ("edges the layers deny", [f"{a} -> {b} ({n})" for (a, b), n in sorted(found.items()) if (a, b) in DENIED]),
        ("cycles between modules", [" -> ".join(c) for c in cycles]),
        ("private names used outside their module", sorted(tree.private)),
        ("imports inside functions without a reason", tree.unexplained),
    ]
    for title, items in problems:
        print(f"{title}: {len(items)}")
        for item in items:
            print(f"  {item}")
    return 1 if any(items for _, items in problems) else 0


def _shared(package: str) -> bool:
    return package in LEVEL and LEVEL[package] < LEVEL.get("compile", 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
