"""The moesweep.sweep.free strategy: it waits for a worker's result only when no host can start anything (each is
running a task, unreachable or done), its results queue (and ansible-core 2.21's queue of the workers' inventory
requests) wakes it on every append, where ansible-core's internals differ it runs as ansible-core's free, and a play
run with it on two hosts goes as ansible-core's free strategy goes: the host with quick tasks does not wait for the
host in a long task."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

# isort: split
from ansible_collections.moesweep.sweep.plugins.strategy import free

REPO = Path(__file__).resolve().parents[4]


class Host:
    def __init__(self, name):
        self.name = name

    def get_name(self):
        return self.name


def test_all_busy_when_every_host_runs_a_task_is_unreachable_or_is_done():
    hosts = [Host("a"), Host("b"), Host("c")]
    tasks = {"a": "task", "b": "task", "c": None}
    assert free.all_busy(hosts, {"a": True}, {"b": True}, lambda h: tasks[h.name])


def test_not_busy_when_a_host_has_a_task_to_start():
    hosts = [Host("a"), Host("b")]
    tasks = {"a": "task", "b": "task"}
    assert not free.all_busy(hosts, {"a": True}, {}, lambda h: tasks[h.name])
    # a blocked host is not asked for its next task (its state moves only with its result)
    asked = []
    assert free.all_busy(hosts, {"a": True, "b": True}, {}, lambda h: asked.append(h) or "task")
    assert asked == []


def test_the_results_queue_sets_the_event_on_every_append():
    event = threading.Event()
    queue = free._SignallingDeque(event)
    assert not event.is_set()
    queue.append("result")
    assert event.is_set() and queue.popleft() == "result"
    event.clear()
    waiter = threading.Thread(target=lambda: (time.sleep(0.05), queue.append("later")))
    waiter.start()
    assert event.wait(5)
    waiter.join()


class Iterator:
    def __init__(self, tasks):
        self.tasks = tasks

    def get_next_task_for_host(self, host, peek=False):
        assert peek
        return None, self.tasks[host.name]


def strategy(monkeypatch, hosts, blocked, max_wait):
    """A moesweep.sweep.free strategy without a task queue manager: its waiting half, over ansible-core's
    _process_pending_results stubbed to record when it ran (it reads the results the strategy was woken for)."""
    calls = []
    monkeypatch.setattr(free.FreeStrategyModule, "_process_pending_results",
                        lambda self, iterator, one_pass=False, max_passes=None: calls.append(time.monotonic()) or [])
    s = free.StrategyModule.__new__(free.StrategyModule)
    s._news = threading.Event()
    s._results = free._SignallingDeque(s._news)
    s._pending_results = 1
    s._blocked_hosts = blocked
    s._tqm = type("TQM", (), {"_unreachable_hosts": {}})()
    s._max_wait = max_wait
    s.get_hosts_left = lambda iterator: hosts
    return s, calls


def test_a_busy_strategy_wakes_when_a_result_arrives_not_at_its_bound(monkeypatch):
    hosts = [Host("a"), Host("b")]
    s, calls = strategy(monkeypatch, hosts, {"a": True}, max_wait=30)  # b is done: nothing can start
    arrived = []
    threading.Timer(0.2, lambda: (arrived.append(time.monotonic()), s._results.append("result"))).start()
    t0 = time.monotonic()
    s._process_pending_results(Iterator({"a": "task", "b": None}))
    assert arrived and calls[0] >= arrived[0] and calls[0] - t0 < 10  # woken by the result, not after 30 s
    assert not s._news.is_set()  # cleared before the results were read


def test_a_strategy_with_a_host_to_start_does_not_wait(monkeypatch):
    s, calls = strategy(monkeypatch, [Host("a"), Host("b")], {"a": True}, max_wait=30)
    t0 = time.monotonic()
    s._process_pending_results(Iterator({"a": "task", "b": "task"}))  # b has a task to start
    assert calls and calls[0] - t0 < 10


def test_a_workers_inventory_request_wakes_a_busy_strategy_and_one_queued_is_served_without_waiting(monkeypatch):
    s, calls = strategy(monkeypatch, [Host("a")], {"a": True}, max_wait=30)
    s._rpc_queue = free._SignallingQueue(s._news)
    threading.Timer(0.2, lambda: s._rpc_queue.put("add_host")).start()
    t0 = time.monotonic()
    s._process_pending_results(Iterator({"a": "task"}))  # ansible-core's part (stubbed) would serve the request
    assert calls and calls[0] - t0 < 10
    t0 = time.monotonic()
    s._process_pending_results(Iterator({"a": "task"}))  # still queued: no wait
    assert calls[1] - t0 < 10


def test_where_core_internals_differ_it_warns_once_and_runs_as_cores_free(monkeypatch):
    def core_init(self, tqm):  # a core whose strategy keeps its blocked hosts under another name
        self._tqm, self._results, self._pending_results = tqm, free.collections.deque(), 1
        self._results_lock, self._blocked = threading.Lock(), {}

    warnings = []
    monkeypatch.setattr(free.FreeStrategyModule, "__init__", core_init)
    monkeypatch.setattr(free.display, "warning", warnings.append)
    s = free.StrategyModule(type("TQM", (), {"_unreachable_hosts": {}})())
    assert s._fallback == "no _blocked_hosts is a dict"
    assert len(warnings) == 1 and "runs as ansible-core's free strategy" in warnings[0]
    assert type(s._results) is free.collections.deque  # left as core made it
    calls = []
    monkeypatch.setattr(free.FreeStrategyModule, "_process_pending_results",
                        lambda self, iterator, one_pass=False, max_passes=None: calls.append(1) or [])
    s._max_wait = 30
    t0 = time.monotonic()
    s._process_pending_results(Iterator({}))  # would raise on the missing names, or wait, were it not core's free
    assert calls == [1] and time.monotonic() - t0 < 10 and len(warnings) == 1


def test_an_internal_that_differs_only_at_run_time_falls_back_too(monkeypatch):
    s, calls = strategy(monkeypatch, [Host("a")], {"a": True}, max_wait=30)
    warnings = []
    monkeypatch.setattr(free.display, "warning", warnings.append)
    del s.get_hosts_left
    s._process_pending_results(Iterator({"a": "task"}))
    s._process_pending_results(Iterator({"a": "task"}))
    assert len(calls) == 2 and len(warnings) == 1 and "AttributeError" in s._fallback


def test_the_running_ansible_core_has_the_internals_it_relies_on():
    # a constructed strategy needs a task queue manager: the play below runs one and says no word of a fallback;
    # here the names that the classes show
    assert {"host", "peek"} <= free._parameters(free.PlayIterator.get_next_task_for_host)
    assert {"iterator", "one_pass", "max_passes"} <= free._parameters(free.FreeStrategyModule._process_pending_results)


def test_a_result_already_queued_is_read_without_waiting(monkeypatch):
    s, calls = strategy(monkeypatch, [Host("a")], {"a": True}, max_wait=30)
    s._results.append("result")
    t0 = time.monotonic()
    s._process_pending_results(Iterator({"a": "task"}))
    assert calls and calls[0] - t0 < 10


PLAY = """
- hosts: all
  gather_facts: false
  strategy: moesweep.sweep.free
  tasks:
    - name: A long task on one host
      ansible.builtin.command: sleep 3
      when: inventory_hostname == 'slow'
    - name: Quick tasks, included in a loop
      ansible.builtin.include_tasks: quick.yml
      loop: "{{ range(8) | list }}"
    - name: A failure that a rescue catches
      block:
        - ansible.builtin.fail:
            msg: expected
      rescue:
        - ansible.builtin.set_fact:
            rescued: true
    - name: Note when this host ended
      ansible.builtin.copy:
        content: "{{ rescued }} {{ now().timestamp() }}"
        dest: "{{ out }}/{{ inventory_hostname }}"
        mode: "0644"
