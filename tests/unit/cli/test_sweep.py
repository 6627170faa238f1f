"""moesweep sweep: how a point's outcome becomes its recorded status (no hosts needed)."""

from __future__ import annotations

import pytest

from moesweep.cli import main
from moesweep.commands import sweep
from moesweep.runner import HostOutcome


@pytest.mark.parametrize(
    "results,failed_task,unreachable,status",
    [
        ({"preflight": {"failed": True, "verdict": "unsupported"}}, "Refuse a backend", False, "refused"),
        ({"preflight": {"failed": True, "forced": True}, "readiness": {"state": "crashed"}}, "Wait", False, "crashed"),
        ({"preflight": {"verdict": "caveat"}, "readiness": {"state": "ready"}}, None, False, "ready"),
        ({"readiness": {"state": "hang"}}, "Wait", False, "hang"),
        ({}, "Render the systemd unit", False, "failed"),
        ({}, None, True, "unreachable"),
    ],
)
def test_point_status(results, failed_task, unreachable, status):
    out = HostOutcome("h", results=results, failed_task=failed_task, unreachable=unreachable)
    assert sweep.point_status(out) == status


def test_detail_names_the_refusal_reason():
    point = {"status": "refused", "readiness": {}, "failed_msg": None,
             "preflight": {"reasons": [{"status": "unsupported", "reason": "trtllm kernels are SM100-only"}]}}
    assert sweep._detail(point) == "trtllm kernels are SM100-only"
    crashed = {"status": "crashed", "preflight": {}, "failed_msg": None,
               "readiness": {"state": "crashed", "cause": "oom", "phase": "kv_cache",
                             "decisive_line": "Not enough memory"}}
    assert sweep._detail(crashed) == "oom in kv_cache: Not enough memory"


@pytest.mark.parametrize("backends,needle", [(",", "--backends is empty"), ("triton,triton", "twice")])
def test_bad_backends(backends, needle, capsys, tmp_path):
    assert main(["sweep", "--backends", backends, "--results", str(tmp_path)]) == 2
    assert needle in capsys.readouterr().err


def test_bad_extra_var(tmp_path):
    with pytest.raises(SystemExit, match="use KEY=VALUE"):
        main(["sweep", "--backends", "triton", "-e", "novalue", "--results", str(tmp_path)])
