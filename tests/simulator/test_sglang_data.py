"""The data the simulated server prints from (simulator/moesweep_sim/data/sglang-<V>.json) is what the real
wheels hold, and what the server's HTTP routes and /metrics use matches the real sources:

* re-running bin/extract-sglang-data on the cached wheel reproduces the committed file byte for byte;
* every ServerArgs field of the real record appears, in order, in the simulator's ``server_args=`` line;
* every route the simulator serves is declared with the same methods by the real http_server.py;
* the metric families /metrics shows are real ones (name, kind, documentation, labels, buckets).
"""

from __future__ import annotations

import ast
import json
import subprocess

import pytest
from helpers.paths import REPO, TARGET_PYTHON
from moesweep_sim import http_api, metrics, server_args
from simulator.real_wheels import WHEELS, source, wheel_path

EXTRACT = REPO / "simulator" / "bin" / "extract-sglang-data"
DATA = REPO / "simulator" / "moesweep_sim" / "data"
VERSIONS = ("0.5.9", "0.5.23")


@pytest.mark.parametrize("version", VERSIONS)
def test_committed_data_is_what_the_wheel_holds(version, tmp_path):
    out = tmp_path / "x.json"
    r = subprocess.run([TARGET_PYTHON, str(EXTRACT), str(wheel_path(WHEELS[("sglang", version)])), "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert out.read_text() == (DATA / f"sglang-{version}.json").read_text()


def test_059_fields_are_the_dataclass_in_order():
    tree = ast.parse(source(WHEELS[("sglang", "0.5.9")], "sglang/srt/server_args.py"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs")
    names = [s.target.id for s in cls.body if isinstance(s, ast.AnnAssign)]
    assert [n for n, _ in server_args.load_fields("0.5.9")] == names
    assert len(names) > 300


def test_0523_fields_start_with_the_positional_order():
    tree = ast.parse(source(WHEELS[("sglang", "0.5.23")], "sglang/srt/arg_groups/field_order.py"))
    order = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign))
    got = [n for n, _ in server_args.load_fields("0.5.23")]
    assert got[:len(order)] == [n for n in order if n in got] and got[0] == "model_path"
    assert len(got) > 500 and "cuda_graph_max_bs_decode" in got


def _decorated_routes(version: str) -> dict:
    tree = ast.parse(source(WHEELS[("sglang", version)], "sglang/srt/entrypoints/http_server.py"))
    routes: dict = {}
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in n.decorator_list:
                if (isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute)
                        and isinstance(d.func.value, ast.Name) and d.func.value.id == "app" and d.args
                        and isinstance(d.args[0], ast.Constant)):
                    if d.func.attr == "api_route":
                        kw = {k.arg: k.value for k in d.keywords}
                        methods = ast.literal_eval(kw["methods"])
                    else:
                        methods = [d.func.attr.upper()]
                    routes.setdefault(d.args[0].value, set()).update(methods)
    return routes


@pytest.mark.parametrize("version", VERSIONS)
def test_routes_and_methods_are_the_real_ones(version):
    real = _decorated_routes(version)
    for path, (methods, versions) in http_api.ROUTES.items():
        if version in versions:
            assert real.get(path) == set(methods), path
        else:
            assert path not in real, path


@pytest.mark.parametrize("version", VERSIONS)
def test_dummy_health_server_routes(version):
    src = source(WHEELS[("sglang", version)], "sglang/srt/utils/common.py")
    tree = ast.parse(src)
    fn = next(n for n in ast.walk(tree)
              if isinstance(n, ast.FunctionDef) and n.name == "launch_dummy_health_check_server")
    paths = {d.args[0].value for n in ast.walk(fn) if isinstance(n, ast.AsyncFunctionDef) for d in n.decorator_list
             if isinstance(d, ast.Call) and ast.unparse(d.func) == "app.get"}
    assert paths == set(http_api.DUMMY_ROUTES)


def _collector_calls(version: str) -> dict:
    path = "sglang/srt/metrics/collector.py" if version == "0.5.9" else "sglang/srt/observability/metrics_collector.py"
    tree = ast.parse(source(WHEELS[("sglang", version)], path))
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                "Gauge", "Counter", "Histogram", "Summary"):
            kw = {k.arg: k.value for k in node.keywords}
            if isinstance(kw.get("name"), ast.Constant):
                out[kw["name"].value] = (node.func.id.lower(), kw)
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_metrics_families_are_real(version):
    real = _collector_calls(version)
    m = metrics.Metrics(version, "glm-5")
    names = {}
    for coll in (m.tokenizer, m.scheduler):
        for fam in coll.families.values():
            kind, kw = real[fam.name]
            assert fam.kind == kind, fam.name
            if isinstance(kw["documentation"], ast.Constant):
                assert fam.doc == kw["documentation"].value, fam.name
            names[fam.name] = fam
    # the latency histograms the benchmark and telemetry stages read, with their real buckets
    ttft = names["sglang:time_to_first_token_seconds"]
    assert ttft.bounds[:3] == [0.1, 0.2, 0.4] and ttft.bounds[-2:] == [400.0, float("inf")]
    itl = names["sglang:inter_token_latency_seconds"]
    assert itl.bounds[0] == 0.002 and itl.bounds[-2] == 8.0
    e2e = names["sglang:e2e_request_latency_seconds"]
    assert e2e.bounds[-2] == 2400.0
    labels = {"0.5.9": ["model_name"], "0.5.23": ["model_name", "engine_type", "is_streaming"]}[version]
    assert ttft.labelnames == labels
    assert names["sglang:num_running_reqs"].labelnames == ["model_name", "engine_type", "tp_rank", "pp_rank",
                                                           "moe_ep_rank"]


