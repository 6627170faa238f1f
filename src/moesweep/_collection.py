"""Make the in-repo collection importable as ``ansible_collections.moesweep.sweep``.

The Python package shares code with modules and plugins through the collection (never by copying):
``from ansible_collections.moesweep.sweep.plugins.module_utils import nvidia_smi``.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
COLLECTIONS_PATH = REPO_ROOT / "collections"


def ensure_importable() -> None:
    path = str(COLLECTIONS_PATH)
    if path not in sys.path:
        sys.path.insert(0, path)


ensure_importable()
