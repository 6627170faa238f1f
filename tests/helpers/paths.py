"""Where the tests find the repository and its recorded fixtures."""

import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"

# The Python of the target hosts and of the simulated ones: Debian 12's python3.11. The wheelhouse's wheels, the
# client venvs the roles build on a host and the simulator's extracted data are for it, whichever Python runs the
# controller's venv (3.11 with ansible-core 2.19; 3.12 or 3.13 with 2.20 and later, see the Makefile's venv).
TARGET_PYTHON = (sys.executable if sys.version_info[:2] == (3, 11)
                 else shutil.which("python3.11") or "/usr/bin/python3.11")
