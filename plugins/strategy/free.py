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
  - It relies on internal names of ansible-core's strategies (the results queue and its lock, the blocked hosts, the
    play iterator's peek; from 2.21 the queue of the workers' inventory requests, which wakes it too). Where the running
    ansible-core's differ, it warns once and runs exactly as ansible-core's C(free).
version_added: "0.1.0"
author: moesweep contributors (!UNKNOWN)
"""

import collections
import inspect
import queue
import threading

from ansible.executor.play_iterator import PlayIterator
from ansible.plugins.strategy.free import StrategyModule as FreeStrategyModule
from ansible.release import __version__ as ansible_version
from ansible.utils.display import Display

display = Display()

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


class _SignallingQueue(queue.Queue):
    """ansible-core 2.21's queue of the workers' inventory requests (add_host, group_by): a worker waits until the
    strategy's thread serves its request, in _process_pending_results, so each put sets ``event`` too."""

    def __init__(self, event):
        queue.Queue.__init__(self)
        self.event = event

    def put(self, item, block=True, timeout=None):
        queue.Queue.put(self, item, block, timeout)
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


def _parameters(function):
    try:
        return set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return set()


def internals_differ(strategy):
    """Why the idle wait cannot run on this ansible-core's free strategy (its internal names are not those of 2.19 to
    2.21), or None when it can. ``strategy`` is a constructed one, before its first task."""
    tqm = getattr(strategy, "_tqm", None)
    checks = (
        ("_results is a collections.deque", type(getattr(strategy, "_results", None)) is collections.deque),
        ("_results_lock is a lock", hasattr(getattr(strategy, "_results_lock", None), "__enter__")),
        ("_pending_results is an int", isinstance(getattr(strategy, "_pending_results", None), int)),
        ("_blocked_hosts is a dict", isinstance(getattr(strategy, "_blocked_hosts", None), dict)),
        ("_tqm._unreachable_hosts is a dict", isinstance(getattr(tqm, "_unreachable_hosts", None), dict)),
        ("get_hosts_left(iterator)", callable(getattr(strategy, "get_hosts_left", None))),
        ("_rpc_queue, where present, is a queue.Queue",
         type(getattr(strategy, "_rpc_queue", queue.Queue())) is queue.Queue),
        ("PlayIterator.get_next_task_for_host(host, peek)",
         {"host", "peek"} <= _parameters(PlayIterator.get_next_task_for_host)),
        ("_process_pending_results(iterator, one_pass, max_passes)",
         {"iterator", "one_pass", "max_passes"} <= _parameters(FreeStrategyModule._process_pending_results)),
    )
    failed = [what for what, ok in checks if not ok]
    return "; ".join(failed) if failed else None


class StrategyModule(FreeStrategyModule):

    # set by __init__ (or on the first error) when this ansible-core's internals differ: it then runs as core's free
    _fallback = None

    def __init__(self, tqm):
        super(StrategyModule, self).__init__(tqm)
        self._news = threading.Event()
        self._max_wait = MAX_WAIT_S
        differ = internals_differ(self)
        if differ:
            self._fall_back("no " + differ)
            return
        # no task is queued yet, so no result or request can have arrived: the results thread appends to this one,
        # and the workers' inventory requests go to the other, from now on
        with self._results_lock:
            self._results = _SignallingDeque(self._news)
        if hasattr(self, "_rpc_queue"):
            self._rpc_queue = _SignallingQueue(self._news)

    def _fall_back(self, why):
        self._fallback = why
        display.warning("moesweep.sweep.free: ansible-core %s's strategy internals differ from those it was written "
                        "for (%s): it runs as ansible-core's free strategy, reading every host's state every "
                        "internal_poll_interval" % (ansible_version, why))

    def _idle(self, iterator):
        """Whether nothing but a worker's result or request can let anything happen now."""
        rpc = getattr(self, "_rpc_queue", None)
        return (self._pending_results > 0 and not self._results and (rpc is None or rpc.empty())
                and all_busy(self.get_hosts_left(iterator), self._blocked_hosts, self._tqm._unreachable_hosts,
                             lambda host: iterator.get_next_task_for_host(host, peek=True)[1]))

    def _process_pending_results(self, iterator, one_pass=False, max_passes=None):
        if self._fallback is None:
            try:
                if self._idle(iterator):
                    self._news.wait(self._max_wait)
            except (AttributeError, TypeError) as exc:  # an internal that differs only at run time
                self._fall_back("%s: %s" % (type(exc).__name__, exc))
            # cleared before the results are read: one that arrives after this sets it again, so none waits unseen
            self._news.clear()
        parent = super(StrategyModule, self)
        return parent._process_pending_results(iterator, one_pass=one_pass, max_passes=max_passes)
