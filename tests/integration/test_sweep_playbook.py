"""The user's command, ``ansible-playbook sweep.yml -e backend=...`` from the repository root, end to end on a
provisioned simulated SM120 host: benchmarked and recorded points, a 4-backend sweep (a refused point, a forced
crash, benchmarked points, the host left on the best one), resume, a killed controller, and bad input refused
before the first point."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

from moesweep.sim.presets import SIM_FAST, SMALL_BENCH, SMALL_BENCH_PROMPTS

pytestmark = pytest.mark.hosts

BACKENDS = ["flashinfer_trtllm", "flashinfer_cutedsl", "flashinfer_cutlass", "triton"]


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    """The sweep settings every test of this file passes with -e @FILE: the simulator at 10x speed (its
    per-backend token rates, so the best point is known: flashinfer_cutlass, simulator/moesweep_sim/tokenmodel.py),
    small benchmark levels, and this module's own results directory."""
    results = tmp_path_factory.mktemp("results")
    path = results / "settings.json"
    path.write_text(json.dumps({
        "sglang_server_extra_environment": dict(SIM_FAST), "sglang_server_stall_timeout": 5,
        "sglang_server_ready_timeout": 120, "results_dir": str(results), **SMALL_BENCH}))
    return path, results


def playbook(cluster, settings, *args, check=False, env=None):
    path, _ = settings
    return cluster.playbook("sweep.yml", "-e", f"@{path}", *args, check=check, env=env)


def records(results: Path, kind="point"):
    """Every record of ``kind`` under ``results``, the sweep written last coming last (one file per sweep id)."""
    out = []
    for f in sorted(results.glob("*/points.jsonl"), key=lambda f: f.stat().st_mtime_ns):
        for line in f.read_bytes().split(b"\n"):
            if line.strip():
                rec = json.loads(line)  # every line parses: nothing is ever torn
                if rec["kind"] == kind:
                    out.append(rec)
    return out


def failures(results: Path) -> list:
    """(point, status, cause, message) of every record that did not pass: what a failed run's assertion shows
    (the playbook's output ends with the summary, not the failed task's message)."""
    return [(r["point"], r["status"], r.get("cause"), r.get("failed_msg"))
            for r in records(results) if r["status"] != "passed"]


STOP_TASK = r"TASK \[(?:sglang_server : )?Stop the server without waiting for it to exit\][^\n]*\n(changed|ok): "


def previous_stop(proc) -> str | None:
    """The point at which the sweep stopped the server that ran before it (the first point that passed every check
    that could refuse it and starts its own), or None when that server was only read and never stopped."""
    read = re.findall(r"TASK \[Read whether it is running[^\n]*\n(changed|ok): ", proc.stdout)
    assert read == ["ok"], read  # the read itself never changes the host
    begin = proc.stdout.split("TASK [Read whether it is running", 1)[1].split("TASK [Remember it", 1)[0]
    assert not re.findall(STOP_TASK, begin)  # nothing is stopped before the first point's checks
    ran = [(m.group(1), m.end()) for m in re.finditer(
        r"TASK \[Stop the server that ran before the sweep, [^\]]*, (\w+)\]\W*\n(?!skipping)", proc.stdout)]
    assert len(ran) <= 1, ran  # at most once a sweep
    if not ran:
        return None
    point, at = ran[0]
    stop = re.search(STOP_TASK, proc.stdout[at:])
    assert stop and stop.group(1) == "changed", proc.stdout[at:at + 2000]
    return point


def early_stops(proc) -> dict:
    """{point: "changed"} for each point whose server the early stop (the server role's stop entry point, after the
    point's record) stopped."""
    out = {}
    for chunk in proc.stdout.split("TASK [Record the point ")[1:]:
        point, rest = chunk.split("]", 1)
        stop = re.findall(STOP_TASK, rest.split("TASK [Remember how this point ended", 1)[0])
        if stop:
            out[point] = stop[0]
    return out


