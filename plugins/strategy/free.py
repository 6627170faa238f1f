# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: free
short_description: The free strategy, idle while every host's task runs
description:
  - ansible-core's C(free) strategy (each host runs its tasks as fast as it can, without waiting for the other hosts),
    unchanged but for how it waits - when every host is busy with a task in a worker and no result has come back, it
    sleeps until a worker's result arrives (at most 50 ms), instead of reading every host's state again every
    C(internal_poll_interval) (1 ms by default).
  - A sweep's tasks are mostly long module calls (readiness, the benchmark), and ansible-core's loop cost the
    controller about 10 CPU-seconds in a 1-host, 4-point sweep of about 105 s (C(bench/sweep_wall.py) - the
    controller's CPU-seconds 32.6 to 36.1 with C(free), 22.9 to 27.4 with this one, six runs each), on the same cores
    as the simulated hosts of the tests and the benchmarks. A result is handled as soon as it arrives, so no task
    starts later than with C(free).
  - Used by C(playbooks/sweep.yml) on hosts that are not a node group (a node group runs C(linear)).
version_added: "0.1.0"
author: moesweep contributors (!UNKNOWN)
"""

import collections
import threading

from ansible.plugins.strategy.free import StrategyModule as FreeStrategyModule

# The longest wait for a result while every host is busy: a bound, should a host become runnable some other way.
MAX_WAIT_S = 0.05


class _SignallingDeque(collections.deque):
    """The strategy's results queue: the results thread appends each worker's result and sets ``event``."""

    def __init__(self, event):
        super(_SignallingDeque, self).__init__()
        self.event = event

    def append(self, item):
        super(_SignallingDeque, self).append(item)
        self.event.set()


def all_busy(hosts, blocked, unreachable, next_task):
    """Whether no host can start anything now: each is running a task (``blocked``), unreachable, or has no task left
    (``next_task(host)`` is None). Only a worker's result can change that."""
    for host in hosts:
        name = host.get_name()
        if blocked.get(name, False) or unreachable.get(name, False):
            continue
        if next_task(host) is not None:
            return False
    return True


class StrategyModule(FreeStrategyModule):

    def __init__(self, tqm):
        super(StrategyModule, self).__init__(tqm)
        self._news = threading.Event()
        # no task is queued yet, so no result can have arrived: the results thread appends to this one from now on
        with self._results_lock:
            self._results = _SignallingDeque(self._news)
        self._max_wait = MAX_WAIT_S

    def _process_pending_results(self, iterator, one_pass=False, max_passes=None):
        if self._pending_results > 0 and not self._results and all_busy(
                self.get_hosts_left(iterator), self._blocked_hosts, self._tqm._unreachable_hosts,
                lambda host: iterator.get_next_task_for_host(host, peek=True)[1]):
            self._news.wait(self._max_wait)
        # cleared before the results are read: one that arrives after this sets it again, so none waits unseen
        self._news.clear()
        parent = super(StrategyModule, self)
        return parent._process_pending_results(iterator, one_pass=one_pass, max_passes=max_passes)
