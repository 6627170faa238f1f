"""Unit tests for plugins/plugin_utils/sglang_flags.py against the committed schemas from the real sglang wheels.

The schemas were dumped from sglang's own argparse parser (scripts/extract_sglang_flags.py); their "probes"
hold what that parser printed for a few command lines. These tests check the loader, argparse-exact option
resolution, validation and rendering against that data, and cross-check resolution against CPython's argparse
itself on a parser rebuilt from the schema.
"""

from __future__ import annotations

import argparse
import json
import sys

import pytest
from ansible_collections.moesweep.sweep.plugins.plugin_utils import sglang_flags as sf
from helpers.paths import REPO

DATA = REPO / "data" / "sglang"
VERSIONS = ["0.5.9", "0.5.23"]

MOE_RUNNER_0_5_23 = [
    "auto", "deep_gemm", "triton", "triton_kernel", "flashinfer_trtllm", "experimental_sgl_trtllm",
    "flashinfer_trtllm_routed", "flashinfer_cutlass", "flashinfer_mxfp4", "flashinfer_cutedsl",
    "flashinfer_megamoe", "cutlass", "aiter", "marlin", "humming", "experimental_sgl_marlin", "lora_cutedsl",
    "lora_triton", "lora_marlin", "hpc_ops", "megamoe", "intel_xpu",
]
MOE_RUNNER_0_5_9 = [
    "auto", "deep_gemm", "triton", "triton_kernel", "flashinfer_trtllm", "flashinfer_cutlass",
    "flashinfer_mxfp4", "flashinfer_cutedsl", "cutlass",
]


@pytest.fixture(scope="module")
def s9():
    return sf.load_schema("0.5.9")


@pytest.fixture(scope="module")
def s23():
    return sf.load_schema("0.5.23")


@pytest.fixture(params=VERSIONS)
def schema(request):
    return sf.load_schema(request.param)


# ---------------------------------------------------------------- loading


def test_default_data_dir_is_repo_data():
    assert sf.default_data_dir() == DATA


def test_list_versions_sorted_numerically():
    versions = sf.list_versions()
    assert versions[:2] == ["0.5.9", "0.5.23"] or {"0.5.9", "0.5.23"} <= set(versions)
    assert versions.index("0.5.9") < versions.index("0.5.23")


def test_list_versions_other_dir(tmp_path):
    for v in ("0.5.10", "0.5.2", "0.5.10rc1"):
        (tmp_path / f"flags-{v}.json").write_text("{}")
    (tmp_path / "README.md").write_text("x")
    assert sf.list_versions(tmp_path) == ["0.5.2", "0.5.10", "0.5.10rc1"]


def test_load_unknown_version_names_known_ones():
    with pytest.raises(FileNotFoundError, match=r"0\.5\.9"):
        sf.load_schema("9.9.9")


def test_load_schema_custom_dir(tmp_path):
    src = json.loads((DATA / "flags-0.5.9.json").read_text())
    (tmp_path / "flags-0.5.9.json").write_text(json.dumps(src))
    schema = sf.load_schema("0.5.9", data_dir=tmp_path)
    assert schema["_data_dir"] == str(tmp_path)
    assert "--tp-size" in schema["_options"]


def test_schema_provenance(schema):
    assert schema["extraction_method"] == "real-parser"
    assert schema["wheel"].startswith("sglang-" + schema["sglang_version"] + "-")
    assert len(schema["wheel_sha256"]) == 64
    assert schema["allow_abbrev"] is True
    assert schema["prefix_chars"] == "-"


def test_counts_0_5_23_match_facts(s23):
    by_class = s23["counts"]["by_action_class"]
    assert s23["counts"]["actions"] == 532
    assert by_class["_StoreAction"] == 356
    assert by_class["_StoreTrueAction"] == 159
    assert by_class["BooleanOptionalAction"] == 12
    assert s23["counts"]["deprecated"] == 3
    assert len(s23["actions"]) == 532


def test_counts_are_consistent(schema):
    kinds = {}
    for a in schema["actions"]:
        kinds[a["kind"]] = kinds.get(a["kind"], 0) + 1
    assert kinds == schema["counts"]["by_kind"]


def test_prog_per_version(s9, s23):
    assert s23["prog"] == "sglang serve"
    assert s23["prog_source"]["text"] == 'parser = argparse.ArgumentParser(prog="sglang serve")'
    # 0.5.9 leaves prog to argparse: basename(sys.argv[0]) = launch_server.py under python -m on 3.11
    assert s9["prog_source"]["text"] == "parser = argparse.ArgumentParser()"
    assert s9["prog"] == "launch_server.py"
    assert s9["prog_by_entrypoint"]["sglang serve"] == "sglang"


