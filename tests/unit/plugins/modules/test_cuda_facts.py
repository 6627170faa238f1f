"""cuda_facts with run_command patched to replay real recorded nvidia-smi and nvcc output."""

from __future__ import annotations

import json
from unittest import mock

import pytest
from ansible.module_utils import basic

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import nvidia_smi as n
from ansible_collections.moesweep.sweep.plugins.modules import cuda_facts
from helpers.paths import FIXTURES

SMI = FIXTURES / "nvidia-smi"
PUB = SMI / "public"
NVCC_13_0 = (SMI / "h200-x1-device" / "nvcc-version.txt").read_text()
NVCC_10_0 = (SMI / "driver-failure" / "nvcc-version-10.0.txt").read_text()


def make_toolkit(prefix, version, nvcc=True):
    home = prefix / f"cuda-{version}"
    (home / "bin").mkdir(parents=True)
    if nvcc:
        tool = home / "bin" / "nvcc"
        tool.write_text("#!/bin/sh\n")
        tool.chmod(0o755)
    return home


@pytest.fixture
def run(run_module):
    """Run the module (the shared harness); nvidia-smi answers ``smi``, each nvcc what ``nvcc`` maps its home to.
    Returns ((kind, result), the commands run, their environments)."""

    def call(args, smi=(0, "", ""), nvcc=None, found="/usr/bin/nvidia-smi"):
        calls, environ = [], []
        answers = nvcc or {}

        def run_command(self, argv, **kwargs):
            calls.append(list(argv))
            environ.append(dict(self.run_command_environ_update))
            if argv[0].endswith("/bin/nvcc"):
                return answers.get(argv[0].rsplit("/bin/nvcc", 1)[0], (0, NVCC_13_0, ""))
            return smi

        with (
            mock.patch.object(basic.AnsibleModule, "run_command", run_command),
            mock.patch.object(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: found),
            mock.patch.object(cuda_facts.os, "access", lambda p, m: p == found or cuda_facts.os.path.isfile(p)),
        ):
            out = run_module(cuda_facts, args)
        return out, calls, environ

    return call


def facts_of(out):
    kind, result = out
    assert kind == "exit", result
    assert result["changed"] is False
    json.dumps(result)
    return result["ansible_facts"]["moesweep_cuda"]


def test_r610_header_gives_the_driver_and_its_cuda(tmp_path, run):
    table = (PUB / "table-610-b200-sglang-27487.txt").read_text()
    out, calls, environ = run(
        {"prefix": str(tmp_path), "driver_min_cuda": "13.0", "driver_min_version": "580.65.06"}, smi=(0, table, "")
    )
    f = facts_of(out)
    assert (f["driver_version"], f["driver_cuda_version"], f["driver_failure"]) == ("610.43.02", "13.3", None)
    assert (f["driver_ok"], f["driver_ok_basis"]) == (True, "cuda")
    assert f["nvidia_smi"] == "/usr/bin/nvidia-smi" and calls == [["/usr/bin/nvidia-smi"]]
    assert all(env["LC_ALL"] == "C" for env in environ)


def test_driver_older_than_the_stack_needs(run):
    table = (SMI / "rtx-pro-6000" / "nvidia-smi-570.172.08.txt").read_text()
    out, _, _ = run({"driver_min_cuda": "13.0", "driver_min_version": "580.65.06", "gather_toolkits": False},
                    smi=(0, table, ""))  # fmt: skip
    f = facts_of(out)
    assert (f["driver_version"], f["driver_cuda_version"]) == ("570.172.08", "12.8")
    assert (f["driver_ok"], f["driver_ok_basis"]) == (False, "cuda")


def test_vgpu_host_without_a_cuda_version_compares_the_driver_version(run):
    table = (PUB / "table-460-vgpu-host-prompt-glued-vgpu-unlock-30.txt").read_text()
    args = {"driver_min_cuda": "12.8", "driver_min_version": "570.26", "gather_toolkits": False}
    f = facts_of(run(args, smi=(0, table, ""))[0])
    assert (f["driver_version"], f["driver_cuda_version"]) == ("460.32.04", None)
    assert (f["driver_ok"], f["driver_ok_basis"]) == (False, "driver-version")


