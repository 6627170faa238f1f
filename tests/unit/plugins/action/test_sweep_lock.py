"""The sweep_lock action: a refresh reaches the host only once half of the lease is gone; taking, releasing and
stealing always do."""

from __future__ import annotations

# isort: split
from ansible_collections.moesweep.sweep.plugins.action import sweep_lock as action

OWNER = {"controller": "laptop", "pid": 4242, "sweep_id": "sweep-3f2a9c1b0d4e", "user": "alice",
         "since": 1000.0, "expires": 1000.0 + 21600}


def test_refresh_waits_for_half_the_lease():
    refresh = {"owner": OWNER, "lease": 21600}
    assert action.refresh_due(refresh, now=1000.0 + 60) is False
    assert action.refresh_due(refresh, now=1000.0 + 10799) is False
    assert action.refresh_due(refresh, now=1000.0 + 10800) is True
    assert action.refresh_due(refresh, now=1000.0 + 30000) is True  # expired: the host decides


def test_take_release_and_steal_always_reach_the_host():
    bare = {k: v for k, v in OWNER.items() if k not in ("since", "expires")}
    assert action.refresh_due({"owner": bare, "lease": 21600}, now=1000.0) is True
    assert action.refresh_due({"owner": OWNER, "state": "released"}, now=1000.0) is True
    assert action.refresh_due({"owner": OWNER, "steal": True}, now=1000.0) is True
    assert action.refresh_due({"owner": dict(OWNER, expires="soon"), "lease": 21600}, now=1000.0) is True
    assert action.refresh_due({"owner": OWNER}, now=1000.0) is True  # no lease given: the module's own default


def test_a_process_we_may_not_signal_is_alive(monkeypatch):
    """Another user's sweep on the same controller: kill(pid, 0) fails with EPERM, which means alive (#37 item 3)."""

    def denied(pid, sig):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(action.os, "kill", denied)
    assert action.pid_alive(1234) is True


def test_only_a_gone_holder_of_this_very_controller_is_taken_over():
    me = {"id": "new", "machine": "m1", "pid": 10}
    assert action.holder_gone({"id": "old", "machine": "m1", "pid": 2 ** 22 + 12345}, me) is True
    # same hostname, another machine: never judged from here
    assert action.holder_gone({"id": "old", "machine": "m2", "pid": 2 ** 22 + 12345, "controller": "localhost"},
                              dict(me, controller="localhost")) is False
    # an older lock without a machine id is never taken over from its hostname alone
    assert action.holder_gone({"id": "old", "pid": 2 ** 22 + 12345, "controller": "localhost"},
                              dict(me, controller="localhost")) is False
    import os

    assert action.holder_gone({"id": "old", "machine": "m1", "pid": os.getpid(),
                               "pid_start": action.process_start(os.getpid())}, me) is False
    # the pid was reused by another process since: its start time differs
    assert action.holder_gone({"id": "old", "machine": "m1", "pid": os.getpid(), "pid_start": 1}, me) is True
