"""docs/architecture.md's layout names every Python module of the collection and the controller package, so a
module added without its line in the map fails here."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
CODE = ["plugins/modules", "plugins/module_utils", "plugins/plugin_utils", "plugins/action", "plugins/callback",
        "plugins/filter", "src/moesweep", "src/moesweep/commands", "src/moesweep/sim"]


def test_every_module_is_named_in_the_architecture():
    text = DOC.read_text()
    missing = [f"{folder}/{path.name}" for folder in CODE for path in sorted((REPO / folder).glob("*.py"))
               if path.stem != "__init__" and not re.search(rf"\b{re.escape(path.stem)}\b", text)]
    assert not missing, missing


def test_every_simulator_module_is_named_in_its_readme():
    text = (REPO / "simulator" / "README.md").read_text()
    missing = [p.name for p in sorted((REPO / "simulator" / "moesweep_sim").glob("*.py"))
               if p.stem != "__init__" and p.stem not in text]
    assert not missing, missing
