"""List the import edges between perfguard's packages, and the ones that run against the data flow.

    python scripts/import_edges.py [--all]

A package is a first-level name under perfguard/ (`sim`, `predict`, `guard`, or a module such as
`config`). Imports anywhere in a file count, including the lazy ones inside functions: a lazy
import is still a dependency. The data flow is kernels -> build -> sim -> predict -> guard ->
report; an edge from a layer to a later one in that order runs upward and is listed under
"against the data flow". Packages outside the order (shared modules, shells) are listed with
their edges but not judged. Exit status 1 when an upward edge exists, so CI can hold the line.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "perfguard"
FLOW = ("kernels", "build", "sim", "predict", "guard", "report")


def package_of(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 0 else ""


def imported_packages(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
            if node.module == "perfguard":  # `from perfguard import flopcount`
                names += [f"perfguard.{a.name}" for a in node.names]
    packages = [n.split(".")[1] for n in names if n.startswith("perfguard.")]
    return [p for p in packages if (ROOT / p).is_dir() or (ROOT / f"{p}.py").is_file()]  # not __version__


def edges() -> Counter:
    found: Counter = Counter()
    for path in sorted(ROOT.rglob("*.py")):
        source = package_of(path)
        for target in imported_packages(path):
            if target != source and source != "__init__":
                found[(source, target)] += 1
    return found


def main(argv: list[str]) -> int:
    found = edges()
    upward = {(a, b): n for (a, b), n in found.items() if a in FLOW and b in FLOW and FLOW.index(b) > FLOW.index(a)}
    shown = found if "--all" in argv else {e: n for e, n in found.items() if e[0] in FLOW or e[1] in FLOW}
    print(f"{len(found)} edges between perfguard packages ({'all' if '--all' in argv else 'those touching the data flow'}):")
    for (a, b), n in sorted(shown.items()):
        print(f"  {a} -> {b} ({n} import{'s' if n != 1 else ''})")
    print(f"against the data flow ({' -> '.join(FLOW)}): {len(upward)}")
    for (a, b), n in sorted(upward.items()):
        print(f"  {a} -> {b} ({n})")
    return 1 if upward else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
