"""The default GLM-5-NVFP4 launch line against a simulated host that emulates sglang 0.5.23: the role's defaults
run there (sglang_server_version_flags spells the flags 0.5.23's way), and 0.5.9's spellings are refused with
every reason before anything is written."""

from __future__ import annotations

import pytest
from conftest import server_account, sweep_point

pytestmark = pytest.mark.hosts

@pytest.fixture(scope="module")
def host23(sim_clusters):
    # a host running the 0.5.23 stack has an R580+ driver: its torch is a CUDA 13.0 build (data/compat.yml
    # s23-driver-cuda13; the simulated RTX PRO 6000 reports R570 unless told otherwise)
    cluster = sim_clusters("v23", hosts=1, sglang_version="0.5.23", driver_version="580.159.04")
    server_account(cluster)
    yield cluster
    cluster.sh(cluster.names[0], "systemctl stop sglang.service; systemctl reset-failed sglang.service", timeout=60)


def point(cluster, **extra):
    return sweep_point(cluster, "flashinfer_cutlass", **extra)


def test_059_spellings_are_refused_on_0523_with_every_reason(host23):
    run, out = point(host23, sglang_server_extra_flags={
        "nsa-decode-backend": "trtllm", "cuda-graph-max-bs": 64, "enable-flashinfer-allreduce-fusion": True})
    assert run.rc != 0 and out.changed == 0
    msg = out.results["preflight"]["msg"]
    assert "sglang 0.5.23" in msg
    # the flag schema's one message for a flag 0.5.23 renamed: where it exists, and the closest 0.5.23 names
    assert "unknown option --nsa-decode-backend for sglang 0.5.23 (it exists in sglang 0.5.9, 0.5.15)" in msg, msg
    assert "did you mean --dsa-decode-backend" in msg
    assert "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode" in msg
    assert "FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs." in msg
    assert host23.sh(host23.names[0], "test -e /etc/systemd/system/sglang.service").returncode != 0


def test_role_defaults_run_on_0523(host23):
    run, out = point(host23)
    assert run.rc == 0, out.failed_msg
    assert out.results["readiness"]["state"] == "ready"
    unit = host23.sh(host23.names[0], "systemctl show sglang.service -p ExecStart --value").stdout
    assert "--dsa-decode-backend trtllm" in unit and "--nsa-" not in unit
    assert "--cuda-graph-max-bs-decode 64" in unit and "--enable-flashinfer-allreduce-fusion" not in unit
