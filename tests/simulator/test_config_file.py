"""The simulated server reads ``--config FILE`` as sglang 0.5.9 / 0.5.23 do (simulator/moesweep_sim/config_file.py):

* its merge agrees with the real ``ConfigArgumentMerger``, run from the cached wheels over a parser with the real
  action classes, on the same files and command lines, errors included, with PyYAML and with the minimal reader the
  simulated hosts use (their python3 has no PyYAML);
* the minimal reader types what it reads as ``yaml.safe_load`` does, and refuses what it does not read;
* the simulated server enforces an API key given only in the file, the command line's key wins over the file's, the
  key is not on its command line (/proc/PID/cmdline), and a missing file fails the launch as sglang does.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml
from helpers.paths import REPO
from moesweep_sim import config_file, sgl_cli
from simulator.real_wheels import WHEELS, source
from simulator.test_server import BASE, FAST, SIM, Sim

VERSIONS = ("0.5.9", "0.5.23")
MERGER = {"0.5.9": "sglang/srt/server_args_config_parser.py",
          "0.5.23": "sglang/srt/utils/server_args_config_parser.py"}
READERS = {"pyyaml": config_file.load_yaml, "minimal": config_file.load_minimal}


def real_merger(version):
    """The wheel's server_args_config_parser module, as sglang imports it."""
    src = source(WHEELS[("sglang", version)], MERGER[version])
    module = types.ModuleType("real_server_args_config_parser")
    exec(compile(src, MERGER[version], "exec"), module.__dict__)  # noqa: S102 - the real wheel's own code
    return module


def real_parser(spec):
    """An argparse parser with sglang's options and the action classes its parser has (the merger looks only at
    the actions' classes, dests, option strings and nargs)."""
    parser = argparse.ArgumentParser(add_help=False)
    custom = {}
    for action in spec["actions"]:
        strings, cls = action["option_strings"], action["action_class"]
        if not strings:
            continue
        kw = {"dest": action["dest"]}
        if cls == "_StoreTrueAction":
            kw["action"] = "store_true"
        elif cls == "_StoreAction":
            kw["nargs"] = action["nargs"]
        elif cls == "_HelpAction":
            kw["action"] = "help"
        elif cls == "BooleanOptionalAction":
            kw["action"] = argparse.BooleanOptionalAction
            strings = [s for s in strings if not s.startswith("--no-")]  # it adds the --no- spellings itself
        else:
            kw["action"] = custom.setdefault(cls, type(cls, (argparse.Action,), {"__call__": lambda *a: None}))
            kw["nargs"] = action["nargs"]
        parser.add_argument(*strings, **kw)
    return parser


@pytest.mark.parametrize("version", VERSIONS)
def test_the_actions_a_file_may_set_are_the_real_mergers(version):
    spec = sgl_cli.load_spec(version)
    real = real_merger(version).ConfigArgumentMerger(real_parser(spec))
    store_true, unsupported = config_file.action_tables(version, spec)
    assert store_true == set(real.store_true_actions)
    assert unsupported == {k: type(a).__name__ for k, a in real.unsupported_actions.items()}
    assert unsupported  # LoRAPathAction and the deprecated spellings at least


FILES = {
    "key": 'api-key: "sk-file-key"\n',
    "key_underscore": "api_key: sk-under\n",
    "typed": "# a comment\n---\napi-key: 'it''s'\ntp-size: 8\nmem-fraction-static: 0.85\nport: 0x1F90\n"
             "served-model-name: null\nlog-level: ~\n",
    "bools": "enable-metrics: true\ntrust-remote-code: no\nskip-server-warmup: On\nenable-cache-report: False\n",
    "string_bool": "api-key: true\n",  # not a store_true: --api-key true
    "lists": "json-model-override-args: []\ncuda-graph-bs: [1, 2, 4]\nenable-lora:\n"
             "tokenizer-worker-num:\n  - 3\n",
    "block_list": "cuda-graph-bs:\n- 8\n- 16   # comment\n",
    "escapes": 'api-key: "tab\\there \\u00e9 \\x41 \\"q\\" \\\\ # not a comment"\nhost: 127.0.0.1 # a comment\n',
    "empty": "",
    "comments_only": "# nothing\n\n",
    "override": 'api-key: "from-file"\nport: 1\n',
    "unsupported": "lora-paths: [a]\n",
    "not_a_mapping": "- api-key\n",
    "scalar": "just a string\n",
}
ARGVS = [
    ["--model-path", "m", "--config", "{path}"],
    ["--config", "{path}", "--api-key", "from-cli", "--port", "2"],
    ["--model-path", "m"],
    ["--config", "{path}", "--config", "{path}"],
    ["--model-path", "m", "--config"],
]


