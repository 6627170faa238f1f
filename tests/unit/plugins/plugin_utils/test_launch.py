"""The launch plan: flags merged once (common, overlay, extra), validated once by the real schema, argv and
environment rendered with secrets left out, and variables that contradict a point's name refused."""

from __future__ import annotations

import pytest
import yaml
from ansible_collections.moesweep.sweep.plugins.plugin_utils import compat, launch
from helpers.paths import REPO

OVERLAYS = {
    "flashinfer_cutlass": {"flags": {"moe-runner-backend": "flashinfer_cutlass"}},
    "cutlass_no_fusion": {"flags": {"moe-runner-backend": "flashinfer_cutlass"},
                          "remove": ["enable-flashinfer-allreduce-fusion"]},
}
FLAGS = {"model-path": "m", "tp-size": 8, "port": 8000, "host": "0.0.0.0", "quantization": "modelopt_fp4",
         "enable-flashinfer-allreduce-fusion": True}


def plan(**kw):
    args = {"backend": "flashinfer_cutlass", "flags": FLAGS, "backends": OVERLAYS, "sglang_version": "0.5.9",
            "venv": "/opt/v"}
    args.update(kw)
    return launch.plan(args)


def test_overlay_remove_and_extra_flags_merge_in_order():
    p = plan(backend="cutlass_no_fusion", extra_flags={"mem-fraction-static": 0.9})
    assert p["backend"] == "flashinfer_cutlass" and p["point"] == "cutlass_no_fusion"
    assert "enable-flashinfer-allreduce-fusion" not in p["flags"] and p["flags"]["mem-fraction-static"] == 0.9
    assert p["argv"][:3] == ["/opt/v/bin/python", "-m", "sglang.launch_server"]
    assert "--tp-size" in p["argv"] and "--tp" not in p["argv"] and p["port"] == 8000 and p["host"] == "0.0.0.0"
    assert p["flag_errors"] == []


def test_a_choice_without_overlay_gets_its_flag():
    p = plan(backend="triton")
    assert p["flags"]["moe-runner-backend"] == "triton" and p["backend"] == "triton"


@pytest.mark.parametrize("kw,needle", [
    ({"backend": "flashinfer_cutedsl", "extra_flags": {"moe-runner-backend": "triton"}},
     "would run --moe-runner-backend triton"),
    ({"backend": "cutlass_no_fusion", "extra_flags": {"moe-runner-backend": "triton"}},
     "sglang_server_extra_flags sets triton"),
    ({"backend": "flashinfer_cutlas"}, "did you mean 'flashinfer_cutlass'"),
    ({"backend": ["a", "b"]}, "one --moe-runner-backend name"),
    ({"extra_flags": {"api-key": "s3cret"}}, "sglang_server_api_key"),
    ({"backends": dict(OVERLAYS, flashinfer_cutlass={"flags": {"api-key": "s3cret"}})}, "sglang_server_api_key"),
    ({"api_key_set": True}, "needs secret_config_path"),
    ({"api_key_set": True, "secret_config_path": "/etc/moesweep/sglang.secrets.json"}, "ending in .yaml or .yml"),
    ({"api_key_set": True, "secret_config_path": "sglang.secrets.yaml"}, "absolute path"),
    ({"sglang_version": "9.9.9"}, "moesweep knows 0.5.9, 0.5.15, 0.5.23"),
    ({"sglang_version": "", "provenance": {}}, "set sglang_server_sglang_version"),
    ({"quantization": "fp8"}, "contradicts the flags' quantization"),
])
def test_refusals_name_the_fix(kw, needle):
    with pytest.raises(launch.LaunchError, match=None) as exc:
        plan(**kw)
    assert needle in str(exc.value)


def test_schema_errors_are_returned_for_the_refusal():
    p = plan(extra_flags={"attention-backend": "warp_drive"})
    assert p["flag_errors"] and "warp_drive" in p["flag_errors"][0] and p["argv"] == ["/opt/v/bin/python", "-m",
                                                                                          "sglang.launch_server"]


def test_version_from_provenance_and_cuda_home():
    p = plan(sglang_version="", provenance={"versions": {"sglang": "0.5.23"}, "cuda_home": "/usr/local/cuda-13.0"},
             flags={"model-path": "m"})
    assert p["sglang_version"] == "0.5.23" and p["environment"]["CUDA_HOME"] == "/usr/local/cuda-13.0"


SECRETS_FILE = "/etc/moesweep/sglang.secrets.yaml"


def test_secrets_never_enter_the_plan():
    p = plan(environment={"NCCL_P2P_LEVEL": "PHB"}, secret_environment_keys=["HF_TOKEN"], api_key_set=True,
             secret_config_path=SECRETS_FILE, home="/var/lib/sglang")
    assert p["secret_environment_keys"] == ["HF_TOKEN"]
    assert "HF_TOKEN" not in p["environment"] and p["environment"]["HOME"] == "/var/lib/sglang"
    assert p["environment"]["FLASHINFER_WORKSPACE_BASE"] == "/var/lib/sglang"