def active_backend(cluster) -> str:
    line = cluster.sh(cluster.names[0], "systemctl show sglang.service -p ExecStart --value").stdout
    return line.split("--moe-runner-backend ")[1].split()[0]


# alone: the diagnosis it checks (launch bound) reads the simulated GPUs' utilization, which drops to host bound, and
# rightly so, when a test in another worker slows the benchmark client between requests.
@pytest.mark.alone
def test_the_users_exact_command_records_one_benchmarked_point(bench_cluster, settings):
    proc = playbook(bench_cluster, settings, "-e", "backend=flashinfer_cutedsl",
                    env={"ANSIBLE_DEPRECATION_WARNINGS": "True"})
    assert proc.returncode == 0, proc.stdout[-4000:]
    # the warnings are the preflight's caveats, nothing about moesweep's own files (a role's argument specs once
    # warned of duplicate mapping keys at every run), and ansible-core deprecates nothing the playbooks do (facts
    # are read as ansible_facts.*, never as injected variables)
    both = proc.stdout + proc.stderr
    assert "duplicate mapping key" not in both, both[-4000:]
    assert "[DEPRECATION WARNING]" not in both, [line for line in both.splitlines() if "DEPRECATION" in line][:5]
    rec = [r for r in records(settings[1]) if r["point"] == "flashinfer_cutedsl"][-1]
    assert rec["status"] == "passed" and rec["simulated"] is True and rec["backend"] == "flashinfer_cutedsl"
    levels = rec["benchmark"]["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 4] and all(lv["ok"] for lv in levels)
    for lv in levels:
        assert lv["figures"]["output_throughput"] > 0
        assert lv["figures"]["completed"] == SMALL_BENCH_PROMPTS[lv["concurrency"]]
        # the telemetry says launch bound; the all-reduce measured on the simulated VM (no P2P, ~43 us per decode
        # all-reduce, simulator/moesweep_sim/allreduce.py) takes more than the 15 % that names interconnect_bound
        diag = lv["diagnosis"]
        assert lv["telemetry"]["gpus"] and diag["telemetry_verdict"] == "launch_bound", diag
        assert diag["verdict"] == "interconnect_bound" and diag["interconnect"]["share"] >= 0.15
        assert diag["evidence"][0].startswith("157 all-reduces x ")
        # given prompt counts: one fixed round, with its interval and sample counts (module_utils bench_stats)
        assert lv["stats"]["ended_by"] == "fixed" and lv["stats"]["latency"]["ttft"]["n"] == lv["num_prompts"]
        assert lv["stats"]["steady_output_throughput"]["requests"] == SMALL_BENCH_PROMPTS[lv["concurrency"]]
        assert lv["command"][:3] == ["python", "-m", "sglang.bench_serving"]
    # measured once, with the server stopped, under the unit's NCCL environment, and recorded for the host
    lines = (next(settings[1].glob("*/points.jsonl")).parent / "interconnect.jsonl").read_text().splitlines()
    measured = [json.loads(line) for line in lines]
    assert len(measured) == 1 and measured[0]["host"] == bench_cluster.names[0] and measured[0]["ranks"] == 8
    assert measured[0]["model"]["layers"] == 78 and measured[0]["elapsed"] < 30
    assert rec["interconnect"]["key"] == measured[0]["key"]
    # the interconnect in NCCL's own words (interconnect.transport, module_utils/nccl_log.py): the simulated NCCL
    # 2.27.3 of the NS VM connected every ring and tree neighbour through host memory, and the diagnosis cites its line
    transport = rec["interconnect"]["transport"]
    assert transport["found"] and transport["nccl_version"] == "2.27.3" and transport["transports"] == {"SHM": 15}
    assert transport["pairs"][0]["line"].endswith("NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct")
    assert dict(measured[0]["transport"], source="measurement") == transport and transport["source"] == "measurement"
    assert "NCCL INFO" not in measured[0]["output"]
    assert any(e.startswith("NCCL 2.27.3: GPU0 -> GPU1 via SHM") for e in levels[0]["diagnosis"]["evidence"])
    assert rec["smoke"]["state"] == "ok" and rec["smoke"]["answers"]
    assert rec["readiness"]["state"] == "ready" and rec["readiness"]["timeline"]
    assert rec["launch"]["argv"] and "--moe-runner-backend" in rec["launch"]["argv"]
    assert rec["facts"]["sm"] == "sm120" and rec["provenance"]["versions"]["sglang"] == "0.5.9"
    assert rec["moesweep"]["git_commit"] and len(rec["config_hash"]) == 64
    sweep_dir = next(settings[1].glob("*/points.jsonl")).parent
    art = sweep_dir / bench_cluster.names[0] / "flashinfer_cutedsl"
    for name in ("unit.service", "unit.env", "journal.txt", "smoke.json", "c1.result.json", "c4.telemetry.csv"):
        assert (art / name).is_file(), name
    assert "The server is fired up and ready to roll!" in (art / "journal.txt").read_text()
    assert (sweep_dir / "summary.md").is_file() and "SIMULATED" in (sweep_dir / "summary.md").read_text()
    # caveats of the preflight travel with the record (0.5.9 runs sgl-kernel's cutlass_moe_fp4 for cutedsl)
    assert rec["preflight"]["preflight_warnings"]
    # the one point is the best and still runs: the restore judges that server (no restart, no second plan or unit)
    restore = records(settings[1], "restore")[-1]
    assert restore["status"] == "passed" and restore["point"] == "flashinfer_cutedsl"
    assert restore["readiness"]["state"] == "ready"
    assert restore["readiness"]["invocation_id"] == rec["readiness"]["invocation_id"]
    after_choice = proc.stdout.split("TASK [Choose the configuration to leave the host on]")[1]
    assert "TASK [Restore: judge the server that runs the best point, flashinfer_cutedsl]" in after_choice
    assert "Render the environment file" not in after_choice, after_choice[:3000]


def test_four_backend_sweep_refused_benchmarked_and_left_on_the_best(bench_cluster, settings):
    proc = playbook(bench_cluster, settings, "-e", "backends=" + ",".join(BACKENDS))
    assert proc.returncode != 0  # one point was refused: the run says so
    assert "1 of 4 point(s) did not pass" in " ".join(proc.stdout.split()), proc.stdout[-6000:] + proc.stderr[-3000:]
    recs = {r["point"]: r for r in records(settings[1]) if r["point"] in BACKENDS}
    assert recs["flashinfer_trtllm"]["status"] == "refused" and recs["flashinfer_trtllm"]["readiness"] == {}
    for name in ("flashinfer_cutedsl", "flashinfer_cutlass", "triton"):
        assert recs[name]["status"] == "passed", (name, recs[name]["failed_msg"])
    # triton reaches the cutlass_moe_fp4 flashinfer_cutedsl ran (0.5.9, NVFP4, SM120, no DeepEP): not started,
    # recorded on its figures, with the rules that say so; flashinfer_cutlass is another kernel, measured
    same = recs["triton"].get("same_as")
    assert same, re.findall(r"point triton: [^\n]*", proc.stdout)
    assert same["point"] == "flashinfer_cutedsl" and same["moe_runner"] == "cutlass" and same["evidence"], same
    assert recs["triton"]["benchmark"] == recs["flashinfer_cutedsl"]["benchmark"]
    assert recs["triton"]["launch"]["flags"]["moe-runner-backend"] == "triton"
    assert not recs["flashinfer_cutedsl"].get("same_as") and not recs["flashinfer_cutlass"].get("same_as")
    assert "point triton runs the kernels of flashinfer_cutedsl" in proc.stdout
    restore = records(settings[1], "restore")[-1]
    tok = {p: recs[p]["benchmark"]["levels"][-1]["figures"]["output_throughput"]
           for p in ("flashinfer_cutedsl", "flashinfer_cutlass", "triton")}
    best = max(tok, key=tok.get)
    assert best == "flashinfer_cutlass", tok  # the simulator's fastest for SM120
    assert restore["status"] == "passed" and restore["action"] == "point" and restore["point"] == best
    assert restore["readiness"]["state"] == "ready" and active_backend(bench_cluster) == best
    assert bench_cluster.sh(bench_cluster.names[0], "systemctl is-active sglang.service").stdout.strip() == "active"
    # a point whose next point starts its own server is stopped right after its record (changed), which changes nothing;
    # flashinfer_cutlass is not: the next point, triton, starts nothing (same_as), and flashinfer_cutlass is the best,
    # which the restore then only judges, running
    recorded = dict(re.findall(r"TASK \[Record the point (\w+)\][^\n]*\n(changed|ok): ", proc.stdout))
    assert recorded == {"flashinfer_cutedsl": "ok", "flashinfer_cutlass": "ok"}, recorded
    assert early_stops(proc) == {"flashinfer_cutedsl": "changed"}, proc.stdout[-6000:]
    assert re.search(r"TASK \[Stop the sweep's server now[^\n]*\]\W*\nskipping: ", proc.stdout), proc.stdout[-6000:]
    # the first point (trtllm) is refused: the server that ran before the sweep kept serving meanwhile, never
    # stopped early (the plan's first point starts no server); the next point's restart stops it
    assert previous_stop(proc) is None
    # the all-reduce is measured at the first point that runs (its server stopped first), and not again under the
    # same NCCL environment
    measures = re.findall(r"TASK \[(?:sglang_server : )?Measure all-reduce latency[^\n]*\]\W*\n(\w+): ", proc.stdout)
    assert [m for m in measures if m != "skipping"] == ["ok"], measures
    sweep_dir = max(settings[1].glob("*/interconnect.jsonl"), key=lambda f: f.stat().st_mtime_ns).parent
    assert len((sweep_dir / "interconnect.jsonl").read_text().splitlines()) == 1
    assert {r["interconnect"]["key"] for r in recs.values() if r["status"] == "passed"} == {
        json.loads((sweep_dir / "interconnect.jsonl").read_text())["key"]}

    # a forced point: the crash and its cause are recorded, and the host goes back to what it ran before
    proc = playbook(bench_cluster, settings, "-e", "backend=flashinfer_trtllm", "-e", "force=true")
    assert previous_stop(proc) == "flashinfer_trtllm"  # forced, it starts its own server: the one before is stopped
    crash = [r for r in records(settings[1]) if r["point"] == "flashinfer_trtllm"][-1]
    assert crash["status"] == "crashed" and crash["cause"] == "unsupported_arch", crash["readiness"]
    assert crash["preflight"]["forced"] is True
    assert "No supported CUDA architectures" in crash["readiness"]["decisive_line"]
    assert active_backend(bench_cluster) == best
    # its benchmark job, started gated before the restart, was cancelled at its gate: nothing of it is left running
    left = bench_cluster.sh(bench_cluster.names[0], "pgrep -af '[d]river-plan[.]json|[A]nsiballZ_sglang_bench' || true")
    assert not left.stdout.strip(), left.stdout


def test_rerunning_the_sweep_resumes_without_running_finished_points(bench_cluster, settings):
    pid = bench_cluster.sh(bench_cluster.names[0], "systemctl show sglang.service -p MainPID --value").stdout
    before = records(settings[1])
    proc = playbook(bench_cluster, settings, "-e", "backends=" + ",".join(BACKENDS))
    after = records(settings[1])
    new = [r for r in after if r not in before]
    # only the refused point runs again (it never passed); the passed ones are skipped, nothing restarts: their
    # records come back as this run's latest only marked resumed (records.resumed_record), with their old figures
    assert [r["point"] for r in new if not r.get("resumed")] == ["flashinfer_trtllm"], [r["point"] for r in new]
    assert all(r["status"] == "passed" for r in new if r.get("resumed"))
    skipped = re.findall(r"point (\S+) already passed with this configuration \(", proc.stdout)  # the task's message
    assert sorted(skipped) == sorted(b for b in BACKENDS if b != "flashinfer_trtllm"), skipped
    assert bench_cluster.sh(bench_cluster.names[0], "systemctl show sglang.service -p MainPID --value").stdout == pid


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["sigint", "sigkill"])
def test_a_killed_controller_leaves_no_torn_line_and_the_next_run_completes(bench_cluster, settings, sig,
                                                                           tmp_path):
    path, _ = settings
    results = tmp_path / "results"
    slow = json.loads(path.read_text())
    slow.update(results_dir=str(results), sglang_server_extra_environment={
        **slow["sglang_server_extra_environment"], "MOESWEEP_SIM_TIME_SCALE": "0.5"})
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(bench_cluster.inventory), "sweep.yml",
            "-e", f"@{tmp_path / 'slow.json'}", "-e", "backends=flashinfer_cutlass,triton"]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(results.glob("*/.inflight/*__triton.json")):
        time.sleep(0.2)
    assert list(results.glob("*/.inflight/*__triton.json")), "the second point never started"
    time.sleep(2)  # mid-point: the server is restarting
    os.killpg(proc.pid, sig)
    proc.communicate(timeout=120)
    recs = records(results)
    if sig == signal.SIGINT:
        assert recs[-1]["point"] == "triton" and recs[-1]["status"] == "interrupted"
    else:
        assert all(r["point"] != "triton" for r in recs)  # nothing could be written at a SIGKILL
        assert list(results.glob("*/.inflight/*__triton.json"))
    again = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-3000:]
    recs = records(results)
    statuses = [(r["point"], r["status"]) for r in recs]
    assert ("triton", "interrupted") in statuses and statuses[-1] == ("triton", "passed"), statuses
    # resumed, not run again: its passing record comes back only marked resumed (records.resumed_record)
    assert [r.get("resumed") is None for r in recs if r["point"] == "flashinfer_cutlass"].count(True) == 1
    assert not list(results.glob("*/.inflight/*"))


