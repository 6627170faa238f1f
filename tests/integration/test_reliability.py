"""Reliability and security as a skeptical user tries them, on one simulated SM120 host: results that never lie,
a sweep that stops when told, secrets that stay secret, and bad input refused before it hurts. One test per
behaviour; the README's reliability table lists each with its test (items 14-16 of that table are tested in
tests/unit/cli/ and tests/integration/test_sim_hosts.py, which the table names).

The host is not provisioned with a benchmark client: a point here ends after its smoke check, which is where
these behaviours live. The simulator runs at a time scale of 0.1 (SIM_FAST) unless a test needs a slow start."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import REPO, point_records, sweep_point, wait_for

from moesweep.runner import run_playbook
from moesweep.sim.presets import SIM_FAST, SMALL_BENCH

pytestmark = pytest.mark.hosts

HF_TOKEN = "hf_mOeSwEePtEsTtOkEn0123456789abcdef"
API_KEY = "sk-moesweep-test-api-key-0123456789"
ENV_TOKEN = "hf_eNvTokenThroughExtraEnvironment42"
SECRETS = (HF_TOKEN, API_KEY, ENV_TOKEN)
SECRETS_FILE = "/etc/moesweep/sglang.secrets.yaml"  # the --config file with the API key (sglang_server role)
MOESWEEP = str(Path(sys.executable).parent / "moesweep")


@pytest.fixture(scope="module")
def host(sim_clusters):
    cluster = sim_clusters("reliable", hosts=1)
    yield cluster
    cluster.sh(cluster.names[0], "systemctl stop sglang.service; systemctl reset-failed sglang.service; "
               "rm -f /var/lib/moesweep/sweep.lock", timeout=60)


def serving(cluster, backend="flashinfer_cutlass"):
    """Put the host on a known-good point (the state a user's host is in before a sweep)."""
    run, out = sweep_point(cluster, backend)
    assert run.rc == 0 and out.results["readiness"]["state"] == "ready", out.failed_msg
    return state(cluster)


def state(cluster):
    h = cluster.names[0]
    unit = cluster.sh(h, "md5sum /etc/systemd/system/sglang.service 2>/dev/null").stdout
    show = cluster.sh(h, "systemctl show sglang.service -p MainPID,ActiveState,ExecStart --value").stdout
    return unit, show


def backend_of(cluster):
    line = cluster.sh(cluster.names[0], "systemctl show sglang.service -p ExecStart --value").stdout
    return line.split("--moe-runner-backend ")[1].split()[0]


def settings_file(tmp_path: Path, **more) -> Path:
    # measure_equivalent: these faults strike a point that starts its own server, whatever kernels it shares with
    # another (triton and flashinfer_cutedsl both reach cutlass_moe_fp4 on this host: test_sweep_playbook.py's
    # four-backend sweep is where one stands on the other)
    values = {"sglang_server_extra_environment": dict(SIM_FAST), "sglang_server_stall_timeout": 5,
              "sglang_server_ready_timeout": 120, "sglang_bench_enabled": False, "provision": False,
              "stage_model": False, "measure_equivalent": True}
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(values.get(key), dict):
            values[key] = {**values[key], **value}
        else:
            values[key] = value
    path = tmp_path / f"settings-{len(list(tmp_path.glob('settings-*')))}.json"
    path.write_text(json.dumps(values))
    path.chmod(0o600)
    return path


def cli(cluster, results: Path, *args, settings: Path, tmpdir: Path | None = None, prefix=(), **popen):
    argv = [*prefix, MOESWEEP, "sweep", "-i", str(cluster.inventory), "--results", str(results), "--no-progress",
            "-e", f"@{settings}", *args]
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", **({"TMPDIR": str(tmpdir)} if tmpdir else {}))
    return subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, **popen)


def lines(results: Path, kind=None):
    out = []
    for f in sorted(results.glob("*/points.jsonl"), key=lambda f: f.stat().st_mtime_ns):
        for raw in f.read_bytes().split(b"\n"):
            if raw.strip():
                rec = json.loads(raw)  # every line parses: nothing is ever torn
                if kind is None or rec["kind"] == kind:
                    out.append(rec)
    return out


# ------------------------------------------------------------------------------------------------ results that lie


@pytest.mark.parametrize("extra", [
    {"sglang_server_backend": "triton"},
    {"sglang_server_extra_flags": {"moe-runner-backend": "triton"}},
], ids=["backend-variable", "extra-flag"])
def test_1_a_point_whose_variables_contradict_its_name_is_refused_before_anything_restarts(host, extra):
    before = serving(host)
    run, out = sweep_point(host, "flashinfer_cutedsl", **extra)
    assert run.rc != 0 and "flashinfer_cutedsl" in out.failed_msg and "triton" in out.failed_msg, out.failed_msg
    assert state(host) == before and backend_of(host) == "flashinfer_cutlass"
    rec = point_records(host, "flashinfer_cutedsl")[-1]
    assert rec["status"] == "refused" and rec["readiness"] == {}