def test_float_to_go_string_matches_prometheus_client():
    """Differential check against prometheus_client's own floatToGoString (its source, run here)."""
    tree = ast.parse(source(WHEELS[("prometheus_client", None)], "prometheus_client/utils.py"))
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "floatToGoString")
    ns = {"math": __import__("math"), "INF": float("inf"), "MINUS_INF": float("-inf")}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "prometheus_client/utils.py", "exec"), ns)  # noqa: S102
    for v in (0, 0.1, 1, 2.5, 1e6, 12345678.0, float("inf"), 400, 0.002, 3.0e-05):
        assert metrics.float_to_go_string(v) == ns["floatToGoString"](v), v


def test_log_repr_shapes():
    args = {"model_path": "m", "tp_size": 8, "moe_runner_backend": "flashinfer_cutlass"}
    r9 = server_args.ResolvedArgs("0.5.9", _cli("0.5.9", args), gpu_mem_mib=97887, sm=120,
                                  model_arch="LlamaForCausalLM", mla=False)
    text = r9.log_repr()
    assert text.startswith("ServerArgs(model_path='m', tokenizer_path='m', tokenizer_mode='auto', ")
    assert ", mem_fraction_static=0.848, " in text and ", cuda_graph_max_bs=512, " in text
    assert ", chunked_prefill_size=8192, " in text and ", device='cuda', " in text
    r23 = server_args.ResolvedArgs("0.5.23", _cli("0.5.23", args), gpu_mem_mib=97887, sm=120,
                                   model_arch="LlamaForCausalLM", mla=False)
    d = ast.literal_eval(r23.log_repr())
    assert list(d)[:3] == ["model_path", "tokenizer_path", "tokenizer_mode"] and d["tokenizer_path"] == "m"
    assert d["cuda_graph_config"]["decode"]["max_bs"] == 512 and d["cuda_graph_config"]["prefill"]["backend"] == \
        "breakable"
    assert d["enable_dp_attention"] is False


def _cli(version: str, over: dict) -> dict:
    from moesweep_sim import sgl_cli

    argv = []
    for k, v in over.items():
        argv += ["--" + k.replace("_", "-"), str(v)]
    args, _ = sgl_cli.parse(version, argv)
    return args


def test_data_files_are_json():
    for v in VERSIONS:
        doc = json.loads((DATA / f"sglang-{v}.json").read_text())
        assert doc["sglang_version"] == v and doc["generated_by"] == "simulator/bin/extract-sglang-data"