def test_a_controller_killed_mid_benchmark_leaves_a_job_that_the_next_run_stops_first(bench_cluster, settings,
                                                                                       tmp_path):
    """The benchmark is an async job on the host: a SIGKILLed controller leaves it sending requests. The next run
    stops it before its own benchmark sends any (the output directory's lock), and benchmarks the point anew."""
    path, _ = settings
    results = tmp_path / "results"
    sweep_id = f"killed-mid-bench-{os.getpid()}-{int(time.time())}"  # its own directory on the host
    slow = json.loads(path.read_text())
    # c1 long enough (50 prompts one after the other, ~60 s) to outlast the killed run and the next run's way to its
    # benchmark
    slow.update(results_dir=str(results), sweep_id=sweep_id, sglang_bench_num_prompts=[50, 8])
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(bench_cluster.inventory), "sweep.yml",
            "-e", f"@{tmp_path / 'slow.json'}", "-e", "backend=triton"]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    host = bench_cluster.names[0]
    point_dir = f"/var/lib/moesweep/runs/{sweep_id}/triton/*"
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if bench_cluster.sh(host, f"grep -qs '\"running\"' {point_dir}/progress.json").returncode == 0:
            break
        time.sleep(0.3)
    assert proc.poll() is None, "the sweep ended before its benchmark ran a level"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    orphan = bench_cluster.sh(host, f"cat {point_dir}/bench.lock").stdout.strip()
    assert orphan and bench_cluster.sh(host, f"kill -0 {orphan}").returncode == 0, "no benchmark outlived the kill"
    again = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, (failures(results), again.stdout[-3000:])
    rec = records(results)[-1]
    assert rec["point"] == "triton" and rec["status"] == "passed", (rec["status"], rec.get("failed_msg"))
    assert rec["benchmark"]["stopped_run"] == int(orphan)
    assert not any(lv.get("reused") for lv in rec["benchmark"]["levels"])  # the killed run passed no level
    assert [lv["completed"] for lv in rec["benchmark"]["levels"]] == slow["sglang_bench_num_prompts"]
    assert bench_cluster.sh(host, f"kill -0 {orphan}").returncode != 0
    assert bench_cluster.sh(host, "pgrep -f 'sglang[.]bench_serving'").returncode != 0, "a client still runs"


