"""One SGLang server over two simulated hosts (the inventory group sglang_nodes), through the user's command
``ansible-playbook sweep.yml``: the group becomes ready (rank 0 serves the API, rank 1 only the dummy health
server) and is benchmarked into ONE record under rank 0 that holds every rank's readiness; a re-run resumes
on every rank and restarts none; restore=previous restarts every rank back; rank 1 killed while it starts fails
the point with rank 1's cause; bad input (an --nnodes that is not the group's size, duplicate
ranks, a dist-init port taken on rank 0, a rank that cannot be reached) is refused before any unit changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, provision

from moesweep.sim.presets import SIM_FAST, SIM_RATES, SMALL_BENCH

pytestmark = pytest.mark.hosts

POINT = "flashinfer_cutlass"
OTHER = "triton"


class Nodes:
    def __init__(self, cluster, tmp: Path):
        self.cluster = cluster
        self.rank0, self.rank1 = cluster.names
        self.tmp = tmp
        self.results = tmp / "results"
        # the node group, in rank order, as a second inventory source next to the one `sim up` wrote
        self.group = tmp / "group.yml"
        self.group.write_text(json.dumps({"all": {"children": {"sglang_nodes": {
            "hosts": {self.rank0: {}, self.rank1: {}}}}}}))
        self.settings = tmp / "settings.json"
        self.settings.write_text(json.dumps({
            "sglang_server_extra_environment": dict(SIM_FAST), "sglang_server_stall_timeout": 5,
            "sglang_server_ready_timeout": 120, "results_dir": str(self.results), **SMALL_BENCH}))

    def argv(self, *args, inventories=()):
        out = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(self.cluster.inventory),
               "-i", str(self.group)]
        for inv in inventories:
            out += ["-i", str(inv)]
        return out + ["sweep.yml", "-e", f"@{self.settings}", *args]

    def env(self):
        return dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                    ANSIBLE_DEPRECATION_WARNINGS="False",
                    PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")

    def sweep(self, *args, inventories=()):
        return subprocess.run(self.argv(*args, inventories=inventories), cwd=REPO, env=self.env(), text=True,
                              capture_output=True, timeout=900)

    def records(self, kind="point", point=None):
        out = []
        for f in sorted(self.results.glob("*/points.jsonl"), key=lambda f: f.stat().st_mtime_ns):
            for line in f.read_text().splitlines():
                rec = json.loads(line)
                if rec["kind"] == kind and (point is None or rec.get("point") == point):
                    out.append(rec)
        return out

    def sh(self, host, script):
        return self.cluster.sh(host, script).stdout.strip()

    def unit(self, host):
        """What proves nothing restarted: the unit file's content and the running run's InvocationID."""
        return (self.sh(host, "sha256sum /etc/systemd/system/sglang.service 2>/dev/null || true"),
                self.sh(host, "systemctl show sglang.service -p InvocationID --value"))

    def exec_start(self, host):
        return self.sh(host, "systemctl show sglang.service -p ExecStart --value")


@pytest.fixture(scope="module")
def nodes(sim_clusters, tmp_path_factory):
    cluster = sim_clusters("nodes", hosts=2)
    if any(cluster.sh(h, "test -x /opt/moesweep/venvs/client/bin/python").returncode for h in cluster.names):
        provision(cluster)
    return Nodes(cluster, tmp_path_factory.mktemp("nodes"))


def test_two_nodes_become_ready_and_are_benchmarked_into_one_record_under_rank_0(nodes):
    proc = nodes.sweep("-e", f"backend={POINT}")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    recs = nodes.records(point=POINT)
    assert len(recs) == 1, [(r["host"], r["status"]) for r in recs]  # one record for the group, not one per rank
    rec = recs[0]
    assert rec["host"] == nodes.rank0 and rec["status"] == "passed", rec.get("failed_msg")
    levels = rec["benchmark"]["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 4] and all(lv["ok"] for lv in levels)
    assert rec["smoke"]["state"] == "ok"
    ready = rec["readiness"]
    assert ready["state"] == "ready" and ready["node_rank"] == 0
    assert [(r["rank"], r["host"], r["state"]) for r in ready["nodes"]] == [
        (0, nodes.rank0, "ready"), (1, nodes.rank1, "ready")]
    assert rec["nodes"]["nnodes"] == 2 and rec["nodes"]["hosts"] == [nodes.rank0, nodes.rank1]
    # each rank's unit: the group's size, its own rank, rank 0's address and the dist-init port
    addr = rec["nodes"]["dist_init_addr"]
    assert addr == rec["nodes"]["addresses"][nodes.rank0] + ":25000"
    for rank, host in enumerate((nodes.rank0, nodes.rank1)):
        line = nodes.exec_start(host)
        assert "--nnodes 2" in line and f"--node-rank {rank}" in line and f"--dist-init-addr {addr}" in line
    # rank 1 serves the dummy health server only (sglang 0.5.9 launch_dummy_health_check_server)
    journal = nodes.sh(nodes.rank1, "journalctl -u sglang.service -b --no-pager -o cat | tail -n 200")
    assert "Dummy health check server started in background thread" in journal
    assert "The server is fired up and ready to roll" not in journal
    # the record's artifacts are rank 0's: its unit and the journal of its own run
    art = next(nodes.results.glob("*/points.jsonl")).parent / nodes.rank0 / POINT
    assert "--node-rank 0" in (art / "unit.service").read_text()
    assert "The server is fired up and ready to roll!" in (art / "journal.txt").read_text()
    restores = nodes.records("restore")
    assert len(restores) == 1 and restores[0]["status"] == "passed" and restores[0]["host"] == nodes.rank0


def test_a_rerun_skips_the_passed_point_on_every_rank_and_restarts_none(nodes):
    before = {h: nodes.unit(h) for h in (nodes.rank0, nodes.rank1)}
    seen = nodes.records(point=POINT)
    proc = nodes.sweep("-e", f"backend={POINT}")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    # resume read rank 0's record on both ranks: the one record it adds is that record again, marked resumed
    # (records.resumed_record), not a run
    new = [r for r in nodes.records(point=POINT) if r not in seen]
    assert [r.get("resumed") is not None for r in new] == [True], [(r["host"], r["status"]) for r in new]
    assert new[0]["finished"] == seen[-1]["finished"] and new[0]["host"] == nodes.rank0
    assert "already passed with this configuration" in proc.stdout
    assert {h: nodes.unit(h) for h in (nodes.rank0, nodes.rank1)} == before
    assert nodes.records("restore")[-1]["status"] == "passed"


def test_restore_previous_restarts_every_rank_back_onto_what_it_ran(nodes):
    before = {h: nodes.unit(h)[0] for h in (nodes.rank0, nodes.rank1)}
    proc = nodes.sweep("-e", f"backend={OTHER}", "-e", "restore=previous", "-e", "sglang_bench_enabled=false")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert nodes.records(point=OTHER)[-1]["status"] == "passed"
    restore = nodes.records("restore")[-1]
    assert restore["status"] == "passed" and restore["action"] == "previous" and restore["host"] == nodes.rank0
    assert [(r["rank"], r["state"]) for r in restore["readiness"]["nodes"]] == [(0, "ready"), (1, "ready")]
    # both ranks back on the point they served before the sweep, restarted together
    assert {h: nodes.unit(h)[0] for h in (nodes.rank0, nodes.rank1)} == before
    for host in (nodes.rank0, nodes.rank1):
        assert f"--moe-runner-backend {POINT}" in nodes.exec_start(host)
        assert nodes.sh(host, "systemctl is-active sglang.service") == "active"


def test_rank_1_killed_while_starting_fails_the_point_with_rank_1s_cause(nodes):
    before = nodes.unit(nodes.rank1)[1]
    seen = len(nodes.records(point=OTHER))
    proc = subprocess.Popen(nodes.argv("-e", f"backend={OTHER}", "-e", "rerun=true", "-e", "restore=none",
                                       "-e", json.dumps({"sglang_server_extra_environment": {
                                           "MOESWEEP_SIM_TIME_SCALE": "0.5"}})),
                            cwd=REPO, env=nodes.env(), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    killed = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        inv = nodes.sh(nodes.rank1, "systemctl show sglang.service -p InvocationID --value")
        if inv and inv != before:
            log = nodes.sh(nodes.rank1, f"journalctl _SYSTEMD_INVOCATION_ID={inv} --no-pager -o cat")
            if "Load weight begin" in log:  # past the rendezvous, loading weights: mid-startup
                nodes.sh(nodes.rank1, "systemctl kill -s SIGKILL sglang.service")
                killed = inv
                break
        time.sleep(0.2)
    out, _ = proc.communicate(timeout=600)
    assert killed, out[-6000:]
    assert proc.returncode != 0
    recs = nodes.records(point=OTHER)[seen:]
    assert len(recs) == 1, [(r["host"], r["status"]) for r in recs]
    rec = recs[0]
    assert rec["host"] == nodes.rank0 and rec["status"] == "crashed" and rec["cause"] == "killed", rec
    ready = rec["readiness"]
    assert ready["node_rank"] == 1 and ready["node_host"] == nodes.rank1
    assert ready["decisive_line"] == "unit failed: ExecMainCode=2 ExecMainStatus=9"
    by_rank = {r["rank"]: r for r in ready["nodes"]}
    assert by_rank[1]["state"] == "crashed" and by_rank[1]["invocation_id"] == killed
    assert f"rank 1 ({nodes.rank1}) crashed (killed)" in rec["failed_msg"]


def test_rank_1_killed_during_the_benchmark_stops_the_level_at_once_naming_rank_1(nodes):
    """Rank 0 alone would wait in its next collective for the lost rank (until sglang's watchdog, or the level
    timeout of an hour); rank 0's benchmark watches rank 1's dummy health server and stops the level instead."""
    seen = len(nodes.records(point=OTHER))
    # one level of ~100 s (100 requests one after the other, 48 tokens each at the simulated 40 tok/s)
    slow = {"sglang_bench_concurrency": [1], "sglang_bench_num_prompts": [100],
            "sglang_server_extra_environment": {**SIM_FAST, **SIM_RATES}}
    proc = subprocess.Popen(nodes.argv("-e", f"backend={OTHER}", "-e", "rerun=true", "-e", "restore=none",
                                       "-e", json.dumps(slow)),
                            cwd=REPO, env=nodes.env(), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    killed_at = None
    begun = int(time.time()) - 1
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and proc.poll() is None:
        # the level runs once this run's progress document on rank 0 says so (bench_progress)
        if nodes.sh(nodes.rank0, f"find /var/lib/moesweep/runs -path '*/{OTHER}/*/progress.json' -newermt @{begun} "
                                 "-exec grep -l '\"state\": \"running\"' {} + 2>/dev/null | head -n 1"):
            time.sleep(3)
            nodes.sh(nodes.rank1, "systemctl kill -s SIGKILL sglang.service")
            killed_at = time.monotonic()
            break
        time.sleep(0.5)
    out, _ = proc.communicate(timeout=600)
    assert killed_at, out[-6000:]
    # noticed within ~15 s (3 refused probes 5 s apart), not after the level's ~100 s or its hour's timeout
    assert time.monotonic() - killed_at < 60, out[-6000:]
    assert proc.returncode != 0, out[-6000:]
    recs = nodes.records(point=OTHER)[seen:]
    assert len(recs) == 1, [(r["host"], r["status"]) for r in recs]
    rec = recs[0]
    assert rec["host"] == nodes.rank0 and rec["status"] == "crashed" and rec["cause"] == "node_lost", rec
    crash = rec["benchmark"]["crash"]
    assert crash["node_rank"] == 1 and crash["node_host"] == nodes.rank1
    assert f"rank 1 ({nodes.rank1}, " in crash["decisive_line"] and "connection refused" in crash["decisive_line"]
    (level,) = rec["benchmark"]["levels"]
    assert not level["ok"] and "stopped answering /health" in " ".join(e["error"] for e in level["errors"]), level
    assert f"rank 1 ({nodes.rank1}, " in rec["failed_msg"], rec["failed_msg"]


@pytest.fixture
def squatter(nodes):
    """A process of no unit of ours listening on rank 0's dist-init port 25001."""
    nodes.sh(nodes.rank0, "systemd-run --unit=mn-squat python3 -c 'import socket,time; s=socket.socket(); "
                          "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((\"\", 25001)); "
                          "s.listen(); time.sleep(600)'")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and ":25001" not in nodes.sh(nodes.rank0, "ss -ltn"):
        time.sleep(0.1)
    yield
    nodes.sh(nodes.rank0, "systemctl stop mn-squat.service; systemctl reset-failed mn-squat.service")