def test_1_the_record_names_the_backend_the_unit_runs(host):
    run, out = sweep_point(host, "triton")
    rec = point_records(host, "triton")[-1]
    assert rec["status"] == "passed" and rec["backend"] == "triton" == backend_of(host)
    assert "--moe-runner-backend triton" in " ".join(rec["launch"]["argv"])


def test_2_a_failed_restore_is_an_error_the_exit_code_carries(host, tmp_path):
    # the host runs a configuration that hangs in CUDA graph capture; restore=previous puts it back, and fails
    run, out = sweep_point(host, "flashinfer_cutlass", env={"MOESWEEP_SIM_FAULT": "hang_capture"})
    assert out.results["readiness"]["state"] == "hang"
    proc = cli(host, tmp_path, "--backends", "triton", "--restore", "previous", settings=settings_file(tmp_path))
    text = proc.communicate(timeout=600)[0]
    assert proc.returncode == 3, text[-3000:]
    restore = lines(tmp_path, "restore")[-1]
    assert restore["action"] == "previous" and restore["status"] != "passed", restore
    assert lines(tmp_path, "point")[-1]["status"] == "passed"
    assert "server left on" not in text



def test_2_the_restore_of_the_previous_server_waits_for_its_own_port_and_names_who_holds_it(host, tmp_path):
    """restore=previous goes through the server role's restart: its release wait is for the port of the unit put
    back (8001 here, not the sweep's 8000), and a process that took that port during the sweep fails the restore
    naming it, before the previous server is started."""
    h = host.names[0]
    run, out = sweep_point(host, "flashinfer_cutlass", sglang_server_extra_flags={"port": 8001})
    assert run.rc == 0 and out.results["readiness"]["state"] == "ready", out.failed_msg
    results = tmp_path / "results"
    proc = cli(host, results, "--backends", "triton", "--restore", "previous",
               settings=settings_file(tmp_path, sglang_server_release_timeout=5))
    try:
        # the sweep's point replaced the previous unit (its server, on 8001, stopped): take 8001 while it runs
        wait_for(lambda: "--port 8001" not in host.sh(h, "systemctl show sglang.service -p ExecStart --value").stdout
                 and "8001" not in host.sh(h, "ss -Hltn 'sport = :8001'").stdout, timeout=300)
        host.sh(h, "systemd-run --unit squatter8001 python3 -m http.server 8001 --bind 127.0.0.1", timeout=30)
        text = proc.communicate(timeout=600)[0]
        assert proc.returncode == 3, text[-3000:]
        assert lines(results, "point")[-1]["status"] == "passed"
        restore = lines(results, "restore")[-1]
        assert restore["action"] == "previous" and restore["status"] != "passed", restore
        assert "listens on port 8001" in restore["failed_msg"] and "http.server" in restore["failed_msg"], restore
        assert "--port 8001" in host.sh(h, "systemctl show sglang.service -p ExecStart --value").stdout
        assert "active" not in host.sh(h, "systemctl is-active sglang.service").stdout.replace("inactive", "")
    finally:
        if proc.poll() is None:
            proc.kill()
        host.sh(h, "systemctl stop squatter8001.service; systemctl reset-failed squatter8001.service", timeout=30)
        sweep_point(host, "flashinfer_cutlass")  # the module's other tests serve on 8000

def test_3_a_sweep_where_nothing_becomes_ready_brings_back_what_served_before(host, tmp_path):
    serving(host, "flashinfer_cutlass")
    results = tmp_path / "results"
    run, out = sweep_point(host, "flashinfer_cutedsl", env={"MOESWEEP_SIM_FAULT": "oom_kv"}, restore="best",
                           results_dir=results)
    points = lines(results, "point")
    assert [p["status"] for p in points] == ["crashed"] and points[0]["cause"] == "oom"
    restore = lines(results, "restore")[-1]
    assert restore["action"] == "previous" and restore["status"] == "passed", restore
    assert "before the sweep" in restore["reason"]
    assert backend_of(host) == "flashinfer_cutlass" and "active" in state(host)[1]


@pytest.mark.parametrize("fault,status", [("crash_after_ready", "crashed"), ("garbage", "bad_output")])
def test_4_a_server_that_dies_or_talks_garbage_after_ready_is_not_a_passed_point(host, tmp_path, fault, status):
    results = tmp_path / "results"
    run, out = sweep_point(host, "flashinfer_cutlass", env={"MOESWEEP_SIM_FAULT": fault}, results_dir=results)
    rec = lines(results, "point")[-1]
    assert rec["readiness"]["state"] == "ready" and rec["status"] == status, (rec["status"], rec.get("failed_msg"))
    if fault == "crash_after_ready":
        crash = rec["smoke"]["crash"]
        assert "illegal memory access" in crash["decisive_line"] and crash.get("state") == "crashed", crash
    else:
        assert rec["smoke"]["answers"] and rec["smoke"]["reasons"], rec["smoke"]
    assert rec.get("benchmark") in (None, {}) or not rec["benchmark"].get("levels")


