# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The collection's bounded poll: look, decide, sleep, until done or out of time; the clock and the sleep are
arguments, so tests drive it without waiting.

Its own file, stdlib only, so that a module that only polls files (``sglang_bench_wait``, called at every ``until``
retry) does not carry the readiness engine and its log classifier; ``readiness`` exports it too."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time


def poll_until(observe, done, timeout, interval, clock=time.monotonic, sleep=time.sleep):
    """Call ``observe()`` until ``done(observation)`` or ``timeout`` seconds passed.

    Returns (ok, last observation, elapsed seconds). At least one observation is always made.
    """
    start = clock()
    while True:
        seen = observe()
        elapsed = clock() - start
        if done(seen):
            return True, seen, elapsed
        if elapsed >= timeout:
            return False, seen, elapsed
        sleep(min(interval, max(0.0, timeout - elapsed)))
