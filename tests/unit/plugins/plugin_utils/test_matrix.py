"""Unit tests for plugins/plugin_utils/matrix.py: the one schema and validator of a launch matrix, against the
committed flag schemas of the real sglang parsers (data/sglang/flags-<version>.json)."""

from __future__ import annotations

import pytest
from ansible_collections.moesweep.sweep.plugins.plugin_utils import matrix as mx
from ansible_collections.moesweep.sweep.plugins.plugin_utils import sglang_flags

S9 = sglang_flags.load_schema("0.5.9")
S23 = sglang_flags.load_schema("0.5.23")

THREE = {"axes": {"moe-runner-backend": ["flashinfer_cutlass", "flashinfer_trtllm", "triton"],
                  "attention-backend": ["flashinfer", "trtllm_mla"],
                  "fp8-gemm-backend": ["cutlass", "deep_gemm"]}}


def refused(matrix, schema=S9):
    with pytest.raises(mx.MatrixError) as info:
        mx.expand(matrix, schema)
    return str(info.value)


def test_three_axes_expand_to_their_product_in_axis_order():
    out = mx.expand(THREE, S9)
    names = [c["name"] for c in out["cells"]]
    assert len(names) == 12 == len(set(names))
    assert names[0] == "flashinfer_cutlass.flashinfer.cutlass"
    assert names[1] == "flashinfer_cutlass.flashinfer.deep_gemm"
    assert names[-1] == "triton.trtllm_mla.deep_gemm"
    cell = out["cells"][-1]
    assert cell["axes"] == {"moe-runner-backend": "triton", "attention-backend": "trtllm_mla",
                            "fp8-gemm-backend": "deep_gemm"}
    assert cell["overlay"] == {"flags": cell["axes"]}


def test_names_are_stable_and_valid_point_names():
    first = [c["name"] for c in mx.expand(THREE, S9)["cells"]]
    assert first == [c["name"] for c in mx.expand(THREE, S9)["cells"]]
    from ansible_collections.moesweep.sweep.plugins.plugin_utils import plan_checks

    assert plan_checks.parse_points(None, first) == first


def test_env_axis_numbers_and_bools_get_readable_names_and_an_environment_overlay():
    out = mx.expand({"axes": {"tp": [4, 8], "disable-custom-all-reduce": [True, False],
                              "env:NCCL_P2P_LEVEL": ["PHB", None]}}, S9)
    names = [c["name"] for c in out["cells"]]
    assert names[0] == "tp-size-4.disable-custom-all-reduce.NCCL_P2P_LEVEL-PHB"
    assert "tp-size-8.no-disable-custom-all-reduce.NCCL_P2P_LEVEL-unset" in names
    cell = out["cells"][0]
    # the abbreviation argparse accepts is written out: the unit carries --tp-size
    assert cell["overlay"]["flags"] == {"tp-size": 4, "disable-custom-all-reduce": True}
    assert cell["overlay"]["environment"] == {"NCCL_P2P_LEVEL": "PHB"}
    assert out["cells"][1]["overlay"]["environment"] == {"NCCL_P2P_LEVEL": None}


def test_zip_ties_axes_and_exclude_drops_cells():
    out = mx.expand({"axes": {"moe-runner-backend": ["triton", "flashinfer_cutlass"],
                              "nsa-decode-backend": ["trtllm", "flashmla_kv"],
                              "nsa-prefill-backend": ["trtllm", "flashmla_sparse"]},
                     "zip": [["nsa-decode-backend", "nsa-prefill-backend"]],
                     "exclude": [{"moe-runner-backend": "triton", "nsa-decode-backend": ["flashmla_kv"]}]}, S9)
    assert [c["name"] for c in out["cells"]] == [
        "triton.trtllm.trtllm", "flashinfer_cutlass.trtllm.trtllm", "flashinfer_cutlass.flashmla_kv.flashmla_sparse"]
    assert out["excluded"] == ["triton.flashmla_kv.flashmla_sparse"]


def test_structure_check_without_a_schema_takes_any_name():
    norm = mx.check_matrix({"axes": {"some-flag": [1, 2]}})
    assert norm["axes"] == [("some-flag", [1, 2])]