@pytest.mark.parametrize("name", ["nvidia-smi-not-loaded.txt", "nvml-version-mismatch.txt"])
def test_driver_failure_is_a_fact_with_nvidia_smis_text(name, run):
    text = (SMI / "driver-failure" / name).read_text()
    f = facts_of(run({"driver_min_cuda": "12.8", "gather_toolkits": False}, smi=(9, text, ""))[0])
    assert f["driver_version"] is None and f["driver_failure"] == text.splitlines()[0].strip()
    assert (f["driver_ok"], f["driver_ok_basis"]) == (False, "no-driver")


def test_no_nvidia_smi_at_all(run):
    f = facts_of(run({"driver_min_cuda": "12.8", "gather_toolkits": False}, found=None)[0])
    assert f["driver_failure"] == "nvidia-smi not found in PATH" and f["nvidia_smi"] is None
    assert f["driver_ok"] is False
    f = facts_of(run({"nvidia_smi": "/opt/none/nvidia-smi", "gather_toolkits": False}, found=None)[0])
    assert f["driver_failure"] == "/opt/none/nvidia-smi not executable"


def test_nvidia_smi_that_prints_no_version(run):
    f = facts_of(run({"gather_toolkits": False}, smi=(6, "", "Unable to determine the device handle"))[0])
    assert f["driver_failure"] == "Unable to determine the device handle"
    f = facts_of(run({"gather_toolkits": False}, smi=(0, "garbage\n", ""))[0])
    assert f["driver_failure"] == "/usr/bin/nvidia-smi exited 0: garbage"


def test_toolkits_under_the_prefix_with_each_nvcc_release(tmp_path, run):
    make_toolkit(tmp_path, "13.1")
    make_toolkit(tmp_path, "12.8")
    make_toolkit(tmp_path, "10.0")
    make_toolkit(tmp_path, "12.9", nvcc=False)
    (tmp_path / "cuda").symlink_to(tmp_path / "cuda-12.8")  # the alternatives link is not a toolkit
    (tmp_path / "cuda-12").mkdir()
    (tmp_path / "cuda-13.2.txt").write_text("")
    answers = {
        str(tmp_path / "cuda-12.8"): (0, "Cuda compilation tools, release 12.8, V12.8.93\n", ""),
        str(tmp_path / "cuda-13.1"): (0, "Cuda compilation tools, release 13.1, V13.1.115\n", ""),
        str(tmp_path / "cuda-10.0"): (0, NVCC_10_0, ""),
    }
    out, calls, _ = run({"prefix": str(tmp_path), "gather_driver": False}, nvcc=answers)
    f = facts_of(out)
    assert [(t["version"], t["release"], t["nvcc_version"]) for t in f["toolkits"]] == [
        ("10.0", "10.0", "10.0.130"),
        ("12.8", "12.8", "12.8.93"),
        ("12.9", None, None),
        ("13.1", "13.1", "13.1.115"),
    ]
    assert f["toolkits"][2]["nvcc"] is None and f["toolkits"][1]["home"] == str(tmp_path / "cuda-12.8")
    assert f["driver_version"] is None and f["driver_ok"] is None
    assert all(c[0].endswith("/bin/nvcc") and c[1:] == ["--version"] for c in calls)


def test_selected_toolkit_and_its_errors(tmp_path, run):
    home = make_toolkit(tmp_path, "12.8")
    out, _, _ = run({"cuda_home": str(home), "gather_driver": False, "gather_toolkits": False},
                    nvcc={str(home): (0, "Cuda compilation tools, release 12.8, V12.8.93\n", "")})  # fmt: skip
    sel = facts_of(out)["selected"]
    assert (sel["home"], sel["nvcc"], sel["release"], sel["nvcc_version"], sel["error"]) == (
        str(home),
        str(home / "bin" / "nvcc"),
        "12.8",
        "12.8.93",
        None,
    )
    assert sel["output"] == "Cuda compilation tools, release 12.8, V12.8.93"
    missing = facts_of(run({"cuda_home": str(tmp_path / "cuda-13.0"), "gather_driver": False,
                             "gather_toolkits": False})[0])["selected"]  # fmt: skip
    assert missing["nvcc"] is None and missing["error"].endswith("/cuda-13.0/bin/nvcc is missing or not executable")
    broken = facts_of(run({"cuda_home": str(home), "gather_driver": False, "gather_toolkits": False},
                          nvcc={str(home): (1, "", "segfault")})[0])["selected"]  # fmt: skip
    assert broken["error"] == f"{home}/bin/nvcc --version exited 1" and broken["output"] == "segfault"