"""

QUICK = """
- ansible.builtin.set_fact:
    quick: "{{ item }}"
- ansible.builtin.group_by:
    key: "quick_{{ item }}"
"""


def test_a_play_runs_as_with_free_and_the_quick_host_does_not_wait_for_the_slow_one(tmp_path):
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "quick.yml").write_text(QUICK)
    (tmp_path / "hosts.ini").write_text(
        "slow ansible_connection=local\nquick ansible_connection=local\n"
        f"[all:vars]\nansible_python_interpreter={sys.executable}\n")
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp_path / "hosts.ini"),
                           "-e", f"out={tmp_path}", str(tmp_path / "play.yml")], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "internals differ" not in proc.stdout + proc.stderr  # the idle wait ran, on this ansible-core
    recap = dict(re.findall(r"^(slow|quick)\s+: (.*)$", proc.stdout, re.M))
    for host in ("slow", "quick"):
        assert "failed=0" in recap[host] and "rescued=1" in recap[host], recap
    ended = {}
    for host in ("slow", "quick"):
        rescued, when = (tmp_path / host).read_text().split()
        assert rescued == "True"
        ended[host] = float(when)
    # the quick host's 8 includes (each with a group_by: from ansible-core 2.21 a request the strategy's thread serves),
    # its rescue and its last task all ran while the slow host slept
    assert ended["slow"] - ended["quick"] > 1.0, ended
