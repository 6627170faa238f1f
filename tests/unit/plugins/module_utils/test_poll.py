"""The collection's bounded poll (module_utils/poll.py), on a fake clock."""

from __future__ import annotations

from ansible_collections.moesweep.sweep.plugins.module_utils import readiness
from ansible_collections.moesweep.sweep.plugins.module_utils.poll import poll_until


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_poll_until_bounded_and_one_observation_at_least():
    clock = Clock()
    seen = []

    def sleep(s):
        clock.now += s

    ok, last, elapsed = poll_until(lambda: seen.append(1) or len(seen), lambda n: n >= 3, 10, 0.5, clock, sleep)
    assert ok and last == 3 and elapsed == 1.0
    ok, last, elapsed = poll_until(lambda: 0, lambda n: n > 0, 2.0, 0.5, clock, sleep)
    assert not ok and elapsed == 2.0
    ok, last, elapsed = poll_until(lambda: 5, lambda n: n > 0, 0.0, 0.5, clock, sleep)
    assert ok and elapsed == 0.0


def test_readiness_exports_the_same_poll():
    assert readiness.poll_until is poll_until