def test_usage_starts_with_prog(schema):
    assert schema["usage"].startswith("usage: " + schema["prog"] + " [-h] --model-path MODEL_PATH")


# ---------------------------------------------------------------- resolution


def test_tp_is_prefix_of_tp_size(schema):
    action, opt, explicit = sf.resolve_option(schema, "--tp")
    assert opt == "--tp-size" and explicit is None
    assert action["type"] == "int"
    assert sf.resolve_option(schema, "--tp=8")[1:] == ("--tp-size", "8")


def test_tp_size_dest_per_version(s9, s23):
    assert sf.resolve_option(s9, "--tp-size")[0]["dest"] == "tensor_parallel_size"
    assert sf.resolve_option(s23, "--tp-size")[0]["dest"] == "tp_size"
    assert sf.resolve_option(s23, "--tensor-parallel-size")[0]["dest"] == "tp_size"


def test_cuda_graph_max_bs_ambiguous_on_0_5_23(s23):
    with pytest.raises(sf.SchemaError) as err:
        sf.resolve_option(s23, "--cuda-graph-max-bs")
    assert str(err.value) == (
        "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
    )


def test_cuda_graph_max_bs_exact_on_0_5_9(s9):
    assert sf.resolve_option(s9, "--cuda-graph-max-bs")[1] == "--cuda-graph-max-bs"


def test_nsa_decode_backend_by_version(s9, s23):
    assert sf.resolve_option(s9, "--nsa-decode-backend")[1] == "--nsa-decode-backend"
    with pytest.raises(sf.SchemaError, match="unrecognized arguments: --nsa-decode-backend"):
        sf.resolve_option(s23, "--nsa-decode-backend")
    assert sf.resolve_option(s23, "--dsa-decode-backend")[1] == "--dsa-decode-backend"
    with pytest.raises(sf.SchemaError):
        sf.resolve_option(s9, "--dsa-decode-backend")


def test_positional_like_tokens(schema):
    for token in ("model", "", "-", "-5", "-1.5", "-- x"):
        assert sf.resolve_option(schema, token) is None


def test_short_help_and_concatenation(schema):
    assert sf.resolve_option(schema, "-h")[1] == "-h"
    assert sf.resolve_option(schema, "-hfoo")[1:] == ("-h", "foo")
    assert sf.resolve_option(schema, "--he")[1] == "--help"


def test_probes_agree_with_resolver(schema):
    """The real parser's recorded outcomes must be what resolve_option predicts."""
    prog = schema["prog"]
    for name, probe in schema["probes"].items():
        errors = []
        for token in probe["argv"]:
            try:
                sf.resolve_option(schema, token)
            except sf.SchemaError as exc:
                errors.append(str(exc))
        line = probe.get("error_line", "")
        if "ambiguous option" in line:
            assert errors and line == f"{prog}: error: {errors[0]}", name
        elif "unrecognized arguments" in line:
            assert errors, name
            unknown = line.split("unrecognized arguments: ", 1)[1].split()
            assert all(e.split(": ", 1)[1] in unknown for e in errors), name
        elif probe["exit_status"] == 0:
            assert not errors, name


class _ParserError(Exception):
    pass


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message):
        raise _ParserError(message)


def _rebuild_parser(schema) -> argparse.ArgumentParser:
    parser = _RaisingParser(prog=schema["prog"], add_help=False, allow_abbrev=schema["allow_abbrev"])
    for action in sorted(schema["actions"], key=lambda a: a["order"]):
        if action["kind"] == "boolean_optional":
            parser.add_argument(action["option_strings"][0], dest=action["dest"],
                                action=argparse.BooleanOptionalAction)
        elif not action["takes_value"]:
            parser.add_argument(*action["option_strings"], dest=action["dest"], action="store_true")
        else:
            parser.add_argument(*action["option_strings"], dest=action["dest"], nargs=action["nargs"])
    return parser


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="argparse's prefix rules and texts are 3.11's")
def test_resolution_matches_cpython_argparse(schema):
    parser = _rebuild_parser(schema)
    assert list(parser._option_string_actions) == list(schema["_options"])
    tokens = set()
    for opt in schema["_options"]:
        for cut in range(2, len(opt) + 1):
            tokens.add(opt[:cut])
        tokens.add(opt + "=1")
        tokens.add(opt + "x")
    tokens |= {"--no", "--en", "--enable", "--disable-", "-m", "--", "--=1", "x", "-1"}
    for token in sorted(tokens):
        try:
            expected = parser._parse_optional(token)
            expected_err = None
        except _ParserError as exc:
            expected, expected_err = None, str(exc)
        try:
            got = sf.resolve_option(schema, token)
            got_err = None
        except sf.SchemaError as exc:
            got, got_err = None, str(exc)
        if expected_err is not None:
            assert got_err == expected_err, token
        elif expected is None:
            assert got is None and got_err is None, token
        elif expected[0] is None:  # argparse: an optional it does not know
            assert got_err == f"unrecognized arguments: {token}", token
        else:
            assert got is not None, token
            assert got[1:] == expected[1:], token
            assert got[0]["dest"] == expected[0].dest, token


