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
