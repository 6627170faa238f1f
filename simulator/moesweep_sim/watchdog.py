"""The scheduler's forward watchdog, as the simulated server runs it.

Real code: ``sglang/srt/utils/watchdog.py`` ``WatchdogRaw`` (the same loop in 0.5.9 and 0.5.23), created by the
scheduler through ``create_scheduler_watchdog`` (0.5.9 ``managers/scheduler_runtime_checker_mixin.py:338-364``, 0.5.23
``managers/scheduler_components/invariant_checker.py:494-527``):

* the soft one (``--soft-watchdog-timeout``, off by default) first thing in ``Scheduler.__init__`` (0.5.9
  ``scheduler.py:281``), so it also watches the model load and CUDA graph capture;
* the hard one (``--watchdog-timeout``, 300 s by default) once the model runner is up (0.5.9 ``scheduler.py:389``,
  after ``init_model_worker``); ``is_initializing`` turns false at the end of ``__init__`` (``scheduler.py:415``).

Its counter is ``Scheduler.forward_ct`` (``run_batch`` adds one before each forward); it is active while the scheduler
initializes or a batch is in flight (``cur_batch``). A daemon thread looks every ``timeout / 2`` s: active and the
counter where it was more than ``timeout`` s ago, it fires. While inactive the time of the last change is kept,
as the real loop keeps it. What firing logs and does is the server's (``sglang_server.Server.watchdog_fired``): the
hard one then waits 5 s and SIGQUITs its parent; the soft one starts over and fires again while the scheduler stays
stuck. Timeouts are the server's seconds, scaled by ``MOESWEEP_SIM_TIME_SCALE`` as every other phase."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class ForwardWatchdog:
    def __init__(self, timeout: float, scale: float, get_counter: Callable[[], int], is_active: Callable[[], bool],
                 fire: Callable[[ForwardWatchdog], None], soft: bool = False,
                 clock: Callable[[], float] = time.perf_counter, sleep: Callable[[float], None] = time.sleep):
        self.timeout = timeout  # as configured: what the timeout line prints
        self.period = timeout * scale  # what the thread waits
        self.get_counter = get_counter
        self.is_active = is_active
        self.fire = fire
        self.soft = soft
        self.clock = clock
        self.sleep = sleep

    def start(self) -> ForwardWatchdog:
        name = "soft-watchdog" if self.soft else "watchdog"
        threading.Thread(target=self._thread, name=name, daemon=True).start()
        return self

    def _thread(self):
        while True:
            self.watch_once()
            self.fire(self)

    def watch_once(self):
        """Return when the watchdog fires (WatchdogRaw._watchdog_once up to its ``break``)."""
        last_counter = 0
        last_time = self.clock()
        while True:
            now = self.clock()
            if self.is_active():
                counter = self.get_counter()
                if counter == last_counter:
                    if now > last_time + self.period:
                        return
                else:
                    last_counter, last_time = counter, now
            self.sleep(self.period / 2)
