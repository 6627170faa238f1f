"""The moesweep.sweep.free strategy: it waits for a worker's result only when no host can start anything (each is
running a task, unreachable or done), its results queue wakes it on every append, and a play run with it on two hosts
goes as ansible-core's free strategy goes: the host with quick tasks does not wait for the host in a long task."""

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
    recap = dict(re.findall(r"^(slow|quick)\s+: (.*)$", proc.stdout, re.M))
    for host in ("slow", "quick"):
        assert "failed=0" in recap[host] and "rescued=1" in recap[host], recap
    ended = {}
    for host in ("slow", "quick"):
        rescued, when = (tmp_path / host).read_text().split()
        assert rescued == "True"
        ended[host] = float(when)
    # the quick host's 8 includes, its rescue and its last task all ran while the slow host slept
    assert ended["slow"] - ended["quick"] > 1.0, ended
