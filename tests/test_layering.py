"""The package's layers (docs/architecture.md): sim/ is the core and imports nothing from
analysis/ or runtime/; runtime/ imports analysis/ only in its command wiring
(cli_commands.py). The test reads every import statement, top-level or inside a function,
so a lazy import cannot hide an edge."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> set[str]:
    """Every module named by an import statement anywhere in ``path``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def edges(folder: str, forbidden: tuple[str, ...], allowed_files: tuple[str, ...] = ()) -> list[str]:
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        if path.name in allowed_files:
            continue
        for mod in imported_modules(path):
            if mod.startswith(forbidden):
                found.append(f"{path.relative_to(ROOT)} imports {mod}")
    return found


def test_sim_imports_neither_analysis_nor_runtime() -> None:
    assert edges("sim", ("specsched.analysis", "specsched.runtime")) == []


def test_runtime_imports_analysis_only_in_its_command_wiring() -> None:
    assert edges("runtime", ("specsched.analysis",), allowed_files=("cli_commands.py",)) == []


def test_the_check_sees_a_lazy_import(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from specsched.analysis.io import read_results\n    return read_results\n")
    assert imported_modules(f) == {"specsched.analysis.io"}