BAD = [
    (["-e", "backend=triton", "-e", "backends=[flashinfer_cutlass]"], "not both"),
    (["-e", "backends=[]"], "empty list"),
    (["-e", "backend=flashinfer_cutlas"], "did you mean 'flashinfer_cutlass'"),
    (["-e", "backend=triton", "-e", "reference_concurrency=32"], "reference concurrency 32 is not one of"),
    (["-e", "backend=triton", "-e", "results_dir=/proc/version"], "is a file"),
]


@pytest.mark.parametrize("args,needle", BAD, ids=[b[1] for b in BAD])
def test_bad_input_is_refused_before_the_first_point(bench_cluster, settings, args, needle):
    show = "systemctl show sglang.service -p MainPID,ExecStart"
    before = bench_cluster.sh(bench_cluster.names[0], show).stdout
    proc = playbook(bench_cluster, settings, *args)
    words = " ".join(proc.stdout.split())
    assert proc.returncode != 0 and needle in words, words[-2000:]
    assert "sweep refused before any point ran" in words and "Start the point" not in proc.stdout
    assert bench_cluster.sh(bench_cluster.names[0], show).stdout == before


def test_an_inventory_without_gpu_hosts_is_refused(bench_cluster, settings, tmp_path):
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    somewhere:\n      ansible_host: 127.0.0.1\n")
    from moesweep.runner import run_ansible

    proc = run_ansible("ansible-playbook", "-i", str(inv), "sweep.yml", "-e", "backend=triton", check=False)
    words = " ".join(proc.stdout.split())
    assert proc.returncode != 0 and "No host of the group gpu_hosts is targeted" in words, words[-1500:]


