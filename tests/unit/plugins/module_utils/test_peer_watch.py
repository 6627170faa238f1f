"""Watching the other nodes of a multi-node server while rank 0 is benchmarked: each node's dummy health server,
probed every interval, lost after consecutive failures, and a real server that goes away."""

import http.server
import socket
import threading

from ansible_collections.moesweep.sweep.plugins.module_utils import peer_watch, readiness

PEERS = [{"rank": 1, "host": "node-b", "address": "10.0.0.3", "port": 30000},
         {"rank": 2, "host": "node-c", "address": "10.0.0.4", "port": 30000}]


class Answers:
    """A probe that answers from a script per URL and counts its calls."""

    def __init__(self, script):
        self.script = {url: list(answers) for url, answers in script.items()}
        self.calls = []

    def __call__(self, url, timeout):
        self.calls.append(url)
        answers = self.script.get(url) or [200]
        return answers.pop(0) if len(answers) > 1 else answers[0]


def test_urls_name_each_nodes_health_endpoint_and_bracket_ipv6():
    assert peer_watch.peer_url(PEERS[0]) == "http://10.0.0.3:30000/health"
    assert peer_watch.peer_url({"address": "fd00::3", "port": 30000}) == "http://[fd00::3]:30000/health"
    assert peer_watch.describe(PEERS[0]) == "rank 1 (node-b, 10.0.0.3:30000)"


def test_nodes_that_answer_are_never_lost_and_are_probed_once_per_interval():
    probe = Answers({})
    watch = peer_watch.PeerWatch(PEERS, probe, interval=5, failures=3)
    for t in (0.0, 1.0, 4.9, 5.0, 9.9, 10.0):
        assert watch.check(t) is None
    assert len(probe.calls) == 3 * len(PEERS)  # at 0, 5 and 10


def test_a_node_is_lost_after_consecutive_failures_only():
    b = peer_watch.peer_url(PEERS[0])
    # one refused answer between good ones is not a loss; three in a row are
    probe = Answers({b: [200, "refused", 200, "refused", "refused", "refused"]})
    watch = peer_watch.PeerWatch(PEERS, probe, interval=5, failures=3)
    verdicts = [watch.check(t * 5.0) for t in range(6)]
    assert verdicts[:5] == [None] * 5
    lost = verdicts[5]
    assert lost["node_rank"] == 1 and lost["node_host"] == "node-b" and lost["cause"] == "node_lost"
    assert lost["state"] == "crashed" and lost["answers"] == ["refused"] * 3
    assert "rank 1 (node-b, 10.0.0.3:30000) stopped answering /health" in lost["decisive_line"]
    assert "connection refused: its server process is gone" in lost["decisive_line"]
    # once lost it stays lost, without probing again
    calls = len(probe.calls)
    assert watch.check(100.0) is lost and len(probe.calls) == calls


def test_a_node_that_does_not_answer_is_named_as_a_host_or_network_loss():
    c = peer_watch.peer_url(PEERS[1])
    watch = peer_watch.PeerWatch(PEERS, Answers({c: ["timeout"]}), interval=1, failures=2)
    assert watch.check(0) is None
    lost = watch.check(1)
    assert lost["node_rank"] == 2 and "no answer: its host or network is gone" in lost["decisive_line"]


def test_no_peers_watch_nothing():
    probe = Answers({})
    watch = peer_watch.PeerWatch([], probe)
    assert watch.check(0) is None and probe.calls == []


class _Health(http.server.BaseHTTPRequestHandler):
    """What sglang's dummy health server answers (srt/utils/common.py launch_dummy_health_check_server)."""

    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(200 if self.path in ("/ping", "/health", "/health_generate") else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_real_health_server_that_goes_away_is_lost_with_refused_connections():
    httpd = http.server.HTTPServer(("127.0.0.1", 0), _Health)
    port = httpd.server_address[1]
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    peer = {"rank": 1, "host": "local", "address": "127.0.0.1", "port": port}
    watch = peer_watch.PeerWatch([peer], lambda url, timeout: readiness.probe_health(url, None, timeout),
                                 interval=0, failures=2, timeout=2)
    assert watch.check(0) is None and watch.check(1) is None
    httpd.shutdown()
    httpd.server_close()
    # nothing listens on the port any more (what a node whose process ended leaves)
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0
    assert watch.check(2) is None
    lost = watch.check(3)
    assert lost and lost["answers"] == ["refused", "refused"]
