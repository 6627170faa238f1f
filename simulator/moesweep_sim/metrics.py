"""`/metrics` of the simulated server (only with --enable-metrics): sglang's Prometheus metrics.

The metric definitions (name, kind, documentation, labels, multiprocess mode, buckets) are the real ones,
read from ``data/sglang-<version>.json`` (extracted from the wheel's TokenizerMetricsCollector and
SchedulerMetricsCollector by ``bin/extract-sglang-data``).  Values follow what the real collectors observe:

* tokenizer manager (one series per label set; labels: ``model_name`` on 0.5.9,
  ``model_name, engine_type`` on 0.5.23; sglang/srt/managers/tokenizer_manager.py
  ``init_metric_collector_watchdog`` / 0.5.23 ``tokenizer_metric_labels``): TTFT at a request's first output,
  inter-token latency per later output (``observe_inter_token_latency``: the interval is added to ``_sum``,
  the bucket of interval / new tokens counts the new tokens), counters and e2e latency when it finishes;
  health-check requests (``log_metrics=False``) are not counted;
* scheduler (TP0 only, ``attn_tp_rank == 0``; labels ``model_name, engine_type, tp_rank, pp_rank,
  moe_ep_rank``, sglang/srt/managers/scheduler_metrics_mixin.py): every gauge ``log_stats`` sets, at every
  Prefill/Decode batch log line.

Exposition: prometheus_client's ``generate_latest`` over a ``MultiProcessCollector`` (sglang's
``add_prometheus_middleware``, sglang/srt/utils/common.py; prometheus_client 0.26.0 exposition.py and
multiprocess.py): labels sorted by name, ``mostrecent`` gauges without a ``pid`` label, counters as
``<name>_total``, histogram samples in the order ``_sum``, cumulative ``_bucket`` (``le`` by
``floatToGoString``, up to ``+Inf``), ``_count``; a family appears once its first series exists.
Content type ``text/plain; version=0.0.4; charset=utf-8``.
"""

from __future__ import annotations

import json
import math
import os
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def load_data(version: str) -> dict:
    with open(os.path.join(HERE, "data", f"sglang-{version}.json"), encoding="utf-8") as f:
        return json.load(f)


def float_to_go_string(d) -> str:
    """prometheus_client.utils.floatToGoString."""
    d = float(d)
    if d == math.inf:
        return "+Inf"
    if d == -math.inf:
        return "-Inf"
    if math.isnan(d):
        return "NaN"
    s = repr(d)
    dot = s.find(".")
    if d > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return s


def _escape(v: str) -> str:
    return str(v).replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class Family:
    def __init__(self, spec: dict, base_labels: list[str]):
        self.spec = spec
        self.kind = spec["kind"]
        self.name = spec["name"]
        self.doc = spec["documentation"] if isinstance(spec["documentation"], str) else ""
        self.labelnames = (base_labels if spec["collector_labels"] else []) + list(spec["extra_labels"])
        bounds = [float(b) for b in (spec.get("buckets") or [])]
        if self.kind == "histogram":
            if not bounds or bounds[-1] != math.inf:
                bounds.append(math.inf)
        self.bounds = bounds
        self.children: dict[tuple, dict] = {}

    def child(self, labels: dict) -> dict:
        key = tuple(sorted((k, str(labels[k])) for k in self.labelnames))
        ch = self.children.get(key)
        if ch is None:
            ch = {"value": 0.0, "sum": 0.0, "buckets": [0.0] * len(self.bounds)}
            self.children[key] = ch
        return ch

    def render(self) -> list[str]:
        name = self.name
        mname = name + "_total" if self.kind == "counter" and not name.endswith("_total") else name
        sample = name if self.kind != "counter" else mname
        out = [f"# HELP {mname} {self.doc.replace(chr(92), chr(92) * 2).replace(chr(10), chr(92) + 'n')}",
               f"# TYPE {mname} {self.kind}"]
        def lbl(key, extra=()):
            items = sorted(list(key) + list(extra))
            return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in items) + "}" if items else ""

        for key, ch in self.children.items():
            if self.kind == "histogram":
                out.append(f"{name}_sum{lbl(key)} {float_to_go_string(ch['sum'])}")
                acc = 0.0
                for b, c in zip(self.bounds, ch["buckets"], strict=True):
                    acc += c
                    out.append(f"{name}_bucket{lbl(key, [('le', float_to_go_string(b))])} {float_to_go_string(acc)}")
                out.append(f"{name}_count{lbl(key)} {float_to_go_string(acc)}")
            else:
                out.append(f"{sample}{lbl(key)} {float_to_go_string(ch['value'])}")
        return out