def test_check_mode_runs_the_same_read_only_probes(tmp_path, run):
    make_toolkit(tmp_path, "12.8")
    table = (SMI / "h200-x2" / "nvidia-smi.txt").read_text()
    out, calls, _ = run({"_ansible_check_mode": True, "prefix": str(tmp_path)}, smi=(0, table, ""))
    f = facts_of(out)
    assert f["driver_version"] == "580.159.04" and [t["version"] for t in f["toolkits"]] == ["12.8"]
    assert calls[0] == ["/usr/bin/nvidia-smi"] and calls[1][1:] == ["--version"]


def test_bad_minimums_fail_before_anything_runs(run):
    out, calls, _ = run({"driver_min_cuda": "twelve"})
    assert out[0] == "fail" and "driver_min_cuda 'twelve' is not a version" in out[1]["msg"]
    assert calls == []


@pytest.mark.parametrize(
    "driver,cuda,need,floor,expected",
    [
        ("610.43.02", "13.3", "13.0", "580.65.06", (True, "cuda")),
        ("570.172.08", "12.8", "12.8", "570.26", (True, "cuda")),
        ("570.172.08", "12.8", "12.9", "575.51.03", (False, "cuda")),
        ("580.105.06", None, "13.0", "580.65.06", (True, "driver-version")),
        ("580.105.06", None, "13.1", "590.44.01", (False, "driver-version")),
        (None, None, "12.8", "570.26", (False, "no-driver")),
        ("580.105.06", None, "13.0", None, (False, "unknown")),
    ],
)
def test_driver_supports(driver, cuda, need, floor, expected):
    assert n.driver_supports(driver, cuda, need, floor) == expected


def test_toolkit_versions_and_version_tuple():
    assert n.toolkit_versions(["cuda-13.1", "cuda", "cuda-12.10", "cuda-12.8", "cuda-12", "x"]) == [
        "12.8",
        "12.10",
        "13.1",
    ]
    assert n.version_tuple("580.65.06") == (580, 65, 6) and n.version_tuple("N/A") is None


def test_replay_of_the_real_h200_run_gives_the_recorded_facts(tmp_path, run):
    """The device machine's run (h200-x1-device-20261201/cuda-facts.json), replayed from its nvidia-smi
    output and nvcc text under a copy of its /usr/local layout, must give the same facts."""
    dev = SMI / "h200-x1-device-20261201"
    recorded = json.loads((dev / "cuda-facts.json").read_text())["min-cuda-12.8"]
    nvcc_text = recorded["ansible_facts"]["moesweep_cuda"]["selected"]["output"] + "\n"
    make_toolkit(tmp_path, "13.0")
    (tmp_path / "cuda-13").mkdir()  # present there too; not a versioned toolkit
    (tmp_path / "cuda").symlink_to(tmp_path / "cuda-13.0")
    args = dict(recorded["invocation"]["module_args"], prefix=str(tmp_path), cuda_home=str(tmp_path / "cuda"))
    out, _, _ = run(
        args,
        smi=(0, (dev / "nvidia-smi.txt").read_text(), ""),
        nvcc={str(tmp_path / "cuda-13.0"): (0, nvcc_text, ""), str(tmp_path / "cuda"): (0, nvcc_text, "")},
        found="/usr/local/nvidia/bin/nvidia-smi",
    )
    replayed = json.loads(json.dumps(facts_of(out)).replace(str(tmp_path), "/usr/local"))
    assert replayed == recorded["ansible_facts"]["moesweep_cuda"]
    assert replayed["driver_ok"] is True and replayed["toolkits"][0]["nvcc_version"] == "13.0.88"
    stricter = json.loads((dev / "cuda-facts.json").read_text())["min-cuda-13.1"]["ansible_facts"]["moesweep_cuda"]
    assert (stricter["driver_ok"], stricter["driver_ok_basis"]) == (False, "cuda")  # CUDA 13.0 < 13.1
