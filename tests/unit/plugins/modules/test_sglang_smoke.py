"""sglang_smoke against a real local HTTP server answering as SGLang does (the response shapes of
python/sglang/srt/managers/tokenizer_manager.py and entrypoints/openai/protocol.py, v0.5.9)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from ansible_collections.moesweep.sweep.plugins.modules import sglang_smoke


def serve(words):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _send(self, body, ctype="application/json"):
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._send(json.dumps({"object": "list", "data": [{"id": "glm-5", "object": "model"}]}))

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            text = " ".join(words)
            if self.path == "/generate" and req.get("stream"):
                chunks = ["data: " + json.dumps({"text": " ".join(words[:i + 1]), "output_ids": [i],
                                                 "meta_info": {"finish_reason": None if i < len(words) - 1
                                                               else {"type": "length", "length": len(words)},
                                                               "completion_tokens": i + 1}}) + "\n\n"
                          for i in range(len(words))]
                self._send("".join(chunks) + "data: [DONE]\n\n", "text/event-stream")
            elif self.path == "/generate":
                self._send(json.dumps({"text": text, "output_ids": list(range(100, 100 + len(words))),
                                       "meta_info": {"id": "1", "finish_reason": {"type": "length", "length": 8},
                                                     "prompt_tokens": 5, "completion_tokens": len(words)}}))
            else:
                self._send(json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                    "finish_reason": "length"}],
                                       "usage": {"completion_tokens": len(words)}}))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def smoke(run_module):
    servers = []

    def call(words, **args):
        server = serve(words)
        servers.append(server)
        return run_module(sglang_smoke, {"port": server.server_address[1], **args})

    yield call
    for s in servers:
        s.shutdown()


def test_healthy_output_passes(smoke):
    kind, r = smoke("Paris is the capital of France and its largest city".split())
    assert kind == "exit" and r["state"] == "ok" and r["model"] == "glm-5"
    assert [a["endpoint"] for a in r["answers"]] == ["generate"] * 3 + ["generate_stream", "chat"]


def test_garbage_is_bad_output_with_the_texts(smoke):
    kind, r = smoke(["!!!!!!!!"] * 8)
    assert kind == "fail" and r["state"] == "bad_output"
    assert r["answers"][0]["text"].startswith("!!!!!!!!")
    assert any("NaN-logits" in reason for reason in r["reasons"]), r["reasons"]


def _gated_job(tmp_path):
    """A gated benchmark job's output directory with its own progress document, and its async results file."""
    from ansible_collections.moesweep.sweep.plugins.module_utils import bench_progress

    results = tmp_path / "job.results"
    results.write_text('{"started": 1}')
    out = tmp_path / "bench"
    out.mkdir()
    bench_dir = bench_progress.BenchDir(str(out))
    bench_dir.write_progress(bench_progress.new([(1, 4)], {}, pid=1, started=results.stat().st_mtime))
    return out, results, out / bench_progress.GO_FILE


def test_a_check_that_passes_opens_the_gated_benchmark_at_once(smoke, tmp_path):
    out, results, go = _gated_job(tmp_path)
    kind, r = smoke("Paris is the capital of France and its largest city".split(),
                    gate_output_dir=str(out), gate_results_file=str(results))
    assert kind == "exit" and r["state"] == "ok" and r["gate_opened"] is True and go.exists()
    assert r["msg"].endswith("; the benchmark's gate opened")


def test_a_check_that_fails_leaves_the_gate_shut(smoke, tmp_path):
    out, results, go = _gated_job(tmp_path)
    kind, r = smoke(["!!!!!!!!"] * 8, gate_output_dir=str(out), gate_results_file=str(results))
    assert kind == "fail" and r["state"] == "bad_output" and r["gate_opened"] is False and not go.exists()


def test_the_gate_of_a_job_of_another_key_stays_shut(smoke, tmp_path):
    out, results, go = _gated_job(tmp_path)  # its progress carries no key: not the job the key names
    kind, r = smoke("Paris is the capital of France and its largest city".split(),
                    gate_output_dir=str(out), gate_results_file=str(results), gate_job_key="k1")
    assert kind == "exit" and r["state"] == "ok" and r["gate_opened"] is False and not go.exists()


def test_without_a_job_no_gate_is_opened(smoke):
    kind, r = smoke("Paris is the capital of France and its largest city".split())
    assert kind == "exit" and r["gate_opened"] is False


def test_reference_agreement_is_reported(smoke):
    ref = [{"prompt": "The capital of France is", "token_ids": [100, 101, 999]}]
    kind, r = smoke("a b c d".split(), endpoints=["generate"], reference=ref, fail_on_error=False)
    assert r["agreement"][0]["prefix"] == 2 and r["agreement"][0]["unit"] == "tokens"


def test_nothing_listening_is_a_dead_server_not_a_traceback(run_module, monkeypatch):
    monkeypatch.setattr(sglang_smoke.AnsibleModule, "get_bin_path", lambda self, name, required=False: None)
    kind, r = run_module(sglang_smoke, {"port": 1, "endpoints": ["generate"]})
    assert kind == "fail" and r["state"] == "server_died" and "stopped answering" in r["msg"]


def test_a_server_that_dies_in_the_middle_of_an_answer_is_a_dead_server_not_a_traceback(run_module, monkeypatch):
    """The requests go out at once: a stream cut short (http.client.IncompleteRead) while the other answers
    come back whole is the server dying, reported with the answers that did arrive."""
    class Cut(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            body = json.dumps({"data": [{"id": "glm-5"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if req.get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", "4096")  # promised, never sent: the process died
                self.end_headers()
                self.wfile.write(b'data: {"text": "Par')
                return
            body = json.dumps({"text": "Paris is the capital", "output_ids": [1, 2, 3, 4],
                               "meta_info": {"finish_reason": {"type": "length"}, "completion_tokens": 4}}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Cut)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(sglang_smoke.AnsibleModule, "get_bin_path", lambda self, name, required=False: None)
    try:
        kind, r = run_module(sglang_smoke, {"port": server.server_address[1], "endpoints": ["generate",
                                                                                         "generate_stream"]})
    finally:
        server.shutdown()
    assert kind == "fail" and r["state"] == "server_died" and "IncompleteRead" in r["msg"], r["msg"]
    assert [a["endpoint"] for a in r["answers"]] == ["generate"] * 3


def test_bad_arguments(run_module):
    kind, r = run_module(sglang_smoke, {"max_new_tokens": 0})
    assert kind == "fail" and "greater than 0" in r["msg"]
    kind, r = run_module(sglang_smoke, {"gate_output_dir": "/tmp/x"})
    assert kind == "fail" and "gate_results_file" in r["msg"]
