"""moesweep.runner.run_ansible: the tool of this interpreter's environment, run in the repository with its
ansible.cfg (the tests and bench scripts read what it prints), and a failure that names the command."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers.paths import REPO

from moesweep.runner import run_ansible


def test_runs_this_environments_tool_with_the_repositorys_config():
    proc = run_ansible("ansible", "--version")
    assert f"config file = {REPO / 'ansible.cfg'}" in proc.stdout
    assert f"executable location = {Path(sys.executable).parent / 'ansible'}" in proc.stdout


def test_a_failure_names_the_command_unless_not_checked():
    args = ("ansible", "localhost", "-m", "moesweep.sweep.no_such_module")
    assert run_ansible(*args, check=False).returncode != 0
    with pytest.raises(AssertionError, match="ansible localhost -m moesweep.sweep.no_such_module failed rc="):
        run_ansible(*args)
