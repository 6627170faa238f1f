"""docs/reliability.md names, per fault, the test that holds the behaviour: every test it names exists, so the
table cannot point at a test that was renamed or removed."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "reliability.md"
RELIABILITY = REPO / "tests" / "integration" / "test_reliability.py"


def _test_cells() -> list[str]:
    rows = [line for line in DOC.read_text().splitlines() if line.startswith("| ") and not line.startswith("| bad")]
    return [row.rstrip(" |").rsplit(" | ", 1)[1] for row in rows if not set(row) <= set("|- ")]


def _files(name: str) -> list[Path]:
    if name.startswith("tests/"):
        return sorted(p for p in REPO.glob(name.rstrip("/")) if p.exists())
    return sorted((REPO / "tests").rglob(name))


def _functions(files: list[Path]) -> list[str]:
    return [m for f in files if f.is_file() for m in re.findall(r"^def (test_\w+)\(", f.read_text(), re.M)]


def test_every_test_the_reliability_table_names_exists():
    cells = _test_cells()
    assert len(cells) >= 25, cells  # the table was read, row by row
    missing = []
    for cell in cells:
        for ref in re.findall(r"`([^`]+)`", cell):
            path, _, func = ref.partition("::")
            if not func and path.startswith("test_") and not path.endswith(".py"):
                path, func = str(RELIABILITY.relative_to(REPO)), path
            files = _files(path)
            if not files:
                missing.append(ref)
            elif func and not fnmatch.filter(_functions(files), func):
                missing.append(ref)
    assert not missing, missing
