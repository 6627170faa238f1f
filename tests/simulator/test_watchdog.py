"""The simulated forward watchdog's loop (moesweep_sim/watchdog.py) against sglang's WatchdogRaw._watchdog_once:
checks every timeout / 2, fires once the counter stood still for more than the timeout while active, keeps the time
of the last change while inactive."""

from __future__ import annotations

from moesweep_sim.watchdog import ForwardWatchdog


class Clock:
    def __init__(self):
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, s: float):
        self.t += s


def watchdog(clock, counter, active, timeout=300.0, scale=1.0):
    return ForwardWatchdog(timeout, scale, get_counter=counter, is_active=active, fire=lambda wd: None,
                           clock=clock.now, sleep=clock.sleep)


def test_a_batch_stuck_from_the_start_fires_between_one_and_one_and_a_half_timeouts():
    clock = Clock()
    watchdog(clock, lambda: 0, lambda: True).watch_once()
    assert 300.0 < clock.t <= 450.0


def test_a_moving_counter_never_fires_and_a_stuck_one_fires_after_its_last_change_was_seen():
    clock = Clock()
    stuck_at = 3000.0
    watchdog(clock, lambda: int(min(clock.t, stuck_at)) + 1, lambda: True).watch_once()
    assert stuck_at + 300.0 < clock.t <= stuck_at + 450.0 + 150.0


def test_idle_is_not_watched_and_a_later_stuck_batch_counts_from_the_last_change():
    clock = Clock()
    # one forward at t=0, idle until t=10000, then a batch that never advances the counter (forward_ct 2)
    counter = lambda: 1 if clock.t < 10000 else 2  # noqa: E731
    active = lambda: clock.t < 1 or clock.t >= 10000  # noqa: E731
    watchdog(clock, counter, active).watch_once()
    assert 10000 + 300.0 < clock.t <= 10000 + 450.0 + 150.0


def test_the_time_scale_shortens_the_wait_not_the_configured_timeout():
    clock = Clock()
    wd = watchdog(clock, lambda: 0, lambda: True, timeout=300.0, scale=0.1)
    wd.watch_once()
    assert 30.0 < clock.t <= 45.0 and wd.timeout == 300.0
