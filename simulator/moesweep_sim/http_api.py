"""HTTP API of the simulated SGLang server: routes, health checks, generation, OpenAI API, /metrics.

Follows sglang's FastAPI app (https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/entrypoints/http_server.py,
.../v0.5.23/...) served by uvicorn, as Starlette/FastAPI answer:

* routes and their methods as the ``@app.get`` / ``@app.api_route`` decorators declare them (``ROUTES``);
  a path that exists with another method -> 405 ``{"detail":"Method Not Allowed"}`` with ``Allow`` (FastAPI's
  APIRoute keeps exactly the declared methods, so HEAD on a GET route is 405 too; starlette routing.py
  ``Route.handle``, fastapi exception_handlers.py); unknown paths -> 404 ``{"detail":"Not Found"}``;
* ``/metrics`` is a ``Mount`` whose path regex is ``^/metrics(?P<path>.*)$`` (sglang utils/common.py
  ``add_prometheus_middleware``): any path starting with /metrics, any method, only with --enable-metrics;
* JSON bodies are compact (``separators=(",", ":")``, starlette JSONResponse / orjson), a bare
  ``Response(status_code=...)`` has ``content-length: 0`` and no content-type;
* the API key middleware (sglang/srt/utils/auth.py ``decide_request_auth``) runs before routing: OPTIONS and
  paths starting with /health or /metrics need no key; a bad key -> 401 ``{"error":"Unauthorized"}``.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import gsm8k
from . import templates as T
from .engine import Req, count_prompt_tokens
from .log import Log

SIM_HEADER = ("X-Moesweep-Simulated", "1")

V9, V23, ALL = ("0.5.9",), ("0.5.23",), ("0.5.9", "0.5.23")
# path -> (methods, versions): the decorators of http_server.py in both versions
ROUTES = {
    "/health": (("GET",), ALL),
    "/health_generate": (("GET",), ALL),
    "/ready": (("GET",), V23),
    "/ping": (("GET",), ALL),
    "/model_info": (("GET",), ALL),
    "/get_model_info": (("GET",), ALL),
    "/server_info": (("GET",), ALL),
    "/get_server_info": (("GET",), ALL),
    "/v1/models": (("GET",), ALL),
    "/flush_cache": (("GET", "POST"), ALL),
    "/generate": (("POST", "PUT"), ALL),
    "/v1/completions": (("POST",), ALL),
    "/v1/chat/completions": (("POST",), ALL),
}
# ranks >= 1 of a multi-node server: launch_dummy_health_check_server (sglang/srt/utils/common.py)
DUMMY_ROUTES = {"/ping": (("GET",), ALL), "/health": (("GET",), ALL), "/health_generate": (("GET",), ALL)}


def health_check_timeout() -> int:
    """HEALTH_CHECK_TIMEOUT = int(os.getenv("SGLANG_HEALTH_CHECK_TIMEOUT", 20)), read when http_server is imported."""
    return int(os.getenv("SGLANG_HEALTH_CHECK_TIMEOUT", 20))


def env_bool(name: str, default: bool) -> bool:
    """sglang environ.py EnvBool: true/1/yes/y, false/0/no/n (case-insensitive); anything else -> default."""
    v = os.getenv(name)
    if v is None:
        return default
    v = v.lower()
    if v in ("true", "1", "yes", "y"):
        return True
    if v in ("false", "0", "no", "n"):
        return False
    return default


def dumps(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _sse(obj) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else dumps(obj)) + b"\n\n"


class HTTPServer(ThreadingHTTPServer):
    # uvicorn's default backlog is 2048; http.server's 5 drops SYNs under a burst of new
    # connections (each costing a 1 s retransmit), which would distort client-side latencies
    request_queue_size = 2048
    daemon_threads = True


class ReqState:
    """The tokenizer manager's per-request state (ReqState + its time stats)."""

    def __init__(self, req: Req, stream: bool):
        self.req = req
        self.stream = stream
        self.created_time = time.time()
        self.created_perf = time.perf_counter()
        self.request_sent_to_scheduler_ts = 0.0
        self.response_sent_to_client_ts = 0.0
        self.ttft_observed = False
        self.first_token_time = 0.0
        self.first_token_perf = 0.0
        self.last_time = 0.0
        self.last_completion_tokens = 0
        self.finished_time = 0.0
        self.finished_perf = 0.0
        self.prompt_tokens = req.prompt_tokens
        self.finish_type = None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_obj = None  # the Server (sglang_server.Server or multinode.DummyHealthServer)
    routes = ROUTES

    def version_string(self):  # uvicorn's default "server: uvicorn" header
        return "uvicorn"

    def log_message(self, fmt, *args):  # replaced by uvicorn-style access lines
        pass

    def log_request(self, code="-", size="-"):
        try:
            status = int(code)
        except (TypeError, ValueError):
            return
        if getattr(self.server_obj, "access_log", True):
            Log.access(f"{self.client_address[0]}:{self.client_address[1]}",
                       f"{self.command} {self.path} HTTP/{self.request_version.split('/')[-1]}", status)

    # ------------------------------------------------------------ plumbing
    def _send(self, status: int, body: bytes = b"", ctype: str | None = "application/json", extra=None):
        self.send_response(status)
        self.send_header(*SIM_HEADER)
        if ctype:
            self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _bare(self, status: int):
        """starlette Response(status_code=...): empty body, content-length 0, no content-type."""
        self._send(status, b"", None)

    def _json(self, status: int, obj, extra=None):
        self._send(status, dumps(obj), "application/json", extra)

    def _body(self):
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return {}
        return json.loads(raw)

    def _start_stream(self):
        self.send_response(200)
        self.send_header(*SIM_HEADER)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_stream(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _auth_ok(self, method: str, path: str) -> bool:
        key = (getattr(self.server_obj, "args", None) or {}).get("api_key")
        if not key or method == "OPTIONS" or path.startswith(("/health", "/metrics")):
            return True
        parts = (self.headers.get("Authorization") or "").split(" ", 1)
        if len(parts) == 2 and parts[0].lower() == "bearer" and parts[1] == key:
            return True
        self._json(401, {"error": "Unauthorized"})
        return False

    # ------------------------------------------------------------ routing
    def do_GET(self):
        self._route("GET")

    def do_POST(self):
        self._route("POST")

    def do_PUT(self):
        self._route("PUT")

    def do_HEAD(self):
        self._route("HEAD")

    def do_DELETE(self):
        self._route("DELETE")

    def do_PATCH(self):
        self._route("PATCH")

    def do_OPTIONS(self):
        self._route("OPTIONS")

    def _route(self, method: str):
        s = self.server_obj
        path = self.path.split("?", 1)[0]
        try:
            if not self._auth_ok(method, path):
                return
            route = self.routes.get(path)
            if route is not None and s.version in route[1]:
                methods = route[0]
                if method not in methods:
                    # starlette: headers = {"Allow": ", ".join(self.methods)}; self.methods is a set
                    return self._json(405, {"detail": "Method Not Allowed"}, {"Allow": ", ".join(set(methods))})
                return getattr(self, "ep_" + path.strip("/").replace("/", "_"))()
            if path.startswith("/metrics") and getattr(s, "metrics", None) is not None:
                return self._send(200, s.metrics.render().encode(), "text/plain; version=0.0.4; charset=utf-8")
            return self._json(404, {"detail": "Not Found"})
        except (BrokenPipeError, ConnectionResetError):
            return

    # ------------------------------------------------------------ health
    def ep_health(self):
        return self.health(self.path.split("?", 1)[0])

    ep_health_generate = ep_health

    def health(self, path: str):
        """health_generate(): 503 while shutting down or starting; else one 1-token generation and 200 as soon
        as ANY output reaches the tokenizer manager after the check began (checked once a second, first after
        1 s), 503 + UnHealthy after HEALTH_CHECK_TIMEOUT seconds without one."""
        s = self.server_obj
        if s.gracefully_exit:
            Log.line(T.render(T.HEALTH_DURING_SHUTDOWN))
            return self._bare(503)
        if s.status == "Starting":
            return self._bare(503)
        if s.version == "0.5.23" and env_bool("SGLANG_DIAG_BYPASS_HEALTH_GENERATE", False):
            return self._bare(200)
        if not env_bool("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", True) and path == "/health":
            return self._bare(200)
        if s.crashed:
            return  # no answer: the process is going down
        rid = f"HEALTH_CHECK_{time.time()}" if s.version == "0.5.9" else f"HEALTH_CHECK_{uuid.uuid4().hex}"
        s.create_handle_loop()  # the check's generation goes through generate_request as well
        s.engine.submit(Req(1, 1, True, rid, rid=rid, count_in_metrics=False))
        tic = time.time()
        timeout = s.health_check_timeout
        while time.time() < tic + timeout:
            time.sleep(1)
            if s.last_receive_tstamp > tic:
                s.status = "Up"
                return self._bare(200)
        Log.line(T.render(T.HEALTH_CHECK_FAILED, timeout=timeout, tic=time.strftime("%H:%M:%S", time.localtime(tic)),
                          last=time.strftime("%H:%M:%S", time.localtime(s.last_receive_tstamp))))
        s.status = "UnHealthy"
        return self._bare(503)

    def ep_ready(self):
        s = self.server_obj  # 0.5.23 TokenizerManager.is_ready(): not paused, Up, not exiting
        return self._bare(200 if s.status == "Up" and not s.gracefully_exit else 503)

    def ep_ping(self):
        s = self.server_obj
        if s.version == "0.5.9":
            return self._bare(200)  # sagemaker_health: always 200
        return self._bare(200 if s.status == "Up" and not s.gracefully_exit else 503)  # is_healthy()

    # ------------------------------------------------------------ info
    def ep_model_info(self):
        return self._json(200, self.server_obj.model_info())

    def ep_get_model_info(self):
        Log.line(T.render(T.GET_MODEL_INFO_DEPRECATED))
        return self.ep_model_info()

    def ep_server_info(self):
        return self._json(200, self.server_obj.server_info())

    def ep_get_server_info(self):
        Log.line(T.render(T.GET_SERVER_INFO_DEPRECATED))
        return self.ep_server_info()

    def ep_v1_models(self):
        s = self.server_obj
        return self._json(200, {"object": "list", "data": [
            {"id": s.served_name, "object": "model", "created": int(time.time()), "owned_by": "sglang",
             "root": s.served_name, "parent": None, "max_model_len": s.context_len}]})

    def ep_flush_cache(self):
        """A starlette ``Response(content=..., status_code=...)``: no media type, so no content-type header.
        0.5.9 sends the "Cache flushed" text with 400 as well when the scheduler refuses (requests running or
        waiting); 0.5.23 sends the scheduler's message, empty for that refusal, so "Flush cache failed."
        (entrypoints/http_server.py ``flush_cache``; 0.5.23 managers/scheduler_components/flush_wrapper.py)."""
        s = self.server_obj
        flushed = b"Cache flushed.\nPlease check backend logs for more details. " \
                  b"(When there are running or waiting requests, the operation will not be performed.)\n"
        if s.engine and s.engine.flush_cache():
            return self._send(200, flushed, None)
        return self._send(400, flushed if s.version == "0.5.9" else b"Flush cache failed.\n", None)

    # ------------------------------------------------------------ generation
    def _make_req(self, prompt_tokens, sp, seed, rid=None, stream=False, script=None):
        s = self.server_obj
        max_new = sp.get("max_new_tokens")
        max_new = 128 if max_new is None else int(max_new)
        req = Req(prompt_tokens, max_new, bool(sp.get("ignore_eos")), seed, rid=rid, stream=stream, script=script)
        req.tm = ReqState(req, stream)
        s.create_handle_loop()
        if s.status == "Up":
            s.first_real_request.set()
        req.tm.request_sent_to_scheduler_ts = time.time()
        s.engine.submit(req)
        return req

    def _meta(self, req: Req, finished: bool) -> dict:
        """meta_info, keys in the order the tokenizer manager builds them (_handle_batch_output)."""
        s = self.server_obj
        st: ReqState = req.tm
        metrics = s.metrics is not None
        meta = {"id": req.rid, "finish_reason": req.finish_reason if finished else None,
                "prompt_tokens": req.prompt_tokens, "weight_version": "default"}
        if s.version == "0.5.9":
            meta["total_retractions"] = 0
            if metrics:
                meta["queue_time"] = req.forward_entry - req.wait_queue_entry
                meta["prefill_launch_delay"] = req.prefill_start - req.forward_entry
                meta["prefill_launch_latency"] = req.prefill_end - req.prefill_start
                meta["prefill_finished_ts"] = req.prefill_finished_ts
            meta["completion_tokens"] = len(req.out_ids)
            meta["cached_tokens"] = 0
            if finished:
                meta["e2e_latency"] = st.finished_time - st.created_time
                if metrics:  # _calculate_timing_metrics
                    meta["request_received_ts"] = st.created_time
                    meta["request_sent_to_scheduler_ts"] = st.request_sent_to_scheduler_ts
                    if st.response_sent_to_client_ts > 0:
                        meta["response_sent_to_client_ts"] = st.response_sent_to_client_ts
                    meta["decode_finished_ts"] = st.finished_time
                    meta["inference_time"] = st.finished_perf - req.forward_entry
                    if len(req.out_ids) > 0 and st.finished_perf > st.first_token_perf > 0:
                        meta["decode_throughput"] = len(req.out_ids) / (st.finished_perf - st.first_token_perf)
        else:
            meta["num_retractions"] = 0
            if metrics:  # scheduler time stats: convert_to_output_meta_info
                meta["forward_entry_time"] = _realtime(req.forward_entry)
                meta["prefill_finished_time"] = req.prefill_finished_ts
                meta["queue_time"] = req.forward_entry - req.wait_queue_entry
            meta["reasoning_tokens"] = 0
            meta["completion_tokens"] = len(req.out_ids)
            meta["cached_tokens"] = 0
            if finished:
                meta["e2e_latency"] = st.finished_time - st.created_time
                if metrics:  # tokenizer time stats: convert_to_output_meta_info
                    meta["request_received_ts"] = st.created_time
                    if st.first_token_time > st.created_time:
                        meta["first_token_latency"] = st.first_token_time - st.created_time
                    meta["api_server_dispatch_finish_ts"] = st.request_sent_to_scheduler_ts
                    if st.response_sent_to_client_ts > 0:
                        meta["response_sent_to_client_ts"] = st.response_sent_to_client_ts
                    meta["request_finished_ts"] = st.finished_time
                    n = len(req.out_ids)
                    if n > 1 and st.first_token_time > 0:
                        meta["decode_throughput"] = (n - 1) / (st.finished_time - st.first_token_time)
        return meta

    def ep_generate(self):
        s = self.server_obj
        try:
            body = self._body()
        except ValueError as e:
            return self._json(400, {"error": {"message": str(e)}})
        sp = body.get("sampling_params") or {}
        if "text" in body and body["text"] is not None:
            if isinstance(body["text"], list):
                return self._json(400, {"error": {"message": "batch input is not supported by the simulator"}})
            prompt = count_prompt_tokens(str(body["text"]))
            seed = str(body["text"])
            # a question of the shipped GSM8K split, asked the way sglang's few-shot evaluator asks it
            script = gsm8k.script(seed, s.backend)
        elif "input_ids" in body and body["input_ids"] is not None:
            ids = body["input_ids"]
            if ids and isinstance(ids[0], list):
                return self._json(400, {"error": {"message": "batch input is not supported by the simulator"}})
            prompt = len(ids)
            seed = json.dumps(ids)
            script = None
        else:
            return self._json(400, {"error": {"message": "Either text, input_ids or input_embeds should be provided."}})
        stream = bool(body.get("stream"))
        req = self._make_req(prompt, sp, seed, rid=body.get("rid"), stream=stream, script=script)
        if not stream:
            while req.events.get()[0] != "finish":
                pass
            req.tm.response_sent_to_client_ts = time.time()
            meta = self._meta(req, True)
            if s.metrics is not None and s.version == "0.5.9":
                meta["response_sent_to_client_ts"] = req.tm.response_sent_to_client_ts
            return self._json(200, {"text": req.text, "output_ids": list(req.out_ids), "meta_info": meta})
        self._start_stream()
        try:
            while True:
                kind, _k = req.events.get()
                fin = kind == "finish"
                meta = self._meta(req, fin)
                if not req.tm.response_sent_to_client_ts:
                    req.tm.response_sent_to_client_ts = time.time()
                    if s.metrics is not None and s.version == "0.5.9":
                        meta["response_sent_to_client_ts"] = req.tm.response_sent_to_client_ts
                self._chunk(_sse({"text": req.text, "output_ids": list(req.out_ids), "meta_info": meta}))
                if fin:
                    break
            self._chunk(_sse(b"[DONE]"))
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError):
            req.aborted = True

    def _openai(self, chat: bool):
        s = self.server_obj
        ctype = (self.headers.get("content-type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            return self._json(400, {"object": "error", "message":
                                    "1 validation error:\n  {'type': 'value_error', 'loc': ('header', "
                                    "'content-type'), 'msg': \"Unsupported Media Type: Only 'application/json' is "
                                    "allowed\"}", "type": "BadRequest", "param": None, "code": 400})
        try:
            body = self._body()
        except ValueError as e:
            return self._json(400, {"object": "error", "message": str(e), "type": "BadRequestError",
                                    "param": None, "code": 400})
        if chat:
            msgs = body.get("messages") or []
            text = " ".join(m.get("content") if isinstance(m.get("content"), str) else
                            " ".join(p.get("text", "") for p in (m.get("content") or []) if isinstance(p, dict))
                            for m in msgs)
            prompt = count_prompt_tokens(text)
            seed = text
        else:
            p = body.get("prompt", "")
            if isinstance(p, list) and p and isinstance(p[0], int):
                prompt, seed = len(p), json.dumps(p)
            else:
                if isinstance(p, list):
                    p = p[0] if p else ""
                prompt, seed = count_prompt_tokens(str(p)), str(p)
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        if max_tokens is None:
            max_tokens = 16 if not chat else 128
        sp = {"max_new_tokens": max_tokens, "ignore_eos": body.get("ignore_eos", False)}
        stream = bool(body.get("stream"))
        req = self._make_req(prompt, sp, seed, stream=stream)
        rid = req.rid
        created = int(time.time())
        model = body.get("model") or s.served_name
        obj = "chat.completion" if chat else "text_completion"

        def usage():
            return {"prompt_tokens": req.prompt_tokens, "total_tokens": req.prompt_tokens + len(req.out_ids),
                    "completion_tokens": len(req.out_ids), "prompt_tokens_details": None, "reasoning_tokens": 0}

        def reason():
            fr = req.finish_reason or {}
            return fr.get("type"), fr.get("matched")

        if not stream:
            while req.events.get()[0] != "finish":
                pass
            r, matched = reason()
            if chat:
                choice = {"index": 0, "message": {"role": "assistant", "content": req.text, "reasoning_content": None,
                                                  "tool_calls": None}, "logprobs": None, "finish_reason": r,
                          "matched_stop": matched}
            else:
                choice = {"index": 0, "text": req.text, "logprobs": None, "finish_reason": r, "matched_stop": matched}
            return self._json(200, {"id": rid, "object": obj, "created": created, "model": model,
                                    "choices": [choice], "usage": usage(), "metadata": {"weight_version": "default"}})
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self._start_stream()
        sent = 0
        try:
            if chat:
                self._chunk(_sse({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                                  "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                               "logprobs": None, "finish_reason": None, "matched_stop": None}],
                                  "usage": None}))
            while True:
                kind, _k = req.events.get()
                fin = kind == "finish"
                words = req.text.split(" ") if req.out_ids else []
                delta = (" " if sent else "") + " ".join(words[sent:]) if len(words) > sent else ""
                sent = len(words)
                r, matched = reason() if fin else (None, None)
                if chat:
                    ch = {"index": 0, "delta": {"role": None, "content": delta}, "logprobs": None,
                          "finish_reason": r, "matched_stop": matched}
                    o = "chat.completion.chunk"
                else:
                    ch = {"index": 0, "text": delta, "logprobs": None, "finish_reason": r, "matched_stop": matched}
                    o = "text_completion"
                self._chunk(_sse({"id": rid, "object": o, "created": created, "model": model, "choices": [ch],
                                  "usage": None}))
                if fin:
                    break
            if include_usage:
                self._chunk(_sse({"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                                  "created": created, "model": model, "choices": [], "usage": usage()}))
            self._chunk(_sse(b"[DONE]"))
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError):
            req.aborted = True

    def ep_v1_completions(self):
        return self._openai(chat=False)

    def ep_v1_chat_completions(self):
        return self._openai(chat=True)


def _realtime(perf: float) -> float:
    """convert_time_to_realtime: a perf_counter instant as wall-clock time."""
    return time.time() - (time.perf_counter() - perf)