def test_4_a_first_forward_that_never_returns_is_ended_by_sglangs_watchdog_and_recorded_stuck(host, tmp_path):
    """The warmup's batch makes no progress (a hung collective): sglang's own forward watchdog (--watchdog-timeout,
    20 s here, scaled to 2-3 s) ends the server, and the point is a crash whose cause says so, not a hang that waits
    for the readiness timeout nor an unexplained 'other'."""
    results = tmp_path / "results"
    run, out = sweep_point(host, "flashinfer_cutlass", env={"MOESWEEP_SIM_FAULT": "stall"}, results_dir=results,
                           sglang_server_extra_flags={"watchdog-timeout": 20})
    rec = lines(results, "point")[-1]
    assert (rec["status"], rec["cause"]) == ("crashed", "stuck"), (rec["status"], rec["cause"], rec.get("failed_msg"))
    assert rec["readiness"]["decisive_line"] == \
        "Scheduler watchdog timeout (self.watchdog_timeout=20.0, self.soft=False)", rec["readiness"]


@pytest.mark.parametrize("wedge", ["sigstop"])
def test_5_a_wedged_server_is_seen_as_not_serving_and_restarted(host, wedge):
    serving(host, "flashinfer_cutlass")
    h = host.names[0]
    pid = host.sh(h, "systemctl show sglang.service -p MainPID --value").stdout.strip()
    host.sh(h, f"kill -STOP {pid}", timeout=10)
    try:
        judged = run_playbook("tests/integration/playbooks/ready_check.yml", inventory=str(host.inventory))
        verdict = judged.hosts[h].results["readiness"]
        assert verdict["state"] in ("hang", "crashed") and verdict.get("phase") == "serving", verdict
        # the same point again (nothing in its unit changed): the wedged server is restarted, not trusted
        run, out = sweep_point(host, "flashinfer_cutlass", sglang_server_health_timeout=3)
        assert run.rc == 0 and out.results["readiness"]["state"] == "ready", out.failed_msg
        new = host.sh(h, "systemctl show sglang.service -p MainPID --value").stdout.strip()
        assert new != pid
    finally:
        host.sh(h, f"kill -CONT {pid} 2>/dev/null; true", timeout=10)


def test_6_a_mem_fraction_above_one_is_refused_before_anything_restarts(host):
    before = state(host)
    run, out = sweep_point(host, "flashinfer_cutlass", sglang_server_extra_flags={"mem-fraction-static": 1.5})
    assert run.rc != 0 and "mem-fraction-static" in out.failed_msg and "(0, 1]" in out.failed_msg, out.failed_msg
    assert state(host) == before


def test_49_a_model_path_the_host_lacks_is_refused_and_recorded_as_given(host):
    # an extra flag that names a local model the host does not have: refused before anything restarts, and the
    # record names that path (never a model the point did not serve)
    before = state(host)
    run, out = sweep_point(host, "flashinfer_cutlass",
                           sglang_server_extra_flags={"model-path": "/models/does-not-exist"})
    assert run.rc != 0 and "holds no config.json on the host" in out.failed_msg, out.failed_msg
    assert state(host) == before
    record = point_records(host, "flashinfer_cutlass")[-1]
    assert record["status"] == "refused" and record["model"] == {"local_path": "/models/does-not-exist"}, record


def test_49_a_missing_gsm8k_file_is_refused_by_the_plan_not_after_a_restart(host, tmp_path):
    # the accuracy stage's data file is read on the controller when the sweep is planned: before, a missing file
    # surfaced after the point's restart and smoke check, as Ansible's "'__sglang_bench_accuracy' is undefined"
    before = state(host)
    run, out = sweep_point(host, "triton", bench=True, sglang_bench_accuracy_data_src=str(tmp_path / "gsm8k.jsonl"))
    assert run.rc != 0 and "sweep refused before any point ran" in out.failed_msg, out.failed_msg
    assert "sglang_bench_accuracy_data_src=%s cannot be read" % (tmp_path / "gsm8k.jsonl") in out.failed_msg
    assert state(host) == before


