"""List the import edges between perfguard's packages, and the ones that run against the data flow.

    python scripts/import_edges.py [--all]

A package is a first-level name under perfguard/ (`sim`, `predict`, `guard`, or a module such as
`config`). Imports anywhere in a file count, including the lazy ones inside functions: a lazy
import is still a dependency. The data flow is kernels -> compile -> sim | native -> predict ->
guard -> report (simulating and timing natively are two ways of measuring, side by side); an edge
from a layer to a later one in that order runs upward and is listed under "against the data
flow", an edge between the two measuring layers is not allowed either. Packages outside the order (shared modules, shells) are listed with
their edges but not judged. Exit status 1 when an upward edge exists, so CI can hold the line.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "perfguard"
# Layers in data-flow order; a tuple holds layers side by side (neither may import the other).
FLOW = ("kernels", "compile", ("sim", "native"), "predict", "guard", "report")
LEVEL = {name: level for level, layer in enumerate(FLOW) for name in ((layer,) if isinstance(layer, str) else layer)}


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
    upward = {(a, b): n for (a, b), n in found.items() if a in LEVEL and b in LEVEL and LEVEL[b] >= LEVEL[a]}
    shown = found if "--all" in argv else {e: n for e, n in found.items() if e[0] in LEVEL or e[1] in LEVEL}
    print(f"{len(found)} edges between perfguard packages ({'all' if '--all' in argv else 'those touching the data flow'}):")
    for (a, b), n in sorted(shown.items()):
        print(f"  {a} -> {b} ({n} import{'s' if n != 1 else ''})")
    flow = " -> ".join(layer if isinstance(layer, str) else " | ".join(layer) for layer in FLOW)
    print(f"against the data flow ({flow}): {len(upward)}")
    for (a, b), n in sorted(upward.items()):
        print(f"  {a} -> {b} ({n})")
    return 1 if upward else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