class Collector:
    """One of sglang's collectors (its families keyed by attribute name)."""

    def __init__(self, data: dict, cls: str, labels: dict):
        spec = data["metrics"]["collectors"][cls]
        self.labels = labels
        self.families = {m["attr"]: Family(m, list(labels)) for m in spec["metrics"]}
        self.log_stats_gauges = spec["log_stats_gauges"]
        self.created: list[str] = []  # attrs in order of their first series (mmap key order)
        self.lock = threading.Lock()

    def _child(self, attr: str, extra: dict | None = None) -> dict:
        fam = self.families[attr]
        ch = fam.child({**self.labels, **(extra or {})})
        if attr not in self.created:
            self.created.append(attr)
        return ch

    def inc(self, attr: str, v: float = 1.0, **extra):
        with self.lock:
            self._child(attr, extra)["value"] += v

    def set(self, attr: str, v: float, **extra):
        with self.lock:
            self._child(attr, extra)["value"] = float(v)

    def observe(self, attr: str, v: float, **extra):
        with self.lock:
            ch = self._child(attr, extra)
            ch["sum"] += v
            for i, b in enumerate(self.families[attr].bounds):
                if v <= b:
                    ch["buckets"][i] += 1
                    break

    def observe_inter_token_latency(self, attr: str, interval: float, n: int):
        """TokenizerMetricsCollector.observe_inter_token_latency: _sum += interval, the bucket of
        interval / n counts n."""
        with self.lock:
            ch = self._child(attr)
            ch["sum"] += interval
            adjusted = interval / n
            for i, b in enumerate(self.families[attr].bounds):
                if adjusted <= b:
                    ch["buckets"][i] += n
                    break

    def render(self) -> list[str]:
        with self.lock:
            by_kind: dict[str, list[str]] = {}
            for attr in self.created:
                fam = self.families[attr]
                by_kind.setdefault(fam.kind, []).extend(fam.render())
            # MultiProcessCollector reads one .db file per kind and process (counter_<pid>.db,
            # gauge_mostrecent_<pid>.db, histogram_<pid>.db); families come out grouped that way
            return [line for kind in ("counter", "gauge", "histogram", "summary") for line in by_kind.get(kind, [])]


class Metrics:
    """Both collectors of one server, and the tokenizer manager's per-request bookkeeping."""

    def __init__(self, version: str, served_model_name: str):
        self.version = version
        data = load_data(version)
        tok_labels = {"model_name": served_model_name}
        if version != "0.5.9":
            tok_labels["engine_type"] = "unified"
        self.tokenizer = Collector(data, "TokenizerMetricsCollector", tok_labels)
        self.scheduler = Collector(data, "SchedulerMetricsCollector", {
            "model_name": served_model_name, "engine_type": "unified", "tp_rank": 0, "pp_rank": 0,
            "moe_ep_rank": 0})

    # ------------------------------------------------ tokenizer manager (collect_metrics)
    def on_output(self, st, completion_tokens: int, finished: bool, now: float):
        """One batch output of a request reached the tokenizer manager (st: its per-request state)."""
        t = self.tokenizer
        v23 = self.version != "0.5.9"
        stream = "true" if st.stream else "false"
        if not st.ttft_observed:
            st.ttft_observed = True
            st.first_token_time = st.last_time = now
            st.last_completion_tokens = completion_tokens
            if v23:
                t.observe("histogram_time_to_first_token", now - st.created_time, is_streaming=stream)
            else:
                t.observe("histogram_time_to_first_token", now - st.created_time)
        else:
            n = completion_tokens - st.last_completion_tokens
            if n > 0:
                t.observe_inter_token_latency("histogram_inter_token_latency", now - st.last_time, n)
                st.last_time = now
                st.last_completion_tokens = completion_tokens
        if not finished:
            return
        e2e = now - st.created_time
        if v23:
            t.inc("prompt_tokens_total", st.prompt_tokens, is_streaming=stream)
            t.inc("generation_tokens_total", completion_tokens, is_streaming=stream)
            t.inc("num_requests_total", 1, is_streaming=stream)
            t.observe("histogram_e2e_request_latency", e2e, is_streaming=stream)
            if completion_tokens > 1 and st.finish_type in ("stop", "length"):
                tpot = (now - st.first_token_time) / (completion_tokens - 1)
                t.observe("histogram_request_time_per_output_token", tpot, is_streaming=stream)
            t.observe("prompt_tokens_histogram", float(st.prompt_tokens))
            t.observe("uncached_prompt_tokens_histogram", float(st.prompt_tokens))
            t.observe("generation_tokens_histogram", float(completion_tokens))
        else:
            t.inc("prompt_tokens_total", st.prompt_tokens)
            t.inc("generation_tokens_total", completion_tokens)
            t.inc("num_requests_total", 1)
            t.observe("histogram_e2e_request_latency", e2e)
            t.observe("num_retractions", 0)

    # ------------------------------------------------ scheduler (log_stats)
    def log_stats(self, values: dict):
        for attr in self.scheduler.log_stats_gauges:
            self.scheduler.set(attr, values.get(attr, 0.0))

    def render(self) -> str:
        lines = self.tokenizer.render() + self.scheduler.render()
        return "\n".join(lines) + "\n" if lines else ""  # generate_latest over no samples: an empty body