def test_49_a_refusal_after_the_plan_never_costs_the_healthy_server_a_restart(host, tmp_path):
    # the plan's knowledge base accepts the point, so the sweep would stop the serving server early for it; the
    # point's own checks then refuse it (its model path is not on the host): the server must never have stopped
    before = serving(host, "flashinfer_cutlass")
    settings = settings_file(tmp_path, sglang_server_extra_flags={"model-path": "/models/does-not-exist"})
    proc = cli(host, tmp_path, "--backends", "triton", "--rerun", settings=settings)
    text = proc.communicate(timeout=600)[0]
    assert proc.returncode == 1, text[-3000:]
    assert [p["status"] for p in lines(tmp_path, "point")] == ["refused"]
    # the same unit, the same MainPID, still active: nothing stopped, nothing restarted (ExecStart's runtime part is
    # not compared: the restore's daemon-reload of the unit put back resets it)
    def main_pid_and_state(show):  # `systemctl show` prints MainPID, ExecStart, then ActiveState
        lines_ = show.strip().split("\n")
        return lines_[0], lines_[-1]

    unit, show = state(host)
    assert (unit, main_pid_and_state(show)) == (before[0], main_pid_and_state(before[1])), (show, before)


# ------------------------------------------------------------------------------------------------ stops when told


def test_7_one_ctrl_c_stops_after_the_step_records_interrupted_and_restores(host, tmp_path):
    serving(host, "flashinfer_cutlass")
    slow = settings_file(tmp_path, sglang_server_extra_environment={"MOESWEEP_SIM_TIME_SCALE": "0.5"})
    proc = cli(host, tmp_path, "--backends", "triton,flashinfer_cutedsl", "--rerun", settings=slow)
    wait_for(lambda: list(tmp_path.glob("*/.inflight/*__triton.json")), what="the first point to start")
    time.sleep(3)  # the server is restarting
    os.killpg(proc.pid, signal.SIGINT)
    text = proc.communicate(timeout=600)[0]
    assert proc.returncode == 130, text[-3000:]
    points = lines(tmp_path, "point")
    assert [p["point"] for p in points] == ["triton"] and points[0]["status"] == "interrupted", points
    assert points[0]["launch"]["argv"]  # what had happened before the stop is kept
    restore = lines(tmp_path, "restore")
    assert restore and restore[-1]["status"] == "passed", restore
    assert "active" in state(host)[1]


def test_49_sigterm_stops_like_ctrl_c_and_nothing_outlives_the_cli(host, tmp_path):
    # what `timeout` or a CI cancel sends, to the CLI's process alone (not its group): the same stop after the step,
    # the restore and the record; ansible-playbook (in its own session) does not outlive it; no runner dir is left
    serving(host, "flashinfer_cutlass")
    runner_tmp = tmp_path / "tmp"
    runner_tmp.mkdir()
    slow = settings_file(tmp_path, sglang_server_extra_environment={"MOESWEEP_SIM_TIME_SCALE": "0.5"})
    proc = cli(host, tmp_path, "--backends", "triton,flashinfer_cutedsl", "--rerun", settings=slow, tmpdir=runner_tmp)
    try:
        # a loaded 2-core machine takes minutes to the first point (the plan and the host's facts run first)
        wait_for(lambda: list(tmp_path.glob("*/.inflight/*__triton.json")) or proc.poll() is not None,
                 timeout=300, what="the first point to start")
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        time.sleep(2)
        proc.send_signal(signal.SIGTERM)
        text = proc.communicate(timeout=600)[0]
    finally:
        # a failed wait leaves no sweep running into the next test's host
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, text[-3000:]
    points = lines(tmp_path, "point")
    assert [(p["point"], p["status"]) for p in points] == [("triton", "interrupted")], points
    restore = lines(tmp_path, "restore")
    assert restore and restore[-1]["status"] == "passed", restore
    assert not list(runner_tmp.glob("moesweep-runner-*")), list(runner_tmp.iterdir())
    left = subprocess.run(["pgrep", "-f", str(runner_tmp)], capture_output=True, text=True).stdout.split()
    assert not left, left


def test_7_a_second_ctrl_c_stops_at_once_without_a_torn_file(host, tmp_path):
    slow = settings_file(tmp_path, sglang_server_extra_environment={"MOESWEEP_SIM_TIME_SCALE": "1.0"})
    proc = cli(host, tmp_path, "--backends", "triton,flashinfer_cutedsl", "--rerun", settings=slow)
    wait_for(lambda: list(tmp_path.glob("*/.inflight/*__triton.json")), what="the first point to start")
    time.sleep(2)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.5)
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    text = proc.communicate(timeout=120)[0]
    assert time.monotonic() - t0 < 30 and proc.returncode == 130
    # never "no host answered": the hosts answered, the user stopped the sweep
    assert "no host answered" not in text and "interrupted" in text, text[-2000:]
    points = lines(tmp_path, "point")  # parses line by line: nothing torn
    # Stopped at once, the playbook may not get to record the point; its in-flight marker stays for the next run.
    assert [p["status"] for p in points] in ([], ["interrupted"]), points
    if not points:
        assert list(tmp_path.glob("*/.inflight/*__triton.json"))
    # the next run of the same command records the interrupted point (if it was not) and completes the sweep
    proc = cli(host, tmp_path, "--backends", "triton,flashinfer_cutedsl", settings=settings_file(tmp_path))
    text = proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, text[-3000:]
    statuses = [(p["point"], p["status"]) for p in lines(tmp_path, "point")]
    assert statuses.count(("triton", "interrupted")) == 1, statuses
    assert statuses[-2:] == [("triton", "passed"), ("flashinfer_cutedsl", "passed")], statuses
    assert not list(tmp_path.glob("*/.inflight/*.json"))