def outcome(fn):
    try:
        return "ok", fn()
    except ValueError as exc:  # what sglang raises (ConfigError carries the same message)
        return "ValueError", str(exc)
    except config_file.ConfigError as exc:
        return exc.exc_type, exc.message


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("version", VERSIONS)
def test_the_merge_agrees_with_the_real_merger(version, reader, tmp_path, monkeypatch):
    spec = sgl_cli.load_spec(version)
    real = real_merger(version).ConfigArgumentMerger(real_parser(spec))
    monkeypatch.setattr(config_file, "load_yaml", READERS[reader])
    compared = 0
    for name, text in FILES.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        for template in ARGVS:
            argv = [w.replace("{path}", str(path)) for w in template]
            want = outcome(lambda argv=argv: real.merge_config_with_args(list(argv)))
            got = outcome(lambda argv=argv: config_file.merge(version, spec, argv))
            assert got == want, (name, argv)
            compared += 1
    assert compared == len(FILES) * len(ARGVS)


@pytest.mark.parametrize("version", VERSIONS)
def test_file_errors_are_sglangs(version, tmp_path):
    spec = sgl_cli.load_spec(version)
    real = real_merger(version).ConfigArgumentMerger(real_parser(spec))
    (tmp_path / "c.json").write_text("{}")
    for argv in (["--config", str(tmp_path / "c.json")], ["--config", str(tmp_path / "missing.yaml")],
                 ["--config", str(tmp_path / "noext")]):
        want = outcome(lambda argv=argv: real.merge_config_with_args(list(argv)))
        got = outcome(lambda argv=argv: config_file.merge(version, spec, argv))
        assert want[0] == "ValueError" and got == want, argv