# ---------------------------------------------------------------- validation


def test_valid_dict(schema):
    flags = {"model-path": "/models/glm", "tp-size": 8, "trust-remote-code": True,
             "moe-runner-backend": "flashinfer_cutlass", "mem-fraction-static": 0.85, "enable-metrics": False,
             "log-level": "info", "watchdog-timeout": 600, "max-running-requests": None}
    assert sf.validate_flags(schema, flags) == []


def test_moe_runner_backend_choices(s9, s23):
    assert sf.resolve_option(s23, "--moe-runner-backend")[0]["choices"] == MOE_RUNNER_0_5_23
    assert sf.resolve_option(s9, "--moe-runner-backend")[0]["choices"] == MOE_RUNNER_0_5_9
    assert sf.resolve_option(s23, "--moe-runner-backend")[0]["default"] == "auto"
    for backend in MOE_RUNNER_0_5_23:
        assert sf.validate_flags(s23, {"moe-runner-backend": backend}) == []
    errors = sf.validate_flags(s9, {"moe-runner-backend": "flashinfer_trtllm_routed"})
    assert errors == [
        "argument --moe-runner-backend: invalid choice: 'flashinfer_trtllm_routed' (choose from "
        + ", ".join(repr(c) for c in MOE_RUNNER_0_5_9) + ")"
    ]


def test_invalid_choice_text_matches_real_parser(schema):
    probe = schema["probes"]["invalid_choice"]
    errors = sf.validate_flags(schema, {"moe-runner-backend": "bogus"})
    assert probe["error_line"] == f"{schema['prog']}: error: {errors[0]}"


def test_invalid_int_and_float_text_matches_real_parser(schema):
    prog = schema["prog"]
    assert [f"{prog}: error: {e}" for e in sf.validate_flags(schema, {"tp-size": "eight"})] == [
        schema["probes"]["invalid_int"]["error_line"]]
    assert [f"{prog}: error: {e}" for e in sf.validate_flags(schema, {"mem-fraction-static": "lots"})] == [
        schema["probes"]["invalid_float"]["error_line"]]


def test_unknown_flag_suggests_and_names_versions(s9, s23):
    (err,) = sf.validate_flags(s23, {"nsa-decode-backend": "trtllm"})
    assert "unknown option --nsa-decode-backend for sglang 0.5.23" in err
    assert "exists in sglang 0.5.9" in err
    assert "--dsa-decode-backend" in err
    (err,) = sf.validate_flags(s9, {"nsa-decode-backend": "trtllm"}) or ("ok",)
    assert err == "ok"
    (err,) = sf.validate_flags(s9, {"trust-remot-code": True})
    assert "did you mean --trust-remote-code" in err


def test_nsa_trtllm_valid_on_0_5_9(s9):
    assert sf.validate_flags(s9, {"nsa-decode-backend": "trtllm", "nsa-prefill-backend": "trtllm"}) == []


def test_abbreviation_refused_in_strict_mode(schema):
    (err,) = sf.validate_flags(schema, {"tp": 8}, allow_abbrev=False)
    assert "--tp is only an abbreviation of --tp-size" in err and "'tp-size'" in err
    assert sf.validate_flags(schema, {"tp": 8}, allow_abbrev=True) == []


def test_abbreviation_accepted_as_the_real_parser_accepts_it(schema):
    # both real parsers keep argparse's allow_abbrev=True, and exit 0 on `--tp 8` (the recorded probes)
    assert schema["allow_abbrev"] is True and schema["probes"]["tp_abbrev"]["exit_status"] == 0
    assert sf.validate_flags(schema, {"tp": 8}) == []
    assert sf.render_argv(schema, {"tp": 8, "trust-remote": True}) == ["--tp-size", "8", "--trust-remote-code"]