def test_garbage_output_cancels_the_benchmark_that_waited_for_the_smoke_check(bench_cluster, settings):
    """The benchmark job starts before the smoke check, gated (roles/sglang_bench): a smoke check that fails
    cancels it at its gate, so no benchmark request reaches a server that talks garbage."""
    env = json.dumps({"sglang_server_extra_environment": dict(SIM_FAST, MOESWEEP_SIM_FAULT="garbage")})
    proc = playbook(bench_cluster, settings, "-e", "backend=triton", "-e", env)
    assert proc.returncode != 0
    rec = [r for r in records(settings[1]) if r["point"] == "triton"][-1]
    assert rec["status"] == "bad_output", (rec["status"], rec["failed_msg"])
    assert rec["smoke"]["answers"] and rec["smoke"]["reasons"]
    assert not (rec.get("benchmark") or {}).get("levels")
    h = bench_cluster.names[0]
    out_dir = f"/var/lib/moesweep/runs/{rec['sweep_id']}/triton/{rec['config_hash'][:12]}"
    listing = bench_cluster.sh(h, f"ls {out_dir}").stdout.split()
    assert "stop" in listing and "go" not in listing, listing  # cancelled at the gate, never released
    assert not [f for f in listing if f.endswith((".bench.jsonl", ".log"))], listing  # no level began
    progress = json.loads(bench_cluster.sh(h, f"cat {out_dir}/progress.json").stdout)
    assert {lv["state"] for lv in progress["levels"]} == {"pending"}
    left = bench_cluster.sh(h, "pgrep -af 'driver-pla[n]' || true").stdout  # [n]: not this shell's own line
    assert "driver-plan" not in left, left