def test_0523_reads_a_mapping_value_as_json_and_0_5_9_as_python(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("json-model-override-args: {a: 1}\n")
    for version in VERSIONS:
        spec = sgl_cli.load_spec(version)
        want = real_merger(version).ConfigArgumentMerger(real_parser(spec)).merge_config_with_args(
            ["--config", str(path)])
        assert config_file.merge(version, spec, ["--config", str(path)]) == want
    assert want == ["--json-model-override-args", '{"a": 1}']


READABLE = [
    'api-key: "sk-abc"\n', "api-key: sk-abc\n", "a: 1\nb: -2\nc: 0o17\nd: 017\ne: 0b101\nf: +0x_1f\n",
    "a: 1.5\nb: .5\nc: -1.0e+3\nd: 1e5\ne: .inf\nf: -.Inf\ng: 1_000\n", "a: yes\nb: Off\nc: y\nd: n\ne: TRUE\n",
    "a: ~\nb: null\nc:\nd: NULL\n", "a: [1, x, true]\nb: []\n", "a:\n  - 1\n  - two\nb:\n- three\n",
    "'quoted key': \"v\"\n\"k2\": 'w'\n", 'a: "\\x41\\u00e9\\N\\_\\/\\ \\0"\n', "a: b # c\nd: e#f\n",
    "a: http://x:8000/y\n", "a: -abc\n", "a: 1\na: 2\n", "--- \na: 1\n...\n", "",
]
REFUSED = ["a:\n  b: 1\n", "a: |\n  text\n", "a: &x 1\nb: *x\n", "a: !!str 1\n", "a: {b: 1}\n", "a: 2024-01-01\n",
           "a: 1:30\n", 'a: "open\n', "a: b: c\n", "a: [[1]]\n", "a:\n  - b: 1\n", "a: 1\n--- \nb: 2\n"]


@pytest.mark.parametrize("text", READABLE)
def test_the_minimal_reader_types_scalars_as_pyyaml_does(text):
    def same(a, b):
        if isinstance(a, float) and math.isnan(a):
            return isinstance(b, float) and math.isnan(b)
        if isinstance(a, dict):
            return type(b) is dict and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
        if isinstance(a, list):
            return type(b) is list and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
        return type(a) is type(b) and a == b
    assert same(config_file.load_minimal(text), yaml.safe_load(text)), text


@pytest.mark.parametrize("text", REFUSED)
def test_the_minimal_reader_refuses_what_it_does_not_read(text):
    with pytest.raises(config_file.ConfigError) as exc:
        config_file.load_minimal(text)
    assert "line " in exc.value.message and "minimal YAML reader" in exc.value.message


# -------------------------------------------------------------------------------- the simulated server
@pytest.fixture
def sim(tmp_path, monkeypatch):
    made = []

    def make(args, no_pyyaml=False, **kw):
        d = tmp_path / f"s{len(made)}"
        d.mkdir()
        with monkeypatch.context() as m:
            if no_pyyaml:  # the interpreter without its site-packages, like the simulated hosts' python3
                python = d / "python-no-site"
                python.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
                python.chmod(0o755)
                m.setattr(sys, "executable", str(python))
            s = Sim(d, args, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


@pytest.mark.parametrize("no_pyyaml", [False, True], ids=["pyyaml", "no-pyyaml"])
@pytest.mark.parametrize("version", VERSIONS)
def test_a_key_given_only_in_the_file_is_enforced_and_never_on_the_command_line(sim, tmp_path, version, no_pyyaml):
    secrets = tmp_path / "sglang.secrets.yaml"
    secrets.write_text('# moesweep\napi-key: "sk-only-in-the-file"\n')
    secrets.chmod(0o600)
    s = sim(BASE + ["--moe-runner-backend", "flashinfer_cutlass", "--config", str(secrets)], no_pyyaml=no_pyyaml,
            version=version)
    s.wait_ready()
    assert s.req("GET", "/model_info")[0] == 401
    assert s.req("GET", "/model_info", headers={"Authorization": "Bearer sk-only-in-the-file"})[0] == 200
    words = cmdline(s.proc.pid)
    assert ("-S" in words) is no_pyyaml
    assert words[words.index("--config") + 1] == str(secrets)
    assert not any("sk-only-in-the-file" in w for w in words), words
    if version == "0.5.23":  # /server_info's launch_command is the argv argparse parsed, the file's options first
        info = json.loads(s.req("GET", "/server_info", headers={"Authorization": "Bearer sk-only-in-the-file"})[1])
        assert info["launch_command"].startswith("--api-key sk-only-in-the-file --model-path ")
        assert "--config" not in info["launch_command"]


def test_the_command_lines_key_wins_over_the_files(sim, tmp_path):
    secrets = tmp_path / "c.yaml"
    secrets.write_text("api-key: from-file\n")
    s = sim(BASE + ["--moe-runner-backend", "flashinfer_cutlass", "--config", str(secrets), "--api-key", "from-cli"])
    s.wait_ready()
    assert s.req("GET", "/model_info", headers={"Authorization": "Bearer from-file"})[0] == 401
    assert s.req("GET", "/model_info", headers={"Authorization": "Bearer from-cli"})[0] == 200


@pytest.mark.parametrize("version", VERSIONS)
def test_a_missing_or_unreadable_file_fails_the_launch_as_sglang_does(tmp_path, version):
    env = {**os.environ, **FAST, "MOESWEEP_SIM_SGLANG_VERSION": version}
    missing = tmp_path / "gone.yaml"
    r = subprocess.run([sys.executable, str(SIM), "--model-path", "m", "--config", str(missing)],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 1
    assert r.stderr.rstrip().endswith(f"ValueError: Config file not found: {missing}")
    assert "Traceback (most recent call last):" in r.stderr and "in merge_config_with_args" in r.stderr
    assert f"/{MERGER[version]}\", line " in r.stderr
    bad = tmp_path / "list.yaml"
    bad.write_text("- a\n")
    r = subprocess.run([sys.executable, str(SIM), "--model-path", "m", "--config", str(bad)],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 1 and r.stderr.rstrip().endswith(
        "ValueError: Config file must contain a dictionary at root level")


def test_the_simulator_reads_the_file_moesweep_writes():
    """The role's template renders the key as a JSON string; the simulator (and PyYAML) read back the same key."""
    template = (REPO / "roles" / "sglang_server" / "templates" / "sglang.secrets.yaml.j2").read_text()
    line = next(x for x in template.splitlines() if x.startswith("api-key:"))
    assert line == "api-key: {{ sglang_server_api_key | string | to_json }}"
    for key in ("sk-abc", "true", "123", "null", 'we"ird \\ key: #1', "é-ü", "-starts-with-dash"):
        text = f"# managed\napi-key: {json.dumps(key)}\n"
        assert config_file.load_minimal(text) == yaml.safe_load(text) == {"api-key": key}