def test_ambiguous_prefix_refused_by_default_with_argparse_text(s9, s23):
    probe = s23["probes"]["cuda_graph_max_bs"]
    (err,) = sf.validate_flags(s23, {"cuda-graph-max-bs": 64})
    assert probe["exit_status"] == 2 and probe["error_line"] == f"{s23['prog']}: error: {err}"
    assert sf.validate_flags(s9, {"cuda-graph-max-bs": 64}) == []  # an exact option there


def _probe_flags(argv):
    """A probe's argv after --model-path as a flag dict (None where it is not one: a bare option's value)."""
    flags, args = {}, list(argv)
    while args:
        token = args.pop(0)
        if not token.startswith("--"):
            return None
        name, eq, value = token[2:].partition("=")
        if eq:
            flags[name] = value
        elif args and not args[0].startswith("--"):
            flags[name] = args.pop(0)
        else:
            flags[name] = True
    return flags


def test_validate_flags_agrees_with_every_recorded_real_parse(schema):
    """Each probe the real parser ran (exit 0 or 2): validate_flags accepts exactly those it accepted."""
    checked = 0
    for name, probe in schema["probes"].items():
        flags = _probe_flags(probe["argv"])
        if not flags or name in ("bool_with_value", "missing_value"):
            continue  # the flag dict cannot say `--x=yes` for a flag, nor a valued option without its value
        errors = sf.validate_flags(schema, flags)
        assert (errors == []) == (probe["exit_status"] == 0), (name, errors)
        checked += 1
    assert checked >= 8


def test_canonical_flags_write_the_option_an_abbreviation_stands_for(s9, s23):
    flags = {"tp": 8, "trust-remote-code": True, "mem-frac": 0.9, "tensor-parallel-size": None}
    assert list(sf.canonical_flags(s9, {"tp": 8, "mem-frac": 0.9})) == ["tp-size", "mem-fraction-static"]
    # an alias stays as written; two names of one option stay apart so validate_flags reports them
    assert sf.canonical_flags(s23, flags) == {"tp": 8, "trust-remote-code": True, "mem-fraction-static": 0.9,
                                              "tensor-parallel-size": None}
    assert "set the same option" in sf.validate_flags(s23, sf.canonical_flags(s23, flags))[0]
    # unknown and ambiguous names are kept for validate_flags to refuse
    assert sf.canonical_flags(s23, {"cuda-graph-max-bs": 64, "nope": 1}) == {"cuda-graph-max-bs": 64, "nope": 1}


def test_ambiguous_key(s23):
    assert sf.validate_flags(s23, {"cuda-graph-max-bs": 64}, allow_abbrev=True) == [
        "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
    ]
    assert sf.validate_flags(s23, {"cuda-graph-max-bs-decode": 64, "cuda-graph-max-bs-prefill": 8}) == []


def test_bool_flag_given_non_bool(schema):
    for bad in ("yes", 1, "true", 0):
        errs = sf.validate_flags(schema, {"trust-remote-code": bad})
        assert errs == [f"argument --trust-remote-code: is a flag and takes true/false, got {bad!r}"]


def test_valued_flag_given_bool(schema):
    (err,) = sf.validate_flags(schema, {"log-level": True})
    assert err.startswith("argument --log-level: takes a value, got True")
    (err,) = sf.validate_flags(schema, {"tp-size": False})
    assert "takes a value, got False" in err


def test_type_checks(schema):
    assert sf.validate_flags(schema, {"tp-size": "8"}) == []
    assert sf.validate_flags(schema, {"tp-size": 8.0}) != []
    assert sf.validate_flags(schema, {"mem-fraction-static": 1}) == []
    assert sf.validate_flags(schema, {"mem-fraction-static": "0.9"}) == []
    assert sf.validate_flags(schema, {"preferred-sampling-params": '{"temperature": 0}'}) == []
    assert sf.validate_flags(schema, {"preferred-sampling-params": {"temperature": 0}}) == []
    (err,) = sf.validate_flags(schema, {"preferred-sampling-params": "{nope"})
    assert "invalid loads value" in err
    (err,) = sf.validate_flags(schema, {"tp-size": [8]})
    assert "takes one value" in err


def test_same_option_twice(s9):
    (err,) = sf.validate_flags(s9, {"tp-size": 8, "tensor-parallel-size": 8})
    assert "set the same option" in err