# The second controller on the same machine: the same PID namespace, or another one of the same machine id and boot
# (two containers of one image on one CI host, here `unshare --pid`), where the first sweep's pid names nothing (#49).
OTHER_PID_NAMESPACE = ("unshare", "--pid", "--fork", "--mount-proc")


@pytest.mark.parametrize("prefix", [(), OTHER_PID_NAMESPACE], ids=["same-pid-namespace", "other-pid-namespace"])
def test_8_a_second_sweep_on_the_same_host_is_refused_naming_who_holds_it(host, tmp_path, prefix):
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    slow = settings_file(tmp_path, sglang_server_extra_environment={"MOESWEEP_SIM_TIME_SCALE": "0.5"})
    first = cli(host, first_dir, "--backends", "triton", "--rerun", settings=slow)
    wait_for(lambda: list(first_dir.glob("*/.inflight/*__triton.json")), what="the first sweep's point")
    try:
        second = cli(host, second_dir, "--backends", "flashinfer_cutedsl", "--rerun",
                     settings=settings_file(tmp_path), prefix=prefix)
        text = second.communicate(timeout=300)[0]
    finally:
        out = first.communicate(timeout=600)[0]  # the first sweep ends whatever the second did
    assert second.returncode == 2, text[-3000:]
    words = " ".join(text.split())
    assert "is being swept by" in words and "since" in words and "sweep-" in words, words[-2000:]
    assert "moesweep sweep --break-lock " in words and "-e sweep_lock_break=" in words, words[-2000:]
    assert lines(second_dir, "point") == []
    assert first.returncode == 0, out[-3000:]
    assert [p["status"] for p in lines(first_dir, "point")] == ["passed"]


def test_9_results_that_turn_read_only_stop_the_sweep_keep_the_record_and_fail_the_run(host, tmp_path, monkeypatch):
    """A record that cannot be written is kept where the sweep finds it, the sweep stops before its next point, the
    restore still decides on it, the run exits 4 naming the kept file; the next run puts it into points.jsonl and
    resumes from it (re-probe #37 item 1)."""
    kept_dir = tmp_path / "kept"
    monkeypatch.setenv("MOESWEEP_UNWRITTEN_DIR", str(kept_dir))
    results = tmp_path / "ro"
    results.mkdir()
    settings = settings_file(tmp_path, sglang_server_extra_environment={"MOESWEEP_SIM_TIME_SCALE": "0.3"})
    subprocess.run(["mount", "--bind", str(results), str(results)], check=True)
    try:
        proc = cli(host, results, "--backends", "triton,flashinfer_cutedsl", "--rerun", settings=settings)
        wait_for(lambda: list(results.glob("*/.inflight/*__triton.json")), what="the first point to start")
        subprocess.run(["mount", "-o", "remount,bind,ro", str(results)], check=True)
        text = proc.communicate(timeout=600)[0]
    finally:
        subprocess.run(["umount", str(results)], check=False)
    assert proc.returncode == 4, text[-3000:]
    words = " ".join(text.split())
    assert "Traceback" not in text and "could NOT be written" in words, words[-3000:]
    kept = sorted(kept_dir.glob("*/*.json"))
    assert len(kept) == 2, kept  # the point's record and the restore's
    for path in kept:
        assert str(path) in words and oct(path.stat().st_mode & 0o777) == "0o600", (path, words[-3000:])
    point, restore = (json.loads(p.read_text()) for p in kept)  # in the order they were kept, whole
    assert point["kind"] == "point" and point["point"] == "triton" and point["status"] == "passed", point
    # the sweep stopped before its second point; the restore decided on the kept record
    assert "flashinfer_cutedsl: started" not in words
    assert restore["kind"] == "restore" and restore["point"] == "triton" and restore["status"] == "passed", restore
    # writable again: the same sweep puts the kept records in, skips the point that passed, runs the other one
    again = cli(host, results, "--backends", "triton,flashinfer_cutedsl", settings=settings)
    text = again.communicate(timeout=600)[0]
    assert again.returncode == 0, text[-3000:]
    points = lines(results, "point")
    assert [(p["point"], p["status"]) for p in points][:1] == [("triton", "passed")], points
    assert [p["point"] for p in points if not p.get("resumed")] == ["triton", "flashinfer_cutedsl"], (
        [(p["point"], p["config_hash"], p.get("resumed"), p["finished"]) for p in points], text[-3000:])
    assert not list(kept_dir.glob("*/*.json"))


