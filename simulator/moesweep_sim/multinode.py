"""Multi-node serving (``--nnodes N --node-rank i --dist-init-addr HOST:PORT``) of the simulated server.

What the real code does (0.5.9 https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/entrypoints/engine.py
``_launch_subprocesses`` and model_executor/model_runner.py ``init_torch_distributed``; 0.5.23 engine.py and
distributed/bootstrap.py ``init_parallel_runtime``):

* every node runs the schedulers of its share of the TP ranks; ``init_distributed_environment`` uses
  ``tcp://<dist-init-addr>``: torch's TCPStore, whose server runs in global rank 0 and listens on the dist-init
  port, while every other rank connects to it.  ``init_process_group`` returns only when all ``world_size``
  ranks have joined, so a missing node leaves the others hanging right after "Init torch distributed begin."
  (0.5.9) / "Init parallel begin." (0.5.23), with nothing more in the log until torch's rendezvous timeout
  (--dist-timeout; torch's default otherwise) -- init_process_group waits for the whole world to rendezvous
  (https://github.com/pytorch/pytorch/issues/49846);
* node 0 then runs the tokenizer manager, detokenizer and the HTTP server as on one node;
* nodes >= 1 wait for their schedulers, then ``launch_dummy_health_check_server(host, port, enable_metrics)``
  (sglang/srt/utils/common.py): a FastAPI app with only GET /ping, /health and /health_generate, each a bare
  200, plus /metrics with --enable-metrics, served by uvicorn at log level "warning" (no start-up or access
  lines), and log "Dummy health check server started in background thread at HOST:PORT"; 0.5.23 also logs a
  warning on SIGTERM and waits for rank 0's ShutdownReq broadcast.

The simulator's rendezvous is a plain TCP exchange on the dist-init address standing for the TCPStore: node 0
listens there and waits for nodes 1..N-1 to say hello; the connections stay open, so when a node goes away
node 0's next batch hangs (a collective that never completes: health checks then fail after
SGLANG_HEALTH_CHECK_TIMEOUT), and node 0's orderly 0.5.23 shutdown tells the others to exit.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

from . import templates as T
from .http_api import DUMMY_ROUTES, Handler, HTTPServer
from .log import Log


def _split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


class Rendezvous:
    def __init__(self, server):
        self.server = server
        self.peers: dict[int, socket.socket] = {}
        self.broken = threading.Event()
        self.leader: socket.socket | None = None

    # ------------------------------------------------------------ node 0
    def serve(self, host: str, port: int):
        s = self.server
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("", port))  # the TCPStore server listens on every address of the node
        ls.listen(64)
        while len(self.peers) < s.nnodes - 1:
            conn, _ = ls.accept()
            line = _readline(conn)
            if line.startswith("rank "):
                self.peers[int(line.split()[1])] = conn
            else:
                conn.close()
        for conn in self.peers.values():
            conn.sendall(b"ok\n")
        self.listener = ls
        for rank, conn in self.peers.items():
            threading.Thread(target=self._watch, args=(rank, conn), daemon=True).start()

    def _watch(self, rank: int, conn: socket.socket):
        try:
            while conn.recv(1024):
                pass
        except OSError:
            pass
        self.broken.set()  # a rank is gone: the next collective never completes

    def shutdown_followers(self):
        for conn in self.peers.values():
            try:
                conn.sendall(b"shutdown\n")
            except OSError:
                pass

    # ------------------------------------------------------------ nodes >= 1
    def join(self, host: str, port: int):
        s = self.server
        while True:
            try:
                conn = socket.create_connection((host, port), timeout=5)
                conn.sendall(f"rank {s.node_rank}\n".encode())
                conn.settimeout(None)
                if _readline(conn) == "ok":
                    self.leader = conn
                    return
                conn.close()
            except OSError:
                pass
            time.sleep(1.0)  # TCPStore clients retry until the store answers


def _readline(conn: socket.socket) -> str:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = conn.recv(1)
        if not chunk:
            break
        buf += chunk
    return buf.decode(errors="replace").strip()


def rendezvous(server):
    """Block until every node has joined the dist-init rendezvous (the torch.distributed init)."""
    addr = server.args.get("dist_init_addr")
    host, port = _split_addr(addr)
    rv = Rendezvous(server)
    server.rendezvous = rv
    if server.node_rank == 0:
        rv.serve(host, port)
    else:
        rv.join(host, port)


class _DummyServer:
    """What the dummy health server's handlers see: no tokenizer manager, always healthy."""

    access_log = False  # uvicorn log_level="warning": no access lines

    def __init__(self, server):
        self.version = server.version
        self.args = {}  # no API key check: the dummy app has no auth middleware
        self.metrics = server.metrics


class DummyHandler(Handler):
    routes = DUMMY_ROUTES

    def ep_ping(self):
        return self._bare(200)

    def ep_health(self):
        return self._bare(200)

    ep_health_generate = ep_health


def serve_follower(server):
    """Node >= 1 after its schedulers are ready: the dummy health server, then wait for the schedulers."""
    a = server.args
    host = a.get("host") or "127.0.0.1"
    port = int(a.get("port") or 30000)
    handler = type("DummyHealthHandler", (DummyHandler,), {"server_obj": _DummyServer(server)})
    httpd = HTTPServer((host, port), handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    Log.line(T.render(T.DUMMY_HEALTH_STARTED, addr=f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"))
    if server.version != "0.5.9":
        signal.signal(signal.SIGTERM, lambda s, f: Log.line(T.render(T.FOLLOWER_SIGTERM_23, rank=server.node_rank)))
    rv = server.rendezvous
    while True:
        line = _readline(rv.leader) if rv.leader is not None else ""
        if line == "shutdown" and server.version != "0.5.9":
            # rank 0's ShutdownReq stops these schedulers; block_until_scheduler_exits returns
            server.state.remove()
            os._exit(0)
        if not line:
            # node 0 is gone: these schedulers wait in their next collective
            while True:
                time.sleep(3600)
