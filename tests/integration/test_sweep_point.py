"""sweep.yml end to end on a simulated SM120 host: preflight before anything is touched, one unit
per backend, the restart protocol, and readiness verdicts for every fault the simulator injects.

The host is its own cluster (servers are started and stopped here). The simulator runs with a
time scale of 0.1 so a launch takes seconds, not minutes; phases keep their order and lines.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest
from conftest import REPO, point_records, server_account, sweep_point

from moesweep.runner import run_playbook

pytestmark = pytest.mark.hosts



@pytest.fixture(scope="module")
def host(sim_clusters):
    cluster = sim_clusters("point", hosts=1)
    server_account(cluster)
    yield cluster
    cluster.sh(cluster.names[0], "systemctl stop sglang.service; systemctl reset-failed sglang.service", timeout=60)


def sweep(cluster, backend, env=None, **extra):
    return sweep_point(cluster, backend, env=env, **extra)


def unit(cluster, *props):
    out = cluster.sh(cluster.names[0], f"systemctl show sglang.service -p {','.join(props)}").stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def journal(cluster, pattern):
    cmd = f"journalctl -u sglang.service -o cat --no-pager | grep -c -- '{pattern}'"
    return cluster.sh(cluster.names[0], cmd).stdout


def test_backend_switch_restarts_once_and_same_backend_changes_nothing(host):
    run, out = sweep(host, "flashinfer_cutlass")
    assert run.rc == 0, out.failed_msg
    assert out.results["readiness"]["state"] == "ready"
    first = unit(host, "MainPID", "ActiveState")
    assert first["ActiveState"] == "active"
    unit_file = host.sh(host.names[0], "cat /etc/systemd/system/sglang.service").stdout
    assert "--moe-runner-backend flashinfer_cutlass" in unit_file and "Restart=no" in unit_file
    host.sh(host.names[0], "cp -p /etc/systemd/system/sglang.service /etc/moesweep/sglang.env /root/")
    assert "--tp-size 8" in unit_file and "--tp " not in unit_file
    # the running server holds all 8 GPUs (simulated nvidia-smi follows the simulated server)
    query = "nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits"
    apps = host.sh(host.names[0], query).stdout
    assert len(apps.splitlines()) == 8 and all(line.startswith(first["MainPID"] + ",") for line in apps.splitlines())
    assert all(int(line.split(",")[1]) > 50000 for line in apps.splitlines()), apps

    # same backend again: nothing changes, nothing restarts
    run, out = sweep(host, "flashinfer_cutlass")
    assert run.rc == 0 and out.changed == 0, out.results
    assert unit(host, "MainPID")["MainPID"] == first["MainPID"]

    # another backend: the unit is re-rendered and the server restarted exactly once
    starts_before = int(journal(host, "Started sglang.service") or 0)
    run, out = sweep(host, "triton")
    assert run.rc == 0, out.failed_msg
    assert out.results["readiness"]["state"] == "ready"
    assert int(journal(host, "Started sglang.service")) == starts_before + 1
    assert unit(host, "MainPID")["MainPID"] != first["MainPID"]
    released = out.results["released"]
    assert released["released"] is True and released["holders"] == []
    assert all(m <= 1024 for m in released["memory_used_mib"])  # the old server's memory was seen freed

    # a run that stopped between rendering and reloading: the files on disk are flashinfer_cutlass's, systemd still
    # runs triton's unit. Nothing differs from the template, but the server must restart on the file's unit.
    triton_pid = unit(host, "MainPID")["MainPID"]
    # plain cp: a new mtime is what makes systemd see the file as newer than its copy (cp -p would hide it)
    host.sh(host.names[0], "cp /root/sglang.service /etc/systemd/system/ && cp /root/sglang.env /etc/moesweep/")
    assert unit(host, "NeedDaemonReload")["NeedDaemonReload"] == "yes"
    run, out = sweep(host, "flashinfer_cutlass")
    assert run.rc == 0 and out.results["readiness"]["state"] == "ready", out.failed_msg
    assert out.results["released"]["released"] is True  # the restart protocol ran
    assert unit(host, "MainPID")["MainPID"] != triton_pid and unit(host, "NeedDaemonReload")["NeedDaemonReload"] == "no"
    assert "--moe-runner-backend flashinfer_cutlass" in unit(host, "ExecStart")["ExecStart"]


def test_preflight_refuses_trtllm_on_sm120_before_touching_the_running_server(host):
    run, out = sweep(host, "flashinfer_cutlass")
    assert out.results["readiness"]["state"] == "ready"
    before = unit(host, "MainPID")["MainPID"]
    t0 = time.monotonic()
    run, out = sweep(host, "flashinfer_trtllm", restore="best")
    took = time.monotonic() - t0
    assert run.rc != 0
    pre = out.results["preflight"]
    assert pre["failed"] and pre["verdict"] == "unsupported" and pre["sm"] == "sm120"
    assert "flashinfer_trtllm" in pre["msg"] and "No supported CUDA architectures" in pre["msg"]
    record = point_records(host, "flashinfer_trtllm")[-1]
    assert record["status"] == "refused" and record["readiness"] == {} and record["launch"]["argv"]
    # the only readiness of that run is the restore's judge (sglang_ready, which starts nothing), and it found the
    # running server ready
    assert out.results["readiness"]["state"] == "ready" and out.results["readiness"].get("started", False) is False
    # the refused point itself (start to record) takes seconds, not a weight load
    assert record["seconds"] < 10 and took < 90, (record["seconds"], took)
    assert unit(host, "MainPID")["MainPID"] == before  # untouched

    # force=true goes ahead and crashes exactly as the simulator (and real sglang 0.5.9) predicts
    # (then, nothing of this one-point sweep having passed, the host gets back what it ran before it)
    run, out = sweep(host, "flashinfer_trtllm", force=True, sglang_server_ready_timeout=60, restore="best")
    assert out.results["preflight"]["forced"] is True
    record = point_records(host, "flashinfer_trtllm")[-1]
    ready = record["readiness"]
    assert record["status"] == "crashed" and record["cause"] == "unsupported_arch", record["readiness"]
    assert ready["state"] == "crashed" and ready["cause"] == "unsupported_arch", ready
    assert "No supported CUDA architectures found for major versions [10]" in ready["decisive_line"]
    assert record["preflight"]["forced"] is True
    restore = point_records(host, kind="restore")[-1]
    assert restore["status"] == "passed" and restore["action"] == "previous" and "no point passed" in restore["reason"]
    assert unit(host, "ActiveState")["ActiveState"] == "active"
    exec_start = host.sh(host.names[0], "systemctl show sglang.service -p ExecStart --value").stdout
    assert "--moe-runner-backend flashinfer_cutlass" in exec_start
    log = host.sh(host.names[0], "journalctl -u sglang.service -o cat -n 2000 --no-pager").stdout
    assert "Scheduler hit an exception: Traceback (most recent call last):" in log
    assert "Received sigquit from a child process. It usually means the child failed." in log
    # systemd saw the parent SIGKILL itself (kill_process_tree(include_parent=True)), before the restore
    assert "Main process exited, code=killed, status=9/KILL" in log


def test_seed_launch_line_health_sequence_and_clean_stop(host):
    """The default GLM-5-NVFP4 line with flashinfer_cutlass under the unit: /health goes
    refused -> 503 -> 200 (observed from outside, over the host's address), and stop exits 0."""
    run, out = sweep(host, "flashinfer_cutlass")
    assert out.results["readiness"]["state"] == "ready", out.failed_msg
    h = host.names[0]
    assert host.sh(h, "systemctl stop sglang.service").returncode == 0
    url = f"http://{host.hosts[0].address}:8000/health"
    seen: list = []
    assert host.sh(h, "systemctl start sglang.service").returncode == 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            code = urllib.request.urlopen(url, timeout=5).status  # a real /health takes >= 1 s once Up
        except urllib.error.HTTPError as exc:
            code = exc.code
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            code = "refused"
        if not seen or seen[-1] != code:
            seen.append(code)
        if code == 200:
            break
        time.sleep(0.05)
    assert seen == ["refused", 503, 200], seen
    line = host.sh(h, "systemctl show sglang.service -p ExecStart --value").stdout
    for flag in ("--model-path lukealonso/GLM-5-NVFP4", "--tp-size 8", "--quantization modelopt_fp4",
                 "--moe-runner-backend flashinfer_cutlass", "--nsa-decode-backend trtllm"):
        assert flag in line, (flag, line)
    stop = host.sh(h, "systemctl stop sglang.service; echo rc=$?")
    assert "rc=0" in stop.stdout
    # sglang 0.5.9 ends a graceful stop with kill_process_tree(include_parent=True): SIGKILL on itself
    drained = host.sh(h, "journalctl -u sglang.service -o cat -n 40 --no-pager").stdout
    assert "Draining requests and shutting down" in drained


FAULTS = [
    # fault, expected state, cause, a fragment of the decisive line
    ("oom_kv", "crashed", "oom", "memory"),
    ("oom_graph", "crashed", "oom", "memory"),
    ("hang_capture", "hang", None, None),
    ("port_in_use", "crashed", "port_in_use", "address already in use"),
]


@pytest.mark.parametrize("fault,state,cause,fragment", FAULTS, ids=[f[0] for f in FAULTS])
def test_injected_faults_are_told_apart(host, fault, state, cause, fragment):
    run, out = sweep(host, "flashinfer_cutlass", env={"MOESWEEP_SIM_FAULT": fault})
    ready = out.results["readiness"]
    assert ready["state"] == state, json.dumps(ready, indent=1)[:3000]
    if cause:
        assert ready["cause"] == cause, ready
    if fragment:
        assert fragment in (ready["decisive_line"] or "").lower(), ready
    assert ready["timeline"], ready


def test_crash_after_ready_is_reported_after_ready(host):
    run, out = sweep(host, "flashinfer_cutlass", env={"MOESWEEP_SIM_FAULT": "crash_after_ready"})
    assert out.results["readiness"]["state"] == "ready"
    # the first real request kills the scheduler
    host.sh(host.names[0], "python3 -c \"import urllib.request as u; u.urlopen(u.Request("
            "'http://127.0.0.1:8000/generate', data=b'{\\\"text\\\": \\\"hi\\\"}', "
            "headers={'Content-Type': 'application/json'}), timeout=10)\" || true", timeout=30)
    run = run_playbook("tests/integration/playbooks/ready_check.yml", inventory=str(host.inventory))
    res = run.hosts[host.names[0]].results["readiness"]
    assert res.get("state") == "crashed", res
    assert res.get("cause") == "other" and "illegal memory access" in res.get("decisive_line", ""), res
    assert res.get("after_ready") is True, res


def test_unknown_flag_is_a_flag_error(host):
    run, out = sweep(host, "flashinfer_cutlass",
                     sglang_server_command=["/opt/moesweep-sim/bin/sglang-sim", "--no-such-flag"])
    ready = out.results["readiness"]
    assert ready["state"] == "crashed" and ready["cause"] == "flag_error", ready
    assert "unrecognized arguments: --no-such-flag" in ready["decisive_line"]


@pytest.mark.parametrize(
    "extra,needle",
    [
        ({"backend": "no_such_backend"}, "unknown backend 'no_such_backend'"),
        ({"sglang_server_extra_flags": {"no-such-flag": True}}, "no-such-flag"),
        ({"sglang_server_extra_flags": {"attention-backend": "warp_drive"}}, "warp_drive"),
        ({"sglang_server_backends": {"flashinfer_cutlass": {"flags": {"moe-runner-backend": "flashinfer_cutlass",
                                                                         "nsa-typo": 1}}}}, "nsa-typo"),
        # refused by the sweep's plan, before the first point: the plan validates the timeouts once for all points
        ({"sglang_server_ready_timeout": 0}, "sglang_server_ready_timeout=0 is not a positive number"),
        ({"sglang_server_unit_name": "sglang;reboot"}, "no shell"),
    ],
    ids=["unknown-backend", "unknown-flag", "bad-choice", "overlay-unknown-flag", "zero-timeout", "unit-metachar"],
)
def test_bad_input_is_refused_before_anything_changes(host, extra, needle):
    before = host.sh(host.names[0], "md5sum /etc/systemd/system/sglang.service 2>/dev/null; "
                     "systemctl show sglang.service -p MainPID").stdout
    backend = extra.pop("backend", "flashinfer_cutlass")
    run, out = sweep(host, backend, **extra)
    assert run.rc != 0
    assert needle in (out.failed_msg or ""), out.failed_msg
    assert out.changed == 0
    after = host.sh(host.names[0], "md5sum /etc/systemd/system/sglang.service 2>/dev/null; "
                    "systemctl show sglang.service -p MainPID").stdout
    assert before == after


def test_port_held_by_another_process_is_named(host):
    h = host.names[0]
    host.sh(h, "systemctl stop sglang.service; systemd-run --unit squatter python3 -m http.server 8000 "
               "--bind 127.0.0.1", timeout=30)
    try:
        for _ in range(50):
            if "LISTEN" in host.sh(h, "ss -Hltn 'sport = :8000' | sed 's/^/LISTEN /'").stdout:
                break
            time.sleep(0.1)
        before = host.sh(h, "md5sum /etc/systemd/system/sglang.service /etc/sglang/sglang.env").stdout
        run, out = sweep(host, "flashinfer_cutlass")
        assert run.rc != 0
        assert "port 8000 is already in use by PID" in out.failed_msg and "http.server" in out.failed_msg
        assert "squatter.service" in out.failed_msg and "sglang_server_flags.port" in out.failed_msg
        # port_owner, right before the unit's call (tasks/port.yml): nothing of the point was written
        assert "Refuse a server port held by something other than this unit" in out.failed_task
        assert host.sh(h, "md5sum /etc/systemd/system/sglang.service /etc/sglang/sglang.env").stdout == before
        # the check that changes nothing names it too (the role's check entry point, port_owner allowed_unit)
        check = run_playbook("playbooks/check.yml", extravars={"backend": "triton"}, inventory=str(host.inventory))
        assert check.rc != 0
        failed = check.hosts[h]
        assert "port 8000 is already in use by PID" in failed.failed_msg and "squatter.service" in failed.failed_msg
    finally:
        host.sh(h, "systemctl stop squatter.service", timeout=30)


def test_the_install_phase_gives_the_service_user_back_what_was_changed_by_hand_and_refuses_a_missing_group(host):
    """The server role's install entry point (site.yml's, and a sweep's first play's): ansible.builtin.user runs only
    where one getent says the account differs; a supplementary group the host lacks fails before anything is made."""
    h = host.names[0]
    site = str(REPO / "playbooks" / "site.yml")
    host.sh(h, "getent passwd sglang >/dev/null || useradd --system --gid video --no-create-home sglang; "
               "gpasswd -d sglang video; usermod --shell /bin/bash sglang", timeout=30)
    try:
        fixed = host.playbook(site, "--tags", "sglang_server_install", "--diff")
        assert fixed.returncode == 0, fixed.stdout[-3000:]
        assert "video" in host.sh(h, "id -nG sglang").stdout.split()
        assert host.sh(h, "getent passwd sglang").stdout.strip().endswith(":/var/lib/sglang:/usr/sbin/nologin")
        again = host.playbook(site, "--tags", "sglang_server_install")
        assert "changed=0" in again.stdout and "Make the service user (a" in again.stdout
        assert again.stdout.count("skipping:") >= 2, again.stdout[-3000:]  # neither the group nor the user task ran
        refused = host.playbook(site, "--tags", "sglang_server_install", "-e",
                                json.dumps({"sglang_server_user_groups": ["video", "moesweep-no-such-group"]}),
                                check=False)
        assert refused.returncode != 0
        assert "must join the group(s) moesweep-no-such-group, which do not exist on the host" in refused.stdout
        assert "changed=0" in refused.stdout
    finally:
        host.sh(h, "usermod --shell /usr/sbin/nologin sglang; usermod -aG video sglang", timeout=30)