# ------------------------------------------------------------------------------------------------ secrets


def test_10_11_12_secrets_never_reach_a_record_an_artifact_the_output_or_a_readable_file(host, tmp_path):
    secrets = tmp_path / "secrets.yml"
    secrets.write_text(f"sglang_server_hf_token: {HF_TOKEN}\nsglang_server_api_key: {API_KEY}\n"
                       f"sglang_server_extra_environment:\n  HF_TOKEN: {ENV_TOKEN}\n"
                       f"  MOESWEEP_SIM_TIME_SCALE: '0.1'\n")
    secrets.chmod(0o600)
    results = tmp_path / "results"
    # the CLI, secrets from a vars file; its own TMPDIR, so that another worker's runs cannot be taken for its leaks
    # short: ansible-core's local RPC server binds a Unix socket under TMPDIR (pymp-*/listener-*), whose path may not
    # exceed 107 bytes (AF_UNIX), which pytest's tmp_path under xdist reaches
    private_tmp = Path(tempfile.mkdtemp(prefix="msw-"))
    proc = cli(host, results, "--backends", "triton", "--rerun", "-e", f"@{secrets}",
               settings=settings_file(tmp_path), tmpdir=private_tmp)
    cli_out = proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, cli_out[-3000:]
    # ansible-playbook itself at -vvv with --diff, secrets from the same file
    playbook = host.playbook("sweep.yml", "-vvv", "--diff", "-e", f"@{settings_file(tmp_path)}",
                             "-e", f"@{secrets}", "-e", "backend=flashinfer_cutedsl", "-e", "rerun=true",
                             "-e", f"results_dir={results}", check=False)
    assert playbook.returncode == 0, playbook.stdout[-3000:]
    found = []
    for text, where in ((cli_out, "moesweep sweep output"), (playbook.stdout, "ansible-playbook -vvv --diff stdout"),
                        (playbook.stderr, "ansible-playbook stderr")):
        found += [(where, s) for s in SECRETS if s in text]
    for path in results.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [(str(path), s) for s in SECRETS if s.encode() in data]
            assert path.stat().st_mode & 0o077 == 0, (path, oct(path.stat().st_mode))
        elif path.is_dir():
            assert path.stat().st_mode & 0o077 == 0, (path, oct(path.stat().st_mode))
    assert not list(private_tmp.glob("moesweep-runner-*")), "a runner directory was left behind"
    # on the host: the tokens are only in root's 0600 environment file, the API key only in the service user's 0600
    # --config file; the unit, `systemctl show` and every process's command line hold none
    h = host.names[0]
    patterns = " ".join(f"-e '{s}'" for s in SECRETS)
    hits = host.sh(h, f"grep -rlsF {patterns} /etc /var/lib /run /opt /home /tmp /var/tmp 2>/dev/null",
                   timeout=120).stdout.split()
    for path in hits:
        mode = host.sh(h, f"stat -c '%a %U' {path}").stdout.split()
        assert mode[0].endswith("00"), (path, mode)  # readable by its owner only
    assert "/etc/moesweep/sglang.env" in hits, hits  # the environment file holds the tokens
    key_hits = host.sh(h, f"grep -rlsF -e '{API_KEY}' /etc /var/lib /run /opt /home /tmp /var/tmp 2>/dev/null",
                       timeout=120).stdout.split()
    assert key_hits == [SECRETS_FILE], key_hits
    assert host.sh(h, f"stat -c '%a %U %G' {SECRETS_FILE}").stdout.split() == ["600", "sglang", "sglang"]
    show = host.sh(h, "systemctl show sglang.service -p ExecStart,Environment --value").stdout
    found += [("systemctl show", s) for s in SECRETS if s in show]
    unit = host.sh(h, "cat /etc/systemd/system/sglang.service").stdout
    assert f"--config {SECRETS_FILE}" in unit and "--api-key" not in unit and "SGLANG_API_KEY" not in unit, unit
    pid = host.sh(h, "systemctl show sglang.service -p MainPID --value").stdout.strip()
    assert pid not in ("", "0"), "the server should run after the sweep"
    server_argv = host.sh(h, f"tr '\\0' ' ' < /proc/{pid}/cmdline").stdout
    assert f"--config {SECRETS_FILE}" in server_argv, server_argv
    every_argv = host.sh(h, "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done 2>/dev/null").stdout
    found += [("a process's command line", s) for s in SECRETS if s in every_argv]
    # the journal, read as an unprivileged member of adm (who may read every unit's journal): sglang logged its
    # ServerArgs (the key's field is there) through the server role's log filter, so not the key (#49)
    host.sh(h, "id auditor >/dev/null 2>&1 || useradd --system --no-create-home -G adm auditor")
    journal = host.sh(h, "runuser -u auditor -- journalctl -u sglang.service --no-pager -o cat").stdout
    assert "api_key='<redacted>'" in journal, journal[-2000:]
    found += [("the journal, read by a member of adm", s) for s in SECRETS if s in journal]
    assert not found, found


