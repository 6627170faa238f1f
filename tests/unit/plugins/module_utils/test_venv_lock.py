"""venv_lock: the committed locks, and real probe / import-check / freeze output and the provenance record
written on a simulated host (tests/fixtures/sglang_env/SOURCES.md)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import venv_lock as vl
from helpers.paths import FIXTURES, REPO

FIX = FIXTURES / "sglang_env"
LOCKS = REPO / "roles" / "sglang_env" / "files" / "locks"
SERVER, CLIENT = "test-cpu-sglang-0.5.9", "client-sglang-0.5.9"
COMPLETE = ["client-sglang-0.5.9", "cu128-sglang-0.5.9", "cu130-sglang-0.5.23", "test-cpu-sglang-0.5.9"]


def lock(stack: str) -> dict:
    return vl.parse_lock((LOCKS / f"{stack}.txt").read_text(), stack)


def probe(name: str) -> dict:
    return vl.parse_probe((FIX / name).read_text())


def recorded() -> dict:
    return json.loads((FIX / "provenance.json").read_text())


# ------------------------------------------------------------------------------------------ locks
def test_every_committed_lock_is_a_lock_file():
    assert sorted(p.stem for p in LOCKS.glob("*.txt")) == sorted(COMPLETE + ["cu129-sglang-0.5.19"])


@pytest.mark.parametrize("stack", COMPLETE)
def test_complete_locks_parse_and_can_be_installed(stack):
    parsed = lock(stack)
    assert parsed["complete"] and vl.lock_problem(parsed) is None
    assert len(parsed["pins"]) == parsed["header"]["count"] and parsed["unhashed"] == []
    assert parsed["python"] == "3.11"
    assert parsed["sha256"] == vl.sha256_text((LOCKS / f"{stack}.txt").read_bytes().decode())
    assert all(p == vl.canonical_name(p.split("==")[0]) + "==" + p.split("==")[1] for p in parsed["pins"])


def test_lock_pins_are_canonical_name_version():
    pins = lock(SERVER)["pins"]
    assert pins[:3] == ["aiohappyeyeballs==2.7.1", "aiohttp==3.14.5", "aiosignal==1.4.0"]
    assert "torch==2.13.0+cpu" in pins and "sglang==0.5.9" in pins and "flashinfer-python==0.6.3" in pins


def test_incomplete_lock_is_refused_with_how_to_finish_it():
    parsed = lock("cu129-sglang-0.5.19")
    assert not parsed["complete"]
    assert parsed["pins"] == ["sglang-kernel==0.4.6.post1", "sglang==0.5.19", "torch==2.13.0"]
    msg = vl.lock_problem(parsed)
    assert msg.startswith("The lock of stack cu129-sglang-0.5.19 is incomplete (indexes unreachable from the locking "
                          "machine: https://download.pytorch.org/whl/cu129 ([Errno -2] Name or service not known);")
    assert "it has no hashes and cannot be installed" in msg
    assert "Run `python scripts/lock_stacks.py --stack cu129-sglang-0.5.19` on a machine that reaches" in msg


def test_a_cut_lock_is_refused():
    text = (LOCKS / f"{SERVER}.txt").read_text()
    cut = "\n".join(text.splitlines()[:-1]) + "\n"
    msg = vl.lock_problem(vl.parse_lock(cut, SERVER))
    assert "lists 50 pins but its header counts 51" in msg
    assert f"python scripts/lock_stacks.py --stack {SERVER}" in msg


def test_a_pin_without_hash_is_refused():
    lines = (LOCKS / f"{SERVER}.txt").read_text().splitlines()
    lines[-1] = lines[-1].split()[0]
    msg = vl.lock_problem(vl.parse_lock("\n".join(lines) + "\n", SERVER))
    assert "pins yarl==1.25.1 without --hash" in msg and "--require-hashes" in msg


@pytest.mark.parametrize("text,words", [
    ("", "has no '# moesweep-lock: {...}' header"),
    ("aiohttp==3.14.5 --hash=sha256:00\n", "has no '# moesweep-lock: {...}' header"),
    ("# moesweep-lock: {not json\n", "is not JSON"),
    ("# moesweep-lock: [1]\n", "is not a JSON object"),
    ('# moesweep-lock: {"stack": "client-sglang-0.5.9", "complete": true}\n', "is the lock of stack 'client-sglang"),
    ('# moesweep-lock: {"stack": "test-cpu-sglang-0.5.9"}\naiohttp>=3 --hash=sha256:00\n', "is not a name==version"),
])
def test_a_file_that_is_not_this_stacks_lock_is_refused(text, words):
    with pytest.raises(vl.LockError) as exc:
        vl.parse_lock(text, SERVER)
    assert words in str(exc.value)
    assert f"python scripts/lock_stacks.py --stack {SERVER}" in str(exc.value)


def test_the_record_names_the_committed_locks():
    rec = recorded()
    assert rec["lock_sha256"] == lock(SERVER)["sha256"] and rec["lock_packages"] == len(lock(SERVER)["pins"])
    assert rec["client"]["lock_sha256"] == lock(CLIENT)["sha256"]


# ------------------------------------------------------------------------------------------ probe
def test_probe_of_the_installed_server_venv_has_every_pin():
    seen = probe("probe-server.json")
    assert seen["python"] == "3.11.2" and len(seen["fingerprint"]) == 64
    assert vl.missing_pins(lock(SERVER)["pins"], seen["pins"]) == []
    assert vl.extra_pins(lock(SERVER)["pins"], seen["pins"]) == ["pip==23.0.1"]


def test_probe_of_the_client_venv():
    assert vl.missing_pins(lock(CLIENT)["pins"], probe("probe-client.json")["pins"]) == []
    assert vl.missing_pins(lock(CLIENT)["pins"], probe("probe-client-tqdm-removed.json")["pins"]) == ["tqdm==4.70.1"]


def test_probe_of_a_fresh_venv_misses_the_whole_lock():
    seen = probe("probe-fresh-venv.json")
    assert seen["pins"] == ["pip==23.0.1", "setuptools==66.1.1"]
    assert vl.missing_pins(lock(SERVER)["pins"], seen["pins"]) == lock(SERVER)["pins"]


def test_the_record_holds_fingerprints_of_the_same_probes():
    rec = recorded()
    assert rec["dist_fingerprint"] == probe("probe-server.json")["fingerprint"]
    assert rec["client"]["dist_fingerprint"] == probe("probe-client.json")["fingerprint"]


@pytest.mark.parametrize("out", ["", "3.9.18\n", '{"pins": [], "fingerprint": ""}', "[1, 2]", "Traceback"])
def test_parse_probe_rejects_what_is_not_the_probe(out):
    with pytest.raises(ValueError):
        vl.parse_probe(out)


def test_probe_script_runs_and_parses_here():
    proc = subprocess.run([sys.executable, "-c", vl.PROBE_SCRIPT], capture_output=True, text=True, check=True)
    seen = vl.parse_probe(proc.stdout)
    assert seen["python"] == "{}.{}.{}".format(*sys.version_info[:3])
    assert any(p.startswith("pytest==") for p in seen["pins"])


def test_verify_script_runs_and_parses_here():
    proc = subprocess.run([sys.executable, "-c", vl.VERIFY_SCRIPT, "json"], capture_output=True, text=True, check=True)
    assert vl.parse_verify(proc.stdout) == {"python": "{}.{}.{}".format(*sys.version_info[:3]),
                                           "versions": {"json": json.__version__}, "torch_cuda": None}


# --------------------------------------------------------------------------------- record holds
def holds(name="server", probe_file="probe-server.json", **over):
    rec = vl.recorded_venvs(recorded())[name]
    args = dict(stack=SERVER if name == "server" else CLIENT,
                venv="/opt/moesweep/venvs/sglang" if name == "server" else "/opt/moesweep/venvs/client",
                lock_sha256=lock(SERVER if name == "server" else CLIENT)["sha256"],
                fingerprint=probe(probe_file)["fingerprint"], missing=[])
    args.update(over)
    return vl.record_holds(rec, **args)


def test_record_holds_for_the_unchanged_venvs():
    assert holds() == (True, "unchanged since verified")
    assert holds("client", "probe-client.json") == (True, "unchanged since verified")


def test_record_does_not_hold_after_anything_lands_in_the_venv():
    assert holds(probe_file="probe-server-tampered.json") == (
        False, "the installed distributions changed since the record")


@pytest.mark.parametrize("over,reason", [
    ({"missing": ["tqdm==4.70.1"]}, "1 locked distribution(s) to install"),
    ({"fingerprint": ""}, "the venv could not be probed"),
    ({"stack": "cu128-sglang-0.5.9"}, "recorded for stack test-cpu-sglang-0.5.9"),
    ({"venv": "/srv/venv"}, "recorded for venv /opt/moesweep/venvs/sglang"),
    ({"lock_sha256": "0" * 64}, "the lock changed since the record"),
])
def test_record_does_not_hold_when(over, reason):
    assert holds(**over) == (False, reason)


def test_record_without_verified_fields_or_without_record_does_not_hold():
    rec = {k: v for k, v in recorded().items() if k != "freeze_sha256"}
    fp = probe("probe-server.json")["fingerprint"]
    args = dict(stack=SERVER, venv="/opt/moesweep/venvs/sglang", lock_sha256=lock(SERVER)["sha256"],
                fingerprint=fp, missing=[])
    assert vl.record_holds(rec, **args) == (False, "the record lacks the verified versions")
    assert vl.record_holds({}, **args) == (False, "nothing recorded yet")
    assert vl.record_holds(None, **args) == (False, "nothing recorded yet")


def test_recorded_venvs():
    rec = recorded()
    assert vl.recorded_venvs(rec)["client"]["stack"] == CLIENT
    assert vl.recorded_venvs(dict(rec, client=None))["client"] == {}
    assert vl.recorded_venvs(None) == {}
    assert vl.parse_provenance("{not json") is None and vl.parse_provenance("[]") is None
    assert vl.parse_provenance(None) is None


# ------------------------------------------------------------------- provenance, byte for byte
def test_verify_output_and_freeze_give_the_recorded_fields():
    rec = recorded()
    server = vl.parse_verify((FIX / "verify-server.json").read_text())
    assert server == {"python": "3.11.2", "versions": rec["versions"], "torch_cuda": None}
    client = vl.parse_verify((FIX / "verify-client.json").read_text())
    assert client["versions"] == {"sglang": "0.5.9", "sglang.bench_serving": ""}
    # The command module stripped the trailing newline; the record keeps that hash.
    assert vl.freeze_sha256((FIX / "freeze-server.txt").read_text()) == rec["freeze_sha256"]
    assert vl.freeze_sha256((FIX / "freeze-client.txt").read_text()) == rec["client"]["freeze_sha256"]


def test_record_rebuilt_from_the_probes_is_the_written_file_byte_for_byte():
    """What the role wrote before the module existed is what the module writes: no rewrite on upgrade."""
    rec = recorded()
    entries = {}
    for name, stack, probe_file, verify_file, freeze_file in [
        ("server", SERVER, "probe-server.json", "verify-server.json", "freeze-server.txt"),
        ("client", CLIENT, "probe-client.json", "verify-client.json", "freeze-client.txt"),
    ]:
        seen = vl.parse_verify((FIX / verify_file).read_text())
        seen["freeze_sha256"] = vl.freeze_sha256((FIX / freeze_file).read_text())
        path = rec["venv"] if name == "server" else rec["client"]["venv"]
        entries[name] = vl.venv_entry(stack, path, seen, lock(stack), probe(probe_file)["fingerprint"])
    record = vl.provenance_record(entries, "http://10.213.2.1:8701/simple/", [], [], "/usr/local/cuda-12.8")
    assert record == rec
    assert vl.render_provenance(record) == (FIX / "provenance.json").read_text()
    # Reused from the record itself (a no-change run) gives the same.
    reused = {n: vl.venv_entry(r["stack"], r["venv"], r, lock(r["stack"]), r["dist_fingerprint"])
              for n, r in vl.recorded_venvs(rec).items()}
    assert vl.provenance_record(reused, rec["index_url"], [], [], rec["cuda_home"]) == rec


def test_record_without_client():
    rec = recorded()
    entries = {"server": vl.venv_entry(SERVER, rec["venv"], rec, lock(SERVER), rec["dist_fingerprint"])}
    assert vl.provenance_record(entries, "", [], [], None)["client"] is None


# ------------------------------------------------------------------------------- interpreter
def test_interpreter_candidates():
    assert vl.interpreter_candidates("", "3.11") == ["python3.11", "python3"]
    assert vl.interpreter_candidates("/opt/py/bin/python3.12", "3.11") == ["/opt/py/bin/python3.12"]


def test_python_version_and_floor():
    assert vl.parse_python_version((FIX / "python3.11-version.txt").read_text()) == (3, 11, 2)
    assert vl.parse_python_version("Python 3.11.2") is None and vl.parse_python_version("") is None
    assert vl.too_old("3.9.18", "3.10") and not vl.too_old("3.10.0", "3.10") and not vl.too_old("3.11.2", "3.11")
    assert vl.too_old("3.10.12", "3.11")
    msg = vl.too_old_message("3.9.18", "/usr/bin/python3.9", SERVER, "3.10", "3.11")
    assert msg == ("Python 3.9.18 (/usr/bin/python3.9) is too old for stack test-cpu-sglang-0.5.9, which requires "
                   "Python >= 3.10 (its lock was resolved for 3.11). Set sglang_env_python to a newer interpreter.")


def test_python_packages():
    assert vl.python_packages([], "3.11") == ["python3.11", "python3.11-venv"]
    assert vl.python_packages(["python3.12-full"], "3.11") == ["python3.12-full"]


# ------------------------------------------------------------------------------------------ pip
def test_pip_install_argv_air_gapped_wheelhouse():
    extras = vl.extra_indexes("", [])
    args = vl.index_args("http://10.213.2.1:8701/simple/", extras, [], ["10.213.2.1"])
    argv = vl.pip_install_argv("/opt/moesweep/venvs/sglang", vl.lock_path("/etc/moesweep/locks/", SERVER), args,
                               ["--timeout", "60"])
    assert argv == ["/opt/moesweep/venvs/sglang/bin/python", "-m", "pip", "install", "--require-hashes", "--no-deps",
                    "--only-binary=:all:", "-r", "/etc/moesweep/locks/test-cpu-sglang-0.5.9.txt",
                    "--index-url", "http://10.213.2.1:8701/simple/", "--trusted-host=10.213.2.1", "--timeout", "60"]


def test_index_args_torch_and_kernel_indexes_and_no_index():
    extras = vl.extra_indexes("https://download.pytorch.org/whl/cu129", ["https://docs.sglang.ai/whl/cu129/"])
    assert extras == ["https://download.pytorch.org/whl/cu129", "https://docs.sglang.ai/whl/cu129/"]
    assert vl.index_args("", extras, ["/opt/wheels"], []) == [
        "--no-index", "--extra-index-url=https://download.pytorch.org/whl/cu129",
        "--extra-index-url=https://docs.sglang.ai/whl/cu129/", "--find-links=/opt/wheels"]


def test_index_probe_urls_name_the_project_page_once():
    urls = vl.index_probe_urls("http://10.213.2.1:8701/simple/", ["https://docs.sglang.ai/whl/cu129"],
                               ["/opt/wheels", "http://10.0.0.5/wheels/"], "aiohappyeyeballs")
    assert urls == ["http://10.213.2.1:8701/simple/aiohappyeyeballs/", "https://docs.sglang.ai/whl/cu129/aiohappyeyeballs/",
                    "http://10.0.0.5/wheels/"]
    assert vl.index_probe_urls("", [], ["/opt/wheels"], "x") == []


# --------------------------------------------------------------------------------------- misc
@pytest.mark.parametrize("path,ok", [
    ("/opt/moesweep/venvs/sglang", True), ("/srv/v-1.2/", True), ("relative/venv", False), ("/opt/../etc", False),
    ("/opt/my venv", False), ("", False),
])
def test_venv_path_rule(path, ok):
    problem = vl.venv_path_problem("server", path)
    assert (problem is None) == ok
    if not ok:
        assert problem == f"The server venv path '{path}' must be an absolute path without '..' or spaces."


def _st(mode, uid=vl.OWNER_UID, gid=vl.OWNER_GID):
    return os.stat_result((mode, 0, 0, 1, uid, gid, 0, 0, 0, 0))


def test_file_and_dir_current():
    assert vl.file_current(_st(0o100644), "a", "a")
    assert not vl.file_current(_st(0o100644), "a", "b")
    assert not vl.file_current(_st(0o100600), "a", "a")
    assert not vl.file_current(_st(0o100644, uid=1000), "a", "a")
    assert not vl.file_current(_st(0o040755), "a", "a") and not vl.file_current(None, None, "a")
    assert vl.dir_current(_st(0o040755)) and not vl.dir_current(_st(0o040700)) and not vl.dir_current(None)
    assert not vl.dir_current(_st(0o100755)) and not vl.dir_current(_st(0o040755, gid=5))


def test_fixtures_are_cited():
    sources = (FIX / "SOURCES.md").read_text()
    for path in FIX.iterdir():
        if path.name != "SOURCES.md":
            assert f"`{path.name}`" in sources, path.name


def test_module_utils_is_stdlib_only():
    tree = ast.parse(Path(vl.__file__).read_text())
    imports = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imports |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imports == {"__future__", "hashlib", "json", "re", "stat"}
