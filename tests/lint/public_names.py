"""`python -m tests.lint.public_names`: the simulator (sim/) uses only the product's public names.

import-linter sees modules, not names: this walks sim/'s imports and fails on any `from raybus...
import _name` or an import of a module whose path has a private part (`raybus.x._y`)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def private_uses(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            modules: list[tuple[str, list[str]]] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules.append((node.module, [a.name for a in node.names]))
            elif isinstance(node, ast.Import):
                modules += [(a.name, []) for a in node.names]
            for module, names in modules:
                if module != "raybus" and not module.startswith("raybus."):
                    continue
                private = [p for p in module.split(".") if p.startswith("_")]
                private += [n for n in names if n.startswith("_")]
                if private:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {module} {', '.join(private)}")
    return found


def main() -> int:
    found = private_uses(ROOT / "sim")
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