def test_10_11_12_with_the_benchmark_no_secret_reaches_its_files_or_the_vvv_output(bench_cluster, tmp_path):
    """The benchmark and the accuracy stage are where the key travels most: the client sends it on every request,
    and bench_serving writes the server's /get_server_info (its ServerArgs, api_key included) into its result. A
    sweep with both on, run as ansible-playbook -vvv --diff, keeps no secret in its output or its results."""
    secrets = tmp_path / "secrets.yml"
    secrets.write_text(f"sglang_server_hf_token: {HF_TOKEN}\nsglang_server_api_key: {API_KEY}\n"
                       f"sglang_server_extra_environment:\n  HF_TOKEN: {ENV_TOKEN}\n"
                       f"  MOESWEEP_SIM_TIME_SCALE: '0.1'\n")
    secrets.chmod(0o600)
    results = tmp_path / "results"
    settings = settings_file(tmp_path, sglang_bench_enabled=True, **SMALL_BENCH)
    try:
        playbook = bench_cluster.playbook("sweep.yml", "-vvv", "--diff", "-e", f"@{settings}", "-e", f"@{secrets}",
                                          "-e", "backend=triton", "-e", "rerun=true", "-e", f"results_dir={results}",
                                          check=False)
        assert playbook.returncode == 0, playbook.stdout[-3000:]
        (rec,) = [r for r in lines(results, "point")]
        assert rec["status"] == "passed" and rec["benchmark"]["levels"] and rec["accuracy"], rec.get("cause")
        found = [(where, s) for text, where in ((playbook.stdout, "stdout"), (playbook.stderr, "stderr"))
                 for s in SECRETS if s in text]
        bench_files = [p for p in results.rglob("*") if p.is_file()]
        assert any(p.name.endswith(".result.json") for p in bench_files), bench_files
        for path in bench_files:
            found += [(str(path), s) for s in SECRETS if s.encode() in path.read_bytes()]
        # and on the host, the benchmark's own files (its raw output, progress, logs) hold none either
        h = bench_cluster.names[0]
        hits = bench_cluster.sh(h, f"grep -rlsF -e '{API_KEY}' /var/lib/moesweep /home /tmp /var/tmp 2>/dev/null",
                                timeout=120).stdout.split()
        found += [(path, API_KEY) for path in hits]
        assert not found, found
    finally:  # leave the shared host without a key for the tests after this one
        bench_cluster.playbook("sweep.yml", "-e", f"@{settings_file(tmp_path)}", "-e", "backend=triton",
                               "-e", "rerun=true", "-e", f"results_dir={tmp_path / 'after'}", check=False)


PROBE = """import sys, urllib.request as u
r = u.Request("http://127.0.0.1:8000" + sys.argv[1], headers={"Authorization": sys.argv[2]} if sys.argv[2] else {})
try:
    print(u.urlopen(r, timeout=10).status)
except Exception as e:
    print(getattr(e, "code", e))
"""


def status_of(cluster, path, authorization=""):
    """The HTTP status of GET path on the host's server (port 8000, the role's default launch), from the host."""
    script = f"python3 -c {shlex.quote(PROBE)} {shlex.quote(path)} {shlex.quote(authorization)}"
    return int(cluster.sh(cluster.names[0], script).stdout.strip())