def test_the_api_key_reaches_sglang_through_its_config_file_never_the_command_line():
    """sglang merges --config's YAML keys as options ahead of the command line only when the word "--config" is in
    argv (v0.5.9 server_args.py:5583, server_args_config_parser.py:86): the path is a word of its own."""
    p = plan(api_key_set=True, secret_config_path=SECRETS_FILE)
    assert p["argv"][-2:] == ["--config", SECRETS_FILE] and "--api-key" not in p["argv"]
    assert p["exec_lines"][-1] == "--config " + SECRETS_FILE
    assert p["command_line"].endswith(" --config " + SECRETS_FILE) and "${" not in p["command_line"]
    # no key, no file: nothing on the command line, and a path given for the file is not used
    bare = plan(api_key_set=False, secret_config_path=SECRETS_FILE)
    assert "--config" not in bare["argv"] and "--api-key" not in bare["argv"]
    assert bare["launch_hash"] != p["launch_hash"]  # a key set or removed is another launch


@pytest.mark.parametrize("where", ["flags", "extra_flags", "version_flags", "overlay"])
@pytest.mark.parametrize("name", ["config", "--config", "confi"])
def test_a_config_flag_is_refused_naming_the_fix(where, name):
    """A second --config would fail sglang's launch ("Multiple config files specified!"), and a file's options would
    escape the schema check; an abbreviation sglang's parser would take for --config is refused too."""
    given = {name: "/etc/mine.yaml"}
    kw = {"flags": dict(FLAGS, **given)} if where == "flags" else (
        {"extra_flags": given} if where == "extra_flags" else (
            {"version_flags": {"0.5.9": given}} if where == "version_flags" else
            {"backends": dict(OVERLAYS, flashinfer_cutlass={"flags": dict(given, **{
                "moe-runner-backend": "flashinfer_cutlass"})})}))
    with pytest.raises(launch.LaunchError) as exc:
        plan(api_key_set=True, secret_config_path=SECRETS_FILE, **kw)
    msg = str(exc.value)
    assert "--config" in msg and "sglang_server_flags" in msg and "sglang_server_api_key" in msg, msg


def test_launch_hash_identifies_argv_and_environment():
    a, b = plan(), plan()
    assert a["launch_hash"] == b["launch_hash"]
    assert plan(extra_flags={"mem-fraction-static": 0.8})["launch_hash"] != a["launch_hash"]
    assert plan(environment={"X": "1"})["launch_hash"] != a["launch_hash"]


def test_systemd_words_are_escaped():
    lines = launch.systemd_exec_lines(["/p", "--a", "x y", "--b", "50%", "--c", "$HOME"])
    assert lines == ["/p", '--a "x y"', "--b 50%%", "--c $$HOME"]
    assert launch.shell_join(["a b", "--c", "$HOME"]) == "'a b' --c '$HOME'"


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_abbreviations_are_planned_under_the_option_they_stand_for(version):
    # `--tp 8` as the reference launch line types it: both real parsers accept it (argparse prefix matching,
    # schema probe tp_abbrev exit 0); the unit and the plan carry --tp-size
    flags = {k: v for k, v in FLAGS.items() if k != "tp-size"}
    p = plan(sglang_version=version, flags=dict(flags, tp=8), extra_flags={"mem-frac": 0.9})
    assert p["flag_errors"] == [] and p["flags"]["tp-size"] == 8 and "tp" not in p["flags"]
    assert p["flags"]["mem-fraction-static"] == 0.9
    assert "--tp-size" in p["argv"] and "--tp" not in p["argv"]
    # an extra flag overrides a common one whatever spelling either uses
    assert plan(sglang_version=version, extra_flags={"tp": 4})["flags"]["tp-size"] == 4
    # an abbreviated backend flag is the backend flag: it may not contradict the point's name
    with pytest.raises(launch.LaunchError, match="would run --moe-runner-backend triton"):
        plan(sglang_version=version, backend="flashinfer_cutedsl", extra_flags={"moe-runner": "triton"})


def test_ambiguous_abbreviation_is_refused_like_the_real_parser():
    p = plan(sglang_version="0.5.23", extra_flags={"cuda-graph-max-bs": 64})
    assert p["flag_errors"] == [
        "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"]
    with pytest.raises(launch.LaunchError, match="sglang_server_api_key"):
        plan(extra_flags={"api-k": "s3cret"})