@pytest.fixture
def unreachable(nodes):
    """Rank 1 at an address where nothing answers (a third inventory source overrides its ansible_host)."""
    path = nodes.tmp / "unreachable.yml"
    path.write_text(json.dumps({"all": {"hosts": {nodes.rank1: {
        "ansible_host": "10.213.250.2", "ansible_ssh_timeout": 3, "ansible_timeout": 3}}}}))
    return path


REFUSALS = {
    "nnodes": (["-e", json.dumps({"sglang_server_extra_flags": {"nnodes": 3}})],
               "the launch flags set --nnodes 3 but node group sglang_nodes has 2 hosts",
               "drop nnodes from sglang_server_flags / sglang_server_extra_flags"),
    "duplicate_ranks": (["-e", "sglang_server_node_rank=0"],
                        "both have sglang_server_node_rank 0", "give each host of the group its own rank"),
    "dist_port_taken": (["-e", "sglang_server_dist_init_port=25001"],
                        "the dist-init port 25001", "set sglang_server_dist_init_port to a free port"),
    "unreachable": ([], "is not in the play (unreachable", "Make {rank1} reachable"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_bad_input_is_refused_before_any_unit_changes(nodes, case, request):
    args, needle, fix = REFUSALS[case]
    inventories = []
    if case == "dist_port_taken":
        request.getfixturevalue("squatter")
    if case == "unreachable":
        inventories = [request.getfixturevalue("unreachable")]
    before = {h: nodes.unit(h) for h in (nodes.rank0, nodes.rank1)}
    seen = len(nodes.records(point=POINT))
    proc = nodes.sweep("-e", f"backend={POINT}", "-e", "rerun=true", "-e", "restore=none", *args,
                       inventories=inventories)
    assert proc.returncode != 0
    recs = nodes.records(point=POINT)[seen:]
    assert len(recs) == 1, (proc.stdout[-6000:], recs)
    rec = recs[0]
    assert rec["host"] == nodes.rank0 and rec["status"] == "refused", rec
    msg = " ".join(rec["failed_msg"].split())
    assert needle in msg and fix.format(rank1=nodes.rank1) in msg, msg
    # nothing restarted anywhere: the unit files and the running runs are the ones from before
    assert {h: nodes.unit(h) for h in (nodes.rank0, nodes.rank1)} == before