def test_key_shape_errors(schema):
    (err,) = sf.validate_flags(schema, {"--tp-size": 8})
    assert "without leading dashes" in err
    (err,) = sf.validate_flags(schema, {"tp-size=8": True})
    assert "contains '='" in err
    assert sf.validate_flags(schema, ["tp-size"]) != []


def test_help_cannot_be_set(schema):
    (err,) = sf.validate_flags(schema, {"help": True})
    assert "cannot be set" in err


def test_deprecated_flags_0_5_23(s23):
    assert sf.resolve_option(s23, "--disable-cuda-graph")[0]["kind"] == "deprecated_store_true"
    assert sf.validate_flags(s23, {"disable-cuda-graph": True}) == []
    # deprecated, but valued: takes 'amd'
    mono = sf.resolve_option(s23, "--monokernel-backend")[0]
    assert mono["kind"] == "deprecated_store_const" and mono["takes_value"] is True
    assert sf.validate_flags(s23, {"monokernel-backend": "amd"}) == []
    assert sf.validate_flags(s23, {"monokernel-backend": True}) != []


# ---------------------------------------------------------------- rendering


def test_render_basic(schema):
    argv = sf.render_argv(schema, {"model-path": "/m", "tp-size": 8, "trust-remote-code": True,
                                   "disable-radix-cache": False, "moe-runner-backend": "flashinfer_cutlass",
                                   "mem-fraction-static": 0.85, "max-running-requests": None})
    assert argv == ["--model-path", "/m", "--tp-size", "8", "--trust-remote-code",
                    "--moe-runner-backend", "flashinfer_cutlass", "--mem-fraction-static", "0.85"]


def test_render_expands_abbreviation_never_emits_it(schema):
    assert sf.render_argv(schema, {"tp": 8}, allow_abbrev=True) == ["--tp-size", "8"]


def test_render_refuses_invalid(s23):
    with pytest.raises(sf.SchemaError, match="nsa-decode-backend"):
        sf.render_argv(s23, {"nsa-decode-backend": "trtllm"})
    with pytest.raises(sf.SchemaError, match="abbreviation"):
        sf.render_argv(s23, {"tp": 8}, allow_abbrev=False)
    with pytest.raises(sf.SchemaError, match="ambiguous option: --cuda-graph-max-bs"):
        sf.render_argv(s23, {"cuda-graph-max-bs": 64})


def test_render_boolean_optional(s23):
    assert sf.render_argv(s23, {"enable-tf32-matmul": True}) == ["--enable-tf32-matmul"]
    assert sf.render_argv(s23, {"enable-tf32-matmul": False}) == ["--no-enable-tf32-matmul"]
    assert sf.render_argv(s23, {"no-enable-tf32-matmul": True}) == ["--no-enable-tf32-matmul"]
    assert sf.render_argv(s23, {"no-enable-tf32-matmul": False}) == ["--enable-tf32-matmul"]
    (err,) = sf.validate_flags(s23, {"enable-tf32-matmul": True, "no-enable-tf32-matmul": True})
    assert "set the same option" in err


def test_render_negative_and_lists_and_json(schema):
    assert sf.render_argv(schema, {"chunked-prefill-size": -1}) == ["--chunked-prefill-size=-1"]
    nargs_plus = next(a for a in schema["actions"] if a["nargs"] == "+" and a["type"] == "int")
    name = nargs_plus["option_strings"][0][2:]
    assert sf.render_argv(schema, {name: [1, 2, 4]}) == ["--" + name, "1", "2", "4"]
    assert sf.render_argv(schema, {"preferred-sampling-params": {"top_k": 1, "temperature": 0}}) == [
        "--preferred-sampling-params", '{"temperature":0,"top_k":1}']


def test_rendered_argv_parses_with_rebuilt_argparse(schema):
    parser = _rebuild_parser(schema)
    flags = {"model-path": "/m", "tp-size": 8, "trust-remote-code": True, "moe-runner-backend": "triton",
             "chunked-prefill-size": -1, "mem-fraction-static": 0.8}
    ns = parser.parse_args(sf.render_argv(schema, flags))
    assert ns.model_path == "/m" and ns.moe_runner_backend == "triton"
    assert ns.chunked_prefill_size == "-1"
    assert (getattr(ns, "tp_size", None) or getattr(ns, "tensor_parallel_size", None)) == "8"


def test_simulator_does_not_import_this_module():
    sim = REPO / "simulator"
    if not sim.exists():
        pytest.skip("no simulator in this checkout")
    for path in sim.rglob("*.py"):
        text = path.read_text(errors="replace")
        assert "sglang_flags" not in text or "module_utils" not in text, path
