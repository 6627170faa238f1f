"""Each role's molecule scenarios, run as a user runs them (`molecule test -s <scenario>` from the
role directory): delegated driver, a dedicated simulated host per scenario (`moesweep sim up/down`
in create/destroy), converge, idempotence, and verify (which also asserts check mode reports no
change). The hosts reach no registry: packages come from the apt repository or wheelhouse that
create.yml serves on each host's gateway."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, _can_boot_hosts

pytestmark = [pytest.mark.hosts, pytest.mark.slow]

SCENARIOS = [
    ("cuda_toolkit", "default"),  # no toolkit: installs cuda-toolkit-12-8 from the local signed repository
    ("cuda_toolkit", "preinstalled"),  # 12.8 and 13.1 present: installs nothing, selects 12.8
    ("sglang_env", "default"),  # CPU test stack + client from the wheelhouse
    ("sglang_server", "default"),  # unit for one backend, simulated server ready; a re-run restarts nothing
]


@pytest.mark.parametrize("role,scenario", SCENARIOS, ids=[f"{r}-{s}" for r, s in SCENARIOS])
def test_molecule_scenario(role, scenario):
    reason = _can_boot_hosts()
    if reason:
        pytest.skip(reason)
    bindir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "MOLECULE_"))}
    # molecule calls ansible-config & co. by name: without the venv's bin on PATH it fails with
    # FileNotFoundError: 'ansible-config'.
    env.update(PATH=f"{bindir}:{env.get('PATH', '')}", NO_COLOR="1", ANSIBLE_NOCOLOR="1")
    t0 = time.monotonic()
    proc = subprocess.run(
        [str(bindir / "molecule"), "test", "-s", scenario],
        cwd=REPO / "roles" / role,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=900,
    )
    wall = time.monotonic() - t0
    print(f"molecule test -s {scenario} ({role}): rc={proc.returncode}, {wall:.1f} s")
    assert proc.returncode == 0, proc.stdout[-8000:]