@pytest.mark.parametrize("matrix, words", [
    ({"axes": {"attention-backnd": ["fa3"]}}, ["unknown option --attention-backnd", "did you mean --attention-backend",
                                              "name an option of sglang 0.5.9"]),
    ({"axes": {"attention-backend": ["fa9"]}}, ["invalid choice: 'fa9'", "drop the value or pick a valid one"]),
    ({"axes": {"tp-size": ["eight"]}}, ["invalid int value", "drop the value"]),
    ({"axes": {"attention-backend": []}}, ["axis 'attention-backend' is empty", "remove the axis"]),
    ({"axes": {"attention-backend": "fa3"}}, ["must be a list of values"]),
    ({"axes": {}}, ["no axes"]),
    ({"axes": {"tp-size": [8, "8"]}}, ["lists", "twice", "drop one"]),
    ({"axes": {"tp": [8], "tp-size": [4]}}, ["same option (--tp-size)", "keep one"]),
    ({"axes": {"attention-backend": ["fa3"]}, "exclude": [{"attention": "fa3"}]},
     ["names 'attention', which is no axis", "fix the name or drop the rule"]),
    ({"axes": {"attention-backend": ["fa3"]}, "exclude": [{"attention-backend": "fa4"}]},
     ["never matches"]),
    ({"axes": {"attention-backend": ["fa3"]}, "exclude": [{"attention-backend": "fa3"}]},
     ["leave no cell", "loosen"]),
    ({"axes": {"a": [1]}, "zips": []}, ["unknown key(s) zips"]),
    ({"axes": {"attention-backend": ["fa3", "fa4"], "fp8-gemm-backend": ["cutlass"]},
      "zip": [["attention-backend", "fp8-gemm-backend"]]}, ["different numbers of values"]),
    ({"axes": {"attention-backend": ["fa3"]}, "zip": [["attention-backend", "nope"]]},
     ["names 'nope', which is no axis"]),
    ({"axes": {"env:HF_TOKEN": ["x"]}}, ["looks like a secret"]),
    ({"axes": {"env:1BAD": ["x"]}}, ["not an environment variable name"]),
    ({"axes": {"env:NCCL_P2P_LEVEL": [True]}}, ["quote it"]),
    ({"axes": {"cuda-graph-max-bs": [64]}}, ["ambiguous option"]),
])
def test_bad_input_is_refused_with_the_fix(matrix, words):
    schema = S23 if "cuda-graph-max-bs" in matrix["axes"] else S9
    message = refused(matrix, schema)
    for word in words:
        assert word in message, message


def test_a_value_valid_on_one_version_is_refused_on_the_other():
    assert mx.expand({"axes": {"fp8-gemm-backend": ["flashinfer_cutlass"]}}, S23)["cells"]
    assert "invalid choice: 'flashinfer_cutlass'" in refused({"axes": {"fp8-gemm-backend": ["flashinfer_cutlass"]}})


def test_values_that_collide_in_a_name_are_a_duplicate_cell():
    message = refused({"axes": {"env:NCCL_ALGO": ["Ring Tree", "Ring-Tree"]}})
    assert "same name" in message and "make the values distinct" in message


def test_long_names_are_cut_with_a_hash():
    out = mx.expand({"axes": {f"env:NCCL_ALGO_{i}": [f"value_number_{i}"] for i in range(8)}}, S9)
    name = out["cells"][0]["name"]
    assert len(name) <= 128
    assert name.startswith("NCCL_ALGO_0-value_number_0.")


def test_load_matrix_file_wants_the_vars_file_form():
    assert mx.load_matrix_file("matrix:\n  axes:\n    tp-size: [8]\n") == {"axes": {"tp-size": [8]}}
    with pytest.raises(mx.MatrixError, match="no top-level 'matrix' key"):
        mx.load_matrix_file("axes: {tp-size: [8]}\n")


def test_the_example_matrix_expands_on_both_pinned_versions():
    from helpers.paths import REPO

    example = mx.load_matrix_file((REPO / "examples" / "matrix.yml").read_text(), "examples/matrix.yml")
    for schema in (S9, S23):
        assert len(mx.expand(example, schema)["cells"]) == 12


def test_a_matrix_above_its_cap_is_refused_with_its_count_before_a_cell_is_built():
    big = {"axes": {"moe-runner-backend": ["triton", "flashinfer_cutlass", "cutlass", "flashinfer_cutedsl", "auto"],
                    "max-running-requests": list(range(8, 168, 8)),
                    "env:NCCL_P2P_LEVEL": ["LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "0", "1", "2", "3"]}}
    with pytest.raises(mx.MatrixError) as info:
        mx.expand(big)
    text = str(info.value)
    assert "1000 cells (5 moe-runner-backend x 20 max-running-requests x 10 env:NCCL_P2P_LEVEL)" in text
    assert "above 64 (max_cells)" in text and "max_cells: 1000" in text and "zip" in text
    assert len(mx.expand(dict(big, max_cells=1000))["cells"]) == 1000
    # a zip group counts once; excluded cells still count (the cap is on what the axes span)
    zipped = {"axes": {"tp-size": [1, 2, 4, 8], "dp-size": [8, 4, 2, 1]}, "zip": [["tp-size", "dp-size"]]}
    assert mx.cell_count(mx.check_matrix(zipped)) == 4
    for bad in (0, -1, True, "64"):
        with pytest.raises(mx.MatrixError, match="max_cells must be a whole number"):
            mx.check_matrix(dict(zipped, max_cells=bad))