def test_10_restore_previous_puts_the_key_file_back_with_the_unit(host, tmp_path):
    """A server with a key ran before the sweep; the sweep's point has none (its unit has no --config, and the file
    is removed); restore=previous puts the unit and the key's file back as they were, and the server enforces it."""
    h = host.names[0]
    run, out = sweep_point(host, "flashinfer_cutlass", sglang_server_api_key=API_KEY)
    assert run.rc == 0 and out.results["readiness"]["state"] == "ready", out.failed_msg
    before = host.sh(h, f"md5sum {SECRETS_FILE}; stat -c '%a %U %G' {SECRETS_FILE}").stdout
    assert "600 sglang sglang" in before, before
    results = tmp_path / "results"
    proc = cli(host, results, "--backends", "triton", "--restore", "previous",
               settings=settings_file(tmp_path, sglang_server_api_key=""))
    text = proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, text[-3000:]
    point, restore = lines(results, "point")[-1], lines(results, "restore")[-1]
    assert point["status"] == "passed" and "--config" not in point["launch"]["argv"], point["launch"]["argv"]
    assert restore["action"] == "previous" and restore["status"] == "passed", restore
    assert host.sh(h, f"md5sum {SECRETS_FILE}; stat -c '%a %U %G' {SECRETS_FILE}").stdout == before
    assert backend_of(host) == "flashinfer_cutlass" and f"--config {SECRETS_FILE}" in host.sh(
        h, "systemctl show sglang.service -p ExecStart --value").stdout
    assert status_of(host, "/model_info") == 401
    assert status_of(host, "/model_info", f"Bearer {API_KEY}") == 200
    sweep_point(host, "flashinfer_cutlass")  # the module's other tests serve without a key


def test_13_a_public_bind_without_a_key_is_warned_about_and_the_unit_comes_back_at_boot(host):
    run, out = sweep_point(host, "flashinfer_cutlass", sglang_server_api_key="")
    warnings = " ".join(out.results["preflight"].get("preflight_warnings") or [])
    assert "all interfaces" in warnings and "--api-key" in warnings, warnings
    assert host.sh(host.names[0], "systemctl is-enabled sglang.service").stdout.strip() == "enabled"
    run, out = sweep_point(host, "flashinfer_cutlass", sglang_server_enabled=False)
    assert host.sh(host.names[0], "systemctl is-enabled sglang.service").stdout.strip() == "disabled"
    sweep_point(host, "flashinfer_cutlass")


# ------------------------------------------------------------------------------------------------ re-probe #37


def test_37_check_diff_changes_nothing_records_nothing_and_passes(host, tmp_path):
    """`ansible-playbook sweep.yml --check --diff` on a serving host: exit 0, no results file named that is never
    written, no FAILED - RETRYING line, and the host exactly as it was (re-probe #37 item 7)."""
    before = serving(host)
    results = tmp_path / "results"
    run = host.playbook("sweep.yml", "--check", "--diff", "-e", f"@{settings_file(tmp_path)}",
                        "-e", "backends=[triton,flashinfer_cutlass]", "-e", f"results_dir={results}", check=False)
    text = run.stdout + run.stderr
    assert run.returncode == 0, text[-4000:]
    assert "FAILED - RETRYING" not in text and str(results) not in text, text[-4000:]
    assert "check mode, nothing ran or was recorded: the preflight accepts every point" in text
    assert not list(results.glob("*/points.jsonl"))
    assert state(host) == before


def test_37_a_sweep_of_refused_points_never_touches_the_running_server(host, tmp_path):
    """Every point refused by the preflight: the healthy server that ran before the sweep keeps running, the same
    process (a restart is a full model load on a real host), and the run fails naming the refusal."""
    before = serving(host)
    pid = host.sh(host.names[0], "systemctl show sglang.service -p MainPID --value").stdout.strip()
    proc = cli(host, tmp_path / "results", "--backends", "flashinfer_trtllm", settings=settings_file(tmp_path))
    text = proc.communicate(timeout=600)[0]
    assert proc.returncode == 1, text[-3000:]
    assert [p["status"] for p in lines(tmp_path / "results", "point")] == ["refused"]
    assert state(host) == before, text[-3000:]
    assert host.sh(host.names[0], "systemctl show sglang.service -p MainPID --value").stdout.strip() == pid


def test_37_a_benchmark_that_cannot_run_on_the_host_is_refused_before_anything_is_touched(bench_cluster, tmp_path):
    """A wrong tokenizer path is a benchmark input on the host: the sweep fails naming it and its fix before any
    point's unit is written or anything stops or restarts, not from the benchmark job after the restarts of every
    point (re-probe #37, weak)."""
    host = bench_cluster.names[0]
    before = serving(bench_cluster)
    settings = settings_file(tmp_path, sglang_bench_enabled=True, sglang_bench_tokenizer="/nonexistent/tokenizer",
                             **SMALL_BENCH)
    run = bench_cluster.playbook("sweep.yml", "-e", f"@{settings}", "-e", "backends=[triton,flashinfer_cutedsl]",
                                 "-e", "rerun=true", "-e", f"results_dir={tmp_path / 'results'}", check=False)
    text = run.stdout + run.stderr
    assert run.returncode != 0, text[-3000:]
    assert "tokenizer directory /nonexistent/tokenizer does not exist" in text, text[-3000:]
    assert lines(tmp_path / "results", "point") == []
    assert state(bench_cluster) == before  # the same unit file and the same server process
    assert "--moe-runner-backend flashinfer_cutlass" in bench_cluster.sh(
        host, "systemctl show sglang.service -p ExecStart --value").stdout