ROLE = yaml.safe_load((REPO / "roles" / "sglang_server" / "defaults" / "main.yml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_role_defaults_launch_every_pinned_version(version):
    """The role's default launch line parses on both pinned versions (0.5.23 refuses --nsa-*-backend and the
    ambiguous --cuda-graph-max-bs: schema probes nsa_backends / cuda_graph_max_bs exit 2) and is not refused by the
    knowledge base for GLM-5-NVFP4 on the reference host (SM120, a driver the stack supports)."""
    p = launch.plan({"backend": ROLE["sglang_server_backend"], "flags": ROLE["sglang_server_flags"],
                     "version_flags": ROLE["sglang_server_version_flags"],
                     "backends": ROLE["sglang_server_backends"], "sglang_version": version, "venv": "/opt/v"})
    assert p["flag_errors"] == []
    spelled = {"0.5.9": ("--nsa-decode-backend", "--cuda-graph-max-bs"),
               "0.5.23": ("--dsa-decode-backend", "--cuda-graph-max-bs-decode")}[version]
    assert all(flag in p["argv"] for flag in spelled)
    kb = compat.load_kb()
    point = {"backend": p["backend"], "quantization": p["flags"]["quantization"], "sglang_version": version,
             "flags": {k: v for k, v in p["flags"].items() if k not in ("moe-runner-backend", "quantization")},
             "environment": {"FLASHINFER_CUDA_ARCH_LIST": "12.0f"}, "model": p["flags"]["model-path"]}
    facts = {"sm": "sm120", "gpu_count": 8, "driver_version": "580.95.05", "cuda_toolkit": {"release": "13.0"}}
    verdict = compat.evaluate(point, facts, kb)
    assert verdict["status"] in ("supported", "caveat"), compat.format_refusal(verdict)
    assert not any("not checked" in w for w in verdict["warnings"])


def test_version_flags_must_name_known_versions():
    with pytest.raises(launch.LaunchError, match=r"names sglang 0.5, which moesweep has no flag schema"):
        plan(version_flags={0.5: {"tp-size": 8}})
    with pytest.raises(launch.LaunchError, match="must be a flag mapping"):
        plan(version_flags={"0.5.9": ["tp-size"]})
    assert plan(version_flags={"0.5.23": {"nope": 1}})["flag_errors"] == []  # another version's flags stay out


def test_an_overlay_environment_sets_and_unsets_variables_and_changes_the_launch_hash():
    env = {"NCCL_P2P_LEVEL": "PHB", "OMP_NUM_THREADS": "8"}
    overlays = dict(OVERLAYS, sys={"flags": {"moe-runner-backend": "triton"},
                                   "environment": {"NCCL_P2P_LEVEL": "SYS", "NCCL_ALGO": 1}},
                    unset={"flags": {"moe-runner-backend": "triton"}, "environment": {"NCCL_P2P_LEVEL": None}})
    base = plan(backend="triton", backends=overlays, environment=env)
    sys_ = plan(backend="sys", backends=overlays, environment=env)
    unset = plan(backend="unset", backends=overlays, environment=env)
    assert base["environment"]["NCCL_P2P_LEVEL"] == "PHB"
    assert sys_["environment"]["NCCL_P2P_LEVEL"] == "SYS" and sys_["environment"]["NCCL_ALGO"] == "1"
    assert "NCCL_P2P_LEVEL" not in unset["environment"] and unset["environment"]["OMP_NUM_THREADS"] == "8"
    assert len({base["launch_hash"], sys_["launch_hash"], unset["launch_hash"]}) == 3
    with pytest.raises(launch.LaunchError, match="looks like a secret"):
        plan(backend="x", backends={"x": {"environment": {"HF_TOKEN": "t"}}})
    with pytest.raises(launch.LaunchError, match="'environment'"):
        plan(backend="x", backends={"x": {"env": {}}})


def test_a_server_with_an_api_key_loads_the_log_filter_first():
    # sglang logs its ServerArgs, the key included: the unit puts the role's log filter first on PYTHONPATH
    p = plan(api_key_set=True, secret_config_path=SECRETS_FILE, log_filter_dir="/etc/moesweep/python",
             environment={"PYTHONPATH": "/opt/extra"})
    assert p["environment"]["PYTHONPATH"] == "/etc/moesweep/python:/opt/extra"
    assert "PYTHONPATH" not in plan(api_key_set=False, log_filter_dir="/etc/moesweep/python")["environment"]
    assert plan(api_key_set=True, secret_config_path=SECRETS_FILE, log_filter_dir="/etc/moesweep/python")[
        "environment"]["PYTHONPATH"] == "/etc/moesweep/python"


def test_the_log_filter_redacts_both_versions_server_args_lines():
    import importlib.util
    import logging

    path = REPO / "roles" / "sglang_server" / "files" / "log_filter" / "sitecustomize.py"
    spec = importlib.util.spec_from_file_location("log_filter", path)
    before = logging.getLogRecordFactory()
    try:
        filt = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(filt)
        # 0.5.9: the dataclass repr; 0.5.23: resolved_dict() (srt/entrypoints/engine.py, both)
        assert filt.redact("ServerArgs(model_path='m', api_key='sk-123', admin_api_key=None, port=30000)") == \
            "ServerArgs(model_path='m', api_key='<redacted>', admin_api_key=None, port=30000)"
        assert filt.redact("{'api_key': 'sk-1', 'admin_api_key': \"adm\", 'x': 1}") == \
            "{'api_key': '<redacted>', 'admin_api_key': \"<redacted>\", 'x': 1}"
        record = logging.getLogRecordFactory()("sglang", logging.INFO, "f", 1, "server_args=%s", ("X(api_key='k')",),
                                               None)
        assert record.getMessage() == "server_args=X(api_key='<redacted>')"
    finally:
        logging.setLogRecordFactory(before)
