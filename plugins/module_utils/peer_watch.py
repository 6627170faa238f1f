# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Whether the other nodes of a multi-node server are still there while rank 0 is benchmarked.

Every node of rank >= 1 serves sglang's dummy health server on the server's ``--host``/``--port`` once its
schedulers are up: ``GET /health`` answers a bare 200, without authentication, from a daemon thread of the node's
main process, which returns only when its schedulers end (sglang 0.5.9 ``srt/entrypoints/engine.py:1040-1061``,
``srt/utils/common.py:2656-2712``). A node whose process is gone refuses the connection; a node whose host is gone
does not answer. Rank 0 notices neither by itself: its next collective waits for the lost rank until sglang's
forward watchdog (``--watchdog-timeout``, 300 s by default, ``srt/utils/watchdog.py``) ends it, and meanwhile a
benchmark level only waits. The watch asks each node's ``/health`` every few seconds; a node that fails several
times in a row is lost, and the level is stopped with that said.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DEFAULT_INTERVAL_S = 5.0
# consecutive failed answers that make a node lost: one refused or slow answer is not enough (a node's uvicorn
# restarts nothing, but a probe can meet a full backlog); three at 5 s apart notice a lost node within ~15 s
DEFAULT_FAILURES = 3
DEFAULT_TIMEOUT_S = 3.0


def peer_url(peer):
    """The ``/health`` URL of a node, ``peer`` a dict with ``address`` and ``port`` (an IPv6 address bracketed)."""
    address = str(peer["address"])
    if ":" in address and not address.startswith("["):
        address = "[%s]" % address
    return "http://%s:%d/health" % (address, int(peer["port"]))


def describe(peer):
    """How a node is named in a message: ``rank 1 (host-b, 10.0.0.3:30000)``."""
    return "rank %s (%s, %s:%s)" % (peer.get("rank"), peer.get("host") or peer["address"], peer["address"],
                                    peer["port"])


class PeerWatch(object):
    """Probe every node's ``/health`` once per ``interval`` seconds (``probe(url, timeout)``: an HTTP status code,
    or ``refused`` / ``timeout`` / ``error`` as ``readiness.probe_health`` returns). ``check(now)`` returns the
    first node that failed ``failures`` probes in a row, as a dict (the peer, its last answers, a message), or None
    while every node answers; once a node is lost it keeps returning that node."""

    def __init__(self, peers, probe, interval=DEFAULT_INTERVAL_S, failures=DEFAULT_FAILURES,
                 timeout=DEFAULT_TIMEOUT_S):
        self.peers = [dict(p) for p in peers or []]
        self.probe = probe
        self.interval = float(interval)
        self.failures = max(1, int(failures))
        self.timeout = float(timeout)
        self._answers = dict((i, []) for i in range(len(self.peers)))
        self._next = None
        self.lost = None

    def check(self, now):
        if self.lost is not None or not self.peers:
            return self.lost
        if self._next is not None and now < self._next:
            return None
        self._next = now + self.interval
        for i, peer in enumerate(self.peers):
            answer = self.probe(peer_url(peer), self.timeout)
            answers = self._answers[i]
            if answer == 200:
                del answers[:]
                continue
            answers.append(answer)
            if len(answers) >= self.failures:
                self.lost = lost_peer(peer, answers, self.interval)
                return self.lost
        return None


def lost_peer(peer, answers, interval):
    """What the record says of a node that stopped answering: which rank, its answers, and the verdict."""
    last = answers[-1]
    why = {"refused": "connection refused: its server process is gone",
           "timeout": "no answer: its host or network is gone, or its process hangs",
           "error": "no answer: its host or network is gone"}.get(last, "HTTP %s" % last)
    line = ("%s stopped answering /health during the benchmark, %d times in a row %.0f s apart (%s); rank 0 waits "
            "in its next collective until sglang's watchdog ends it, so the level was stopped"
            % (describe(peer), len(answers), interval, why))
    return {"state": "crashed", "cause": "node_lost", "phase": "serving", "node_rank": peer.get("rank"),
            "node_host": peer.get("host"), "answers": [str(a) for a in answers], "decisive_line": line,
            "after_ready": True}
