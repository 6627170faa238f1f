"""sglang_env_state fed the real probe / import-check / freeze output and provenance record of a simulated
host (tests/fixtures/sglang_env/SOURCES.md), and the role's contract with it (argument specs, stacks)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from unittest import mock

import pytest
import yaml
from ansible.module_utils import basic

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import venv_lock as vl
from ansible_collections.moesweep.sweep.plugins.modules import sglang_env_state
from helpers.paths import FIXTURES, REPO

FIX = FIXTURES / "sglang_env"
ROLE = REPO / "roles" / "sglang_env"
LOCKS = ROLE / "files" / "locks"
SERVER_VENV, CLIENT_VENV = "/opt/moesweep/venvs/sglang", "/opt/moesweep/venvs/client"
PYTHON = "/usr/bin/python3.11"
RECORDED = (FIX / "provenance.json").read_text()


@pytest.fixture(autouse=True)
def harness(monkeypatch, run_module):
    """Every Host runs the module through the shared harness (tests/unit/plugins/conftest.py)."""
    monkeypatch.setattr(Host, "run_module", staticmethod(run_module), raising=False)
    # The copies the tests write belong to whoever runs them.
    monkeypatch.setattr(vl, "OWNER_UID", os.getuid())
    monkeypatch.setattr(vl, "OWNER_GID", os.getgid())


def venv(name, stack, path, python_min="3.10", imports=None):
    return dict(name=name, path=path, stack=stack, lock=(LOCKS / f"{stack}.txt").read_text(), python_min=python_min,
                imports=imports or ([] if name == "client" else ["sglang", "flashinfer", "torch"]))


SERVER = venv("server", "test-cpu-sglang-0.5.9", SERVER_VENV)
CLIENT = venv("client", "client-sglang-0.5.9", CLIENT_VENV, imports=["sglang", "sglang.bench_serving"])


class Host:
    """A target: which files exist, and what each command prints (the recordings)."""

    def __init__(self, tmp: Path, *, venvs=("server", "client"), record: str | None = RECORDED,
                 probes=None, python_version: str = (FIX / "python3.11-version.txt").read_text()):
        self.tmp = tmp
        self.exists = {PYTHON}
        self.exists |= {SERVER_VENV + "/bin/python"} if "server" in venvs else set()
        self.exists |= {CLIENT_VENV + "/bin/python"} if "client" in venvs else set()
        self.probes = {SERVER_VENV: "probe-server.json", CLIENT_VENV: "probe-client.json", **(probes or {})}
        self.python_version = python_version
        self.verify = {SERVER_VENV: ((FIX / "verify-server.json").read_text(), ""),
                       CLIENT_VENV: ((FIX / "verify-client.json").read_text(), "")}
        self.verify_rc = 0
        self.nvidia_smi: str | None = None
        self.calls: list[list[str]] = []
        self.provenance = tmp / "etc" / "provenance.json"
        self.lock_dir = tmp / "etc" / "locks"
        if record is not None:
            self.provenance.parent.mkdir(parents=True, exist_ok=True)
            self.provenance.parent.chmod(0o755)
            self.provenance.write_text(record)
            self.provenance.chmod(0o644)

    def copy_locks(self):
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        self.lock_dir.chmod(0o755)
        for stack in ("test-cpu-sglang-0.5.9", "client-sglang-0.5.9"):
            (self.lock_dir / f"{stack}.txt").write_bytes((LOCKS / f"{stack}.txt").read_bytes())
            (self.lock_dir / f"{stack}.txt").chmod(0o644)

    def run_command(self, argv, **kw):
        self.calls.append(list(argv))
        venv_dir = argv[0][: -len("/bin/python")] if argv[0].endswith("/bin/python") else None
        if argv[1:] == ["-c", vl.PYTHON_VERSION_SCRIPT]:
            return 0, self.python_version, ""
        if argv[1:] == ["-c", vl.PROBE_SCRIPT]:
            return 0, (FIX / self.probes[venv_dir]).read_text(), ""
        if argv[1:3] == ["-c", vl.VERIFY_SCRIPT]:
            assert kw["environ_update"]["HF_HUB_OFFLINE"] == "1"
            out, err = self.verify[venv_dir]
            return self.verify_rc, out, err
        if argv[1:4] == ["-m", "pip", "freeze"]:
            name = "freeze-server.txt" if venv_dir == SERVER_VENV else "freeze-client.txt"
            return 0, (FIX / name).read_text(), ""
        if argv[1:] == ["-L"]:
            return (0, self.nvidia_smi, "") if self.nvidia_smi is not None else (9, "", "")
        if argv[1:] == ["-m", "sglang.check_env"]:
            return 0, "", ""
        raise AssertionError(f"unexpected command {argv}")

    def get_bin_path(self, name, *a, **kw):
        if name == "nvidia-smi":
            return "/usr/bin/nvidia-smi" if self.nvidia_smi is not None else None
        return PYTHON if name in ("python3.11", "python3") else None

    def call(self, check_mode=False, **args):
        """(kind, result) of one module run on this host."""
        params = dict(venvs=[SERVER, CLIENT], provenance_path=str(self.provenance), lock_dir=str(self.lock_dir),
                      index_url="http://10.213.2.1:8701/simple/", trusted_hosts=["10.213.2.1"],
                      cuda_home="/usr/local/cuda-12.8", _ansible_check_mode=check_mode)
        params.update(args)
        real_exists = os.path.exists

        def exists(path):
            # ansible's own config loader may run inside the patch too, with bytes paths
            path = os.fsdecode(path)
            return path in self.exists or (not path.startswith("/opt/") and path != PYTHON and real_exists(path))

        def run_command(_module, *a, **kw):
            return self.run_command(*a, **kw)

        def get_bin_path(_module, *a, **kw):
            return self.get_bin_path(*a, **kw)

        with mock.patch.object(basic.AnsibleModule, "run_command", run_command), \
                mock.patch.object(basic.AnsibleModule, "get_bin_path", get_bin_path), \
                mock.patch.object(sglang_env_state.os.path, "exists", exists):
            return self.run_module(sglang_env_state, params)

    def run(self, check_mode=False, **args):
        kind, result = self.call(check_mode, **args)
        assert kind == "exit", result
        return result

    def fail(self, **args):
        kind, result = self.call(**args)
        assert kind == "fail", result
        return result

    def ran(self, what):
        return [c for c in self.calls if what in c]


def by_name(result):
    return {v["name"]: v for v in result["venvs"]}


# ------------------------------------------------------------------------------ no-change run
def test_unchanged_host_holds_its_record_and_installs_nothing(tmp_path):
    host = Host(tmp_path)
    host.copy_locks()
    res = host.run()
    assert res["changed"] is False and res["install"] is False and res["verify"] == []
    for v in res["venvs"]:
        assert v["record_holds"] and v["status"] == "unchanged since verified" and v["missing"] == []
        assert v["install"] is False and v["lock_copy_current"] is True
    assert by_name(res)["server"]["extra"] == ["pip==23.0.1"]
    assert res["provenance"] == json.loads(RECORDED) == res["recorded"]
    assert res["provenance_content"] == RECORDED and res["provenance_current"] is True
    assert res["lock_copies_current"] is True
    assert res["python"]["interpreter"] == PYTHON and res["python"]["version"] == "3.11.2"
    # Nothing slow ran: the interpreter's version, then one probe per venv by its own interpreter.
    assert host.calls == [[PYTHON, "-c", vl.PYTHON_VERSION_SCRIPT],
                          [SERVER_VENV + "/bin/python", "-c", vl.PROBE_SCRIPT],
                          [CLIENT_VENV + "/bin/python", "-c", vl.PROBE_SCRIPT]]
    assert not host.ran(vl.VERIFY_SCRIPT) and not host.ran("freeze")


def test_check_mode_gives_the_same_answer(tmp_path):
    host = Host(tmp_path)
    assert host.run(check_mode=True) == host.run()


def test_a_changed_index_url_keeps_the_venvs_but_rewrites_the_record(tmp_path):
    res = Host(tmp_path).run(index_url="https://mirror.internal/simple")
    assert res["verify"] == [] and res["provenance"]["index_url"] == "https://mirror.internal/simple"
    assert res["provenance_current"] is False


def test_stale_mode_of_the_record_is_not_current(tmp_path):
    host = Host(tmp_path)
    host.provenance.chmod(0o600)
    assert host.run()["provenance_current"] is False


def test_lock_copy_with_other_content_is_not_current(tmp_path):
    host = Host(tmp_path)
    host.copy_locks()
    (host.lock_dir / "client-sglang-0.5.9.txt").write_text("# edited\n")
    res = host.run()
    assert [v["lock_copy_current"] for v in res["venvs"]] == [True, False] and not res["lock_copies_current"]


# ------------------------------------------------------------------------ record no longer holds
def test_something_landing_in_the_server_venv_makes_it_verify_again(tmp_path):
    host = Host(tmp_path, probes={SERVER_VENV: "probe-server-tampered.json"})
    res = host.run()
    server, client = by_name(res)["server"], by_name(res)["client"]
    assert res["install"] is False and res["verify"] == ["server"]
    assert not server["record_holds"] and server["status"] == "the installed distributions changed since the record"
    assert server["missing"] == [] and "moesweep-probe==1.0" in server["extra"]
    assert client["record_holds"]
    assert res["provenance"] is None and res["provenance_current"] is False  # unknown until verified

    host.calls.clear()
    res = host.run(verify=True)
    assert [c[0] for c in host.ran(vl.VERIFY_SCRIPT)] == [SERVER_VENV + "/bin/python"]  # the client is not re-imported
    assert host.ran(vl.VERIFY_SCRIPT)[0][3:] == ["sglang", "flashinfer", "torch"]
    server = by_name(res)["server"]
    assert server["verified"]["versions"] == {"sglang": "0.5.9", "flashinfer": "0.6.3", "torch": "2.13.0+cpu"}
    assert server["status"] == "verified now (the installed distributions changed since the record)"
    rec = json.loads(RECORDED)
    assert res["provenance"] == dict(rec, dist_fingerprint=server["fingerprint"])
    assert res["provenance"]["dist_fingerprint"] != rec["dist_fingerprint"] and res["provenance_current"] is False


def test_no_record_verifies_both(tmp_path):
    host = Host(tmp_path, record=None)
    res = host.run(verify=True)
    assert res["recorded"] is None and res["verify"] == ["server", "client"]
    assert {v["status"] for v in res["venvs"]} == {"verified now (nothing recorded yet)"}
    # The record built from the real outputs is the one the role wrote on that host.
    assert res["provenance_content"] == RECORDED


def test_a_corrupt_record_counts_as_none(tmp_path):
    res = Host(tmp_path, record="{truncated").run()
    assert res["recorded"] is None and res["verify"] == ["server", "client"]


# ----------------------------------------------------------------------------- fresh host
def test_fresh_host_installs_both_locks(tmp_path):
    host = Host(tmp_path, venvs=(), record=None)
    res = host.run()
    server, client = by_name(res)["server"], by_name(res)["client"]
    assert res["install"] is True and res["verify"] == ["server", "client"]
    assert server["exists"] is False and server["fingerprint"] == "" and server["probe_error"] is None
    assert len(server["missing"]) == 51 and len(client["missing"]) == 61
    assert server["status"] == "51 locked distribution(s) to install"
    assert server["install_argv"] == [
        SERVER_VENV + "/bin/python", "-m", "pip", "install", "--require-hashes", "--no-deps", "--only-binary=:all:",
        "-r", str(host.lock_dir) + "/test-cpu-sglang-0.5.9.txt", "--index-url", "http://10.213.2.1:8701/simple/",
        "--trusted-host=10.213.2.1"]
    assert res["index_probe_urls"] == ["http://10.213.2.1:8701/simple/aiohappyeyeballs/"]
    assert res["lock_copies_current"] is False and res["provenance"] is None
    assert res["python"]["create_with"] == PYTHON and res["python"]["install_packages"] == []
    assert not host.ran(vl.PROBE_SCRIPT)  # no venv to probe


def test_after_install_a_venv_still_missing_pins_fails(tmp_path):
    host = Host(tmp_path, probes={CLIENT_VENV: "probe-client-tqdm-removed.json"})
    res = host.run()
    assert by_name(res)["client"]["missing"] == ["tqdm==4.70.1"] and res["install"] is True
    failed = host.fail(verify=True)
    assert failed["msg"] == ("/opt/moesweep/venvs/client does not match lock client-sglang-0.5.9 after installing: "
                             "still missing tqdm==4.70.1")


def test_a_venv_whose_interpreter_fails_is_reinstalled(tmp_path):
    host = Host(tmp_path)

    def broken(argv, **kw):
        if argv[0] == SERVER_VENV + "/bin/python":
            return 127, "", "/opt/moesweep/venvs/sglang/bin/python: error while loading shared libraries"
        return Host.run_command(host, argv, **kw)

    host.run_command = broken
    server = by_name(host.run())["server"]
    assert server["install"] and server["probe_error"].startswith("rc=127: ")
    assert server["status"] == "51 locked distribution(s) to install"


# ---------------------------------------------------------------------------- refusals first
def test_incomplete_lock_is_refused_before_anything_runs(tmp_path):
    host = Host(tmp_path)
    failed = host.fail(venvs=[venv("server", "cu129-sglang-0.5.19", SERVER_VENV), CLIENT])
    assert "The lock of stack cu129-sglang-0.5.19 is incomplete (" in failed["msg"]
    assert "python scripts/lock_stacks.py --stack cu129-sglang-0.5.19" in failed["msg"]
    assert host.calls == []


def test_a_lock_of_another_stack_is_refused(tmp_path):
    host = Host(tmp_path)
    wrong = dict(SERVER, lock=(LOCKS / "cu128-sglang-0.5.9.txt").read_text())
    failed = host.fail(venvs=[wrong])
    assert "files/locks/test-cpu-sglang-0.5.9.txt is the lock of stack 'cu128-sglang-0.5.9'" in failed["msg"]
    assert host.calls == []


@pytest.mark.parametrize("venvs,words", [
    ([dict(SERVER, path="relative/venv")], "The server venv path 'relative/venv' must be an absolute path"),
    ([SERVER, dict(CLIENT, path=SERVER_VENV + "/")], "The server and client venvs share the path"),
    ([CLIENT], "venvs must name exactly one server venv"),
    ([SERVER, dict(SERVER)], "venvs must name exactly one server venv"),
])
def test_bad_venvs_are_refused_before_anything_runs(tmp_path, venvs, words):
    host = Host(tmp_path)
    assert words in host.fail(venvs=venvs)["msg"] and host.calls == []


def test_too_old_interpreter_is_refused(tmp_path):
    host = Host(tmp_path, python_version="3.9.18\n")
    host.exists.add("/usr/bin/python3.9")
    failed = host.fail(python="/usr/bin/python3.9")
    assert failed["msg"] == ("Python 3.9.18 (/usr/bin/python3.9) is too old for stack test-cpu-sglang-0.5.9, which "
                             "requires Python >= 3.10 (its lock was resolved for 3.11). Set sglang_env_python to a "
                             "newer interpreter.")
    assert host.ran(vl.PROBE_SCRIPT) == []


def test_no_interpreter_returns_the_packages_to_install(tmp_path):
    host = Host(tmp_path, venvs=(), record=None)
    host.exists.discard(PYTHON)
    host.get_bin_path = lambda name, *a, **kw: None
    res = host.run()
    assert res["python"]["interpreter"] == "" and res["python"]["create_with"] == "python3.11"
    assert res["python"]["install_packages"] == ["python3.11", "python3.11-venv"]
    assert [t["candidate"] for t in res["python"]["tried"]] == ["python3.11", "python3"]
    failed = host.fail(python_install=False)
    assert failed["msg"].startswith("No Python interpreter found (tried python3.11, python3) and python_install")
    assert "set sglang_env_python" in failed["msg"]


def test_a_candidate_that_prints_no_version_is_skipped(tmp_path):
    host = Host(tmp_path, python_version="Python 3.11.2\n")
    res = host.run()
    assert res["python"]["interpreter"] == "" and res["python"]["tried"][0]["error"].startswith("rc=0: ")


# ------------------------------------------------------------------------------ import check
def test_a_failing_import_names_the_error(tmp_path):
    host = Host(tmp_path, record=None)
    host.verify[SERVER_VENV] = ("", (FIX / "verify-import-error.stderr.txt").read_text())
    host.verify_rc = 1
    failed = host.fail(verify=True)
    assert failed["msg"] == ("Importing sglang, flashinfer, torch in the server venv /opt/moesweep/venvs/sglang "
                             "failed: ModuleNotFoundError: No module named 'sglang_missing_module'")


def test_check_env_runs_only_where_nvidia_smi_lists_a_gpu(tmp_path):
    host = Host(tmp_path, record=None)
    host.run(verify=True, check_env=True)
    assert not host.ran("sglang.check_env")  # no nvidia-smi on this host
    host.nvidia_smi = (FIXTURES / "nvidia-smi" / "driver-failure" / "nvidia-smi-not-loaded.txt").read_text()
    host.run(verify=True, check_env=True)
    assert not host.ran("sglang.check_env")
    host.nvidia_smi = (FIX / "nvidia-smi-L-h200-x1.txt").read_text()
    res = host.run(verify=True, check_env=True)
    assert host.ran("sglang.check_env") == [[SERVER_VENV + "/bin/python", "-m", "sglang.check_env"]]
    assert by_name(res)["server"]["check_env"] == {"rc": 0, "stdout": ""}
    assert by_name(res)["client"]["check_env"] is None
    host.calls.clear()
    host.run(verify=True, check_env=False)
    assert not host.ran("-L")


# --------------------------------------------------------------------- the role's contract
def role_yaml(path: str):
    return yaml.safe_load((ROLE / path).read_text())


def test_stack_choices_match_the_stacks_and_the_locks():
    specs = role_yaml("meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    stacks = role_yaml("vars/main.yml")
    assert sorted(specs["sglang_env_stack"]["choices"]) == sorted(stacks["_sglang_env_stacks"])
    assert sorted(specs["sglang_env_client_stack"]["choices"]) == sorted(stacks["_sglang_env_client_stacks"])
    assert sorted(p.stem for p in LOCKS.glob("*.txt")) == sorted([*stacks["_sglang_env_stacks"],
                                                                   *stacks["_sglang_env_client_stacks"]])


def test_argument_specs_document_every_variable_the_role_reads_with_its_default():
    specs = role_yaml("meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    defaults = role_yaml("defaults/main.yml")
    assert set(specs) == set(defaults)
    for name, spec in specs.items():
        assert "description" in spec and "type" in spec, name
        assert spec["default"] == defaults[name], name
        if "choices" in spec:
            assert defaults[name] in spec["choices"], name
    text = " ".join(p.read_text() for p in ROLE.glob("*/*.yml") if p.parent.name in ("tasks", "vars", "defaults"))
    # What the role sets (the fact) and its tags are not inputs.
    read = set(re.findall(r"\b(sglang_env_[a-z_]+)\b", text)) - {"sglang_env_provenance", "sglang_env_state",
                                                                  "sglang_env_install", "sglang_env_configure"}
    assert read <= set(specs), read - set(specs)


def test_role_writes_what_the_module_checks_as_current():
    """The module calls a copy current with the owner and modes the role's file/copy tasks set."""
    tasks = (ROLE / "tasks" / "install.yml").read_text() + (ROLE / "tasks" / "configure.yml").read_text()
    assert set(re.findall(r'mode: "(0\d+)"', tasks)) == {oct(vl.FILE_MODE).replace("o", ""),
                                                         oct(vl.DIR_MODE).replace("o", "")}
    assert set(re.findall(r"(?:owner|group): (\w+)", tasks)) == {"root"}


def test_module_documentation_matches_its_argument_spec():
    doc = yaml.safe_load(sglang_env_state.DOCUMENTATION)
    yaml.safe_load(sglang_env_state.EXAMPLES)
    ret = yaml.safe_load(sglang_env_state.RETURN)
    captured = {}

    class Captured(Exception):
        pass

    def fake_init(self, argument_spec, **kw):
        captured.update(argument_spec)
        raise Captured()

    with mock.patch.object(basic.AnsibleModule, "__init__", fake_init), pytest.raises(Captured):
        sglang_env_state.main()
    assert set(doc["options"]) == set(captured)
    for name, spec in captured.items():
        assert doc["options"][name]["type"] == spec["type"], name
        assert doc["options"][name].get("default") == spec.get("default"), name
    assert set(doc["options"]["venvs"]["suboptions"]) == set(captured["venvs"]["options"])
    # its check mode support is the read-only fragment's (test_docs checks what ansible-doc renders from it)
    assert "moesweep.sweep.attributes.READ_ONLY" in doc["extends_documentation_fragment"]
    assert {"venvs", "python", "install", "verify", "provenance", "provenance_current"} <= set(ret)
