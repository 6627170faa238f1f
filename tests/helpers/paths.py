"""Where the tests find the repository and its recorded fixtures, and the hosts' Python."""

from pathlib import Path

from moesweep.sim.wheelhouse import TARGET_PYTHON  # noqa: F401  (the Python the hosts' venvs and wheels are for)

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
