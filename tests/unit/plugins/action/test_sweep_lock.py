"""The sweep_lock action: a refresh reaches the host only once half of the lease is gone; taking, releasing and
stealing always do."""

from __future__ import annotations

import os

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
    ns = action.pid_namespace(os.getpid())
    me = {"id": "new", "machine": "m1", "pid": 10, "pidns": ns}
    assert action.holder_gone({"id": "old", "machine": "m1", "pid": 2 ** 22 + 12345, "pidns": ns}, me) is True
    # same hostname, another machine: never judged from here
    assert action.holder_gone({"id": "old", "machine": "m2", "pid": 2 ** 22 + 12345, "controller": "localhost"},
                              dict(me, controller="localhost")) is False
    # an older lock without a machine id is never taken over from its hostname alone
    assert action.holder_gone({"id": "old", "pid": 2 ** 22 + 12345, "controller": "localhost"},
                              dict(me, controller="localhost")) is False
    assert action.holder_gone({"id": "old", "machine": "m1", "pid": os.getpid(), "pidns": ns,
                               "pid_start": action.process_start(os.getpid())}, me) is False
    # the pid was reused by another process since: its start time differs
    assert action.holder_gone({"id": "old", "machine": "m1", "pid": os.getpid(), "pid_start": 1, "pidns": ns},
                              me) is True


def test_a_holder_in_another_pid_namespace_is_never_judged_gone_from_here():
    """Two containers of one image share /etc/machine-id and the boot: the holder's pid, dead or another process
    here, means nothing in this namespace (#49); a lock without its namespace (an older moesweep's) neither."""
    ns = action.pid_namespace(os.getpid())
    assert ns and ns.startswith("pid:[")
    me = {"id": "new", "machine": "m1", "boot": "b1", "pid": 10, "pidns": ns}
    held = {"id": "old", "machine": "m1", "boot": "b1", "pid": 2 ** 22 + 12345}
    assert action.holder_gone(dict(held, pidns="pid:[4026532999]"), me) is False
    assert action.holder_gone(held, me) is False
    assert action.holder_gone(dict(held, pidns=ns), me) is True
    # another boot is over whatever its namespace
    assert action.holder_gone(dict(held, boot="b0", pidns="pid:[4026532999]"), me) is True
