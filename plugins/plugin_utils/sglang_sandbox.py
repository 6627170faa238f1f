# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The pinned sglang wheel in a sandbox on the controller, where the dry run of its argument handling runs.

``moesweep check`` and the sweep's preflight ask the real sglang whether a launch line gets past its argument
handling before any host is touched (``module_utils/sglang_dryrun.py`` is the program; this file prepares where it
runs and runs it). Nothing is installed into the controller's environment: the wheel and a few of its light
dependencies are unpacked into a cache directory and imported by a child interpreter started with ``-I -S`` (no
site-packages, no PYTHON* variables), whose path holds only them:

- the sglang wheel of the version's stack lock (``roles/sglang_env/files/locks/``), sha256-checked;
- what reading a model's config.json needs, at the lock's pins, hash-checked: transformers and its own
  requirements, pillow (sglang registers image processors while importing its configs), msgspec (0.5.23's
  argument records);
- a distribution record (METADATA only, the lock's version) of every other package the lock pins, so that version
  and availability probes (transformers' ``is_torch_available``, ``is_torchcodec_available``, sglang's
  ``assert_pkg_version``) answer as on a host with the stack; importing one of those packages gives a stub module
  (``sglang_dryrun``), importing a package the stack does not install is an ImportError as on the host, and torch's
  CUDA queries and sglang's ``nvidia-smi`` calls are answered from the host's facts.

The cache is ``$MOESWEEP_CACHE_DIR`` (default ``~/.cache/moesweep``) ``/dryrun/sglang-<version>-py<X.Y>/``, made
once per version and interpreter (a download of about 40 MB from PyPI; offline, the dry run says it could not run
and the knowledge base decides alone). The model hub is never asked: the model's config.json comes from the caller
(``--model-config``, the knowledge base's copy of a known model's files under ``data/models/``), else the dry run
stops where sglang first reads it and says so.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from ansible_collections.moesweep.sweep.plugins.module_utils import sglang_dryrun

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCK_DIR = REPO_ROOT / "roles" / "sglang_env" / "files" / "locks"
MODELS_DIR = REPO_ROOT / "data" / "models"
LAYOUT_VERSION = 2  # bump when what a prepared sandbox holds changes
# What the sandbox installs for real (their requirements are resolved against the lock's pins as well).
REAL_PACKAGES = ("transformers", "pillow", "msgspec", "packaging")
DEFAULT_TIMEOUT_S = 120
MODEL_FILES = ("config.json", "hf_quant_config.json", "quant_config.json")
# Distributions whose import names are not their normalised names (each package's own top_level / RECORD).
IMPORT_NAMES = {
    "pyzmq": ["zmq"], "pillow": ["PIL"], "pyyaml": ["yaml"], "ipython": ["IPython"], "protobuf": ["google"],
    "flashinfer-python": ["flashinfer"], "sgl-kernel": ["sgl_kernel"], "sglang-kernel": ["sgl_kernel"],
    "nvidia-ml-py": ["pynvml"], "apache-tvm-ffi": ["tvm_ffi"], "nvidia-cutlass-dsl": ["cutlass"],
    "cuda-python": ["cuda"], "cuda-bindings": ["cuda"], "cuda-pathfinder": ["cuda"], "flash-attn-4": ["flash_attn"],
    "sgl-deep-gemm": ["deep_gemm"], "nvidia-cudnn-frontend": ["cudnn"], "grpcio": ["grpc"],
    "grpcio-tools": ["grpc_tools"], "grpcio-health-checking": ["grpc_health"], "grpcio-reflection": ["grpc_reflection"],
    "python-multipart": ["multipart", "python_multipart"], "scikit-learn": ["sklearn"], "opencv-python": ["cv2"],
    "opencv-python-headless": ["cv2"], "av": ["av"], "python-dotenv": ["dotenv"], "prometheus-client":
    ["prometheus_client"], "beautifulsoup4": ["bs4"], "attrs": ["attr", "attrs"], "typing-extensions":
    ["typing_extensions"], "websocket-client": ["websocket"], "pyjwt": ["jwt"], "msgpack-python": ["msgpack"],
    "nvidia-nvshmem-cu12": ["nvidia"], "nvidia-nvshmem-cu13": ["nvidia"], "mooncake-transfer-engine": ["mooncake"],
}
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)((?:\s+--hash=sha256:[0-9a-f]{64})+)\s*$")


class SandboxError(RuntimeError):
    """The sandbox cannot be prepared or run: the message says why and what to do."""


def cache_root() -> Path:
    return Path(os.environ.get("MOESWEEP_CACHE_DIR") or Path.home() / ".cache" / "moesweep")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: Path) -> tuple[dict, dict]:
    """(header, {normalised name: (version, [sha256, ...])}) of one stack lock."""
    header: dict = {}
    pins: dict = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# moesweep-lock: "):
            header = json.loads(line[len("# moesweep-lock: "):])
            continue
        m = _PIN.match(line)
        if m:
            pins[_norm(m.group(1))] = (m.group(2), re.findall(r"sha256:([0-9a-f]{64})", m.group(3)))
    return header, pins


def stack_lock(version: str, lock_dir: Path = LOCK_DIR) -> tuple[Path, dict, dict]:
    """The complete serving stack lock that pins sglang ``version`` (not a test or client stack)."""
    for path in sorted(lock_dir.glob("*.txt")):
        header, pins = read_lock(path)
        stack = str(header.get("stack") or "")
        if not header.get("complete") or stack.startswith(("test-", "client-")):
            continue
        if pins.get("sglang", (None,))[0] == version:
            return path, header, pins
    raise SandboxError(
        "no complete stack lock pins sglang %s in %s: the dry run runs the pinned wheel of a stack "
        "(scripts/lock_stacks.py writes one)" % (version, lock_dir.relative_to(REPO_ROOT)))


def import_names(dist: str) -> list[str]:
    """The top-level import names distribution ``dist`` (normalised) provides."""
    if dist in IMPORT_NAMES:
        return list(IMPORT_NAMES[dist])
    if dist.startswith("nvidia-"):
        return ["nvidia"]  # the CUDA runtime wheels share the nvidia namespace package
    return [dist.replace("-", "_")]


def cuda_of_stack(stack: str) -> str | None:
    """'cu128-sglang-0.5.9' -> '12.8' (the CUDA build of the stack's torch: torch.version.cuda)."""
    m = re.match(r"^cu(\d+)(\d)-", stack or "")
    return "%s.%s" % (m.group(1), m.group(2)) if m else None


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _pip(python: str, *args: str, timeout: int = 600) -> None:
    cmd = [python, "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout or "").strip().splitlines()[-6:])
        raise SandboxError("pip %s failed (rc %d): %s" % (args[0], proc.returncode, tail))


def _requirements(names, pins: dict) -> str:
    lines = []
    for name in sorted(set(names)):
        version, hashes = pins[name]
        lines.append("%s==%s %s" % (name, version, " ".join("--hash=sha256:" + h for h in hashes)))
    return "\n".join(lines) + "\n"


def _closure(python: str, pins: dict, work: Path) -> list[str]:
    """The lock's names that REAL_PACKAGES need, as pip resolves them against the lock's pins (metadata only)."""
    constraints = work / "constraints.txt"
    constraints.write_text("".join("%s==%s\n" % (n, v) for n, (v, _h) in sorted(pins.items())
                                   if n not in ("sglang", "torch")))
    report = work / "report.json"
    wanted = [n for n in REAL_PACKAGES if _norm(n) in pins]
    _pip(python, "install", "--dry-run", "--quiet", "--ignore-installed", "--only-binary=:all:", "--report",
         str(report), "-c", str(constraints), *["%s==%s" % (n, pins[_norm(n)][0]) for n in wanted])
    names = []
    for item in json.loads(report.read_text()).get("install") or []:
        name = _norm(item["metadata"]["name"])
        if name not in pins:
            raise SandboxError("pip resolved %s, which the stack lock does not pin" % name)
        if name != "torch":
            names.append(name)
    return names


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def prepare(version: str, python: str | None = None, lock_dir: Path = LOCK_DIR) -> dict:
    """Make (once) and return the sandbox of sglang ``version`` for interpreter ``python``:
    {root, sys_path, torch_version, cuda_version, stack, lock}."""
    python = python or sys.executable
    pyver = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    lock_path, header, pins = stack_lock(version, lock_dir)
    root = cache_root() / "dryrun" / ("sglang-%s-py%s" % (version, pyver))
    ready = root / "ready.json"
    lock_sha = _sha256(lock_path)

    def current():
        try:
            info = json.loads(ready.read_text())
        except (OSError, ValueError):
            return None
        if info.get("layout") == LAYOUT_VERSION and info.get("lock_sha256") == lock_sha:
            return info
        return None

    info = current()
    if info:
        return info
    with _locked(cache_root() / "dryrun" / ".lock"):
        info = current()
        if info:
            return info
        if root.exists():
            shutil.rmtree(root)
        work = Path(tempfile.mkdtemp(prefix="prepare-", dir=str(root.parent)))
        try:
            src, deps, dist = work / "src", work / "deps", work / "fakedist"
            wheels = cache_root() / "wheels"
            wheels.mkdir(parents=True, exist_ok=True)
            sg_version, sg_hashes = pins["sglang"]
            wheel = next((p for p in wheels.glob("sglang-%s-*.whl" % sg_version) if _sha256(p) in sg_hashes), None)
            if wheel is None:
                req = work / "sglang.txt"
                req.write_text(_requirements(["sglang"], pins))
                # the target hosts' interpreter (CPython 3.11, glibc 2.34+): a platform wheel's pure-Python part
                # is what the dry run imports, whatever interpreter runs it
                _pip(python, "download", "--no-deps", "--require-hashes", "--only-binary=:all:",
                     "--python-version", "3.11", "--platform", "manylinux_2_34_x86_64", "-r", str(req),
                     "-d", str(wheels))
                wheel = next(p for p in wheels.glob("sglang-%s-*.whl" % sg_version) if _sha256(p) in sg_hashes)
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(src)
            names = _closure(python, pins, work)
            req = work / "deps.txt"
            req.write_text(_requirements(names, pins))
            _pip(python, "install", "--quiet", "--no-deps", "--require-hashes", "--only-binary=:all:",
                 "--no-compile", "--target", str(deps), "-r", str(req))
            torch_version = pins.get("torch", ("0.0.0", []))[0]
            recorded = sorted(n for n in pins if n != "sglang" and n not in names)
            for name in recorded:
                record = dist / ("%s-%s.dist-info" % (name.replace("-", "_"), pins[name][0]))
                record.mkdir(parents=True)
                (record / "METADATA").write_text(
                    "Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: moesweep dry-run sandbox: the stack "
                    "lock's pin, recorded only (imports of it are stubs)\n" % (name, pins[name][0]))
            stub_names = sorted({mod for name in recorded for mod in import_names(name)})
            info = {
                "layout": LAYOUT_VERSION,
                "version": version,
                "python": pyver,
                "stack": header.get("stack"),
                "lock": str(lock_path.relative_to(REPO_ROOT)),
                "lock_sha256": lock_sha,
                "wheel": wheel.name,
                "torch_version": torch_version,
                "cuda_version": cuda_of_stack(str(header.get("stack") or "")),
                "packages": sorted("%s==%s" % (n, pins[n][0]) for n in names),
                "stub_names": stub_names,
            }
            (work / "ready.json").write_text(json.dumps(info, indent=1, sort_keys=True) + "\n")
            work.rename(root)
        except Exception:
            shutil.rmtree(work, ignore_errors=True)
            raise
    info = current()
    if not info:
        raise SandboxError("the sandbox in %s was not completed" % root)
    return info


def sys_path_of(info: dict, version: str, pyver: str) -> list[str]:
    root = cache_root() / "dryrun" / ("sglang-%s-py%s" % (version, pyver))
    return [str(root / "src"), str(root / "deps"), str(root / "fakedist")]


def known_model_dir(model_id: str | None) -> Path | None:
    """``data/models/<org>/<name>/`` when the repository holds that model's published config.json."""
    if not model_id or "/" not in str(model_id) or str(model_id).startswith("/"):
        return None
    path = MODELS_DIR / str(model_id)
    return path if (path / "config.json").is_file() else None


def known_model_ids() -> list[str]:
    """The model ids whose published config.json the repository holds (``data/models/<org>/<name>/``)."""
    return sorted("%s/%s" % (p.parent.parent.name, p.parent.name) for p in MODELS_DIR.glob("*/*/config.json"))


def _model_option(argv: list[str]) -> int | None:
    for i, word in enumerate(argv[:-1]):
        if word in ("--model-path", "--model"):
            return i + 1
    return None


def run(version: str, server_argv: list[str], environment: dict | None, gpus: dict | None, model_config=None,
        model_files: Path | None = None, timeout: int = DEFAULT_TIMEOUT_S, python: str | None = None) -> dict:
    """The dry run of ``server_argv`` (the words after ``python -m sglang.launch_server``) with sglang
    ``version``'s real argument handling. The model's config.json: ``model_config`` (a dict), else the files in
    ``model_files``; either replaces the launch's model path for the dry run alone. Returns the program's answer
    (``sglang_dryrun``), with ``model_source`` saying where the config.json came from."""
    python = python or sys.executable
    try:
        info = prepare(version, python)
    except (SandboxError, OSError, subprocess.SubprocessError) as exc:
        return {"verdict": "undecided", "sglang_version": version, "where": "controller",
                "reason": "the sandbox of sglang %s could not be prepared: %s" % (version, exc)}
    if gpus and not gpus.get("cuda_version"):
        gpus = dict(gpus, cuda_version=info.get("cuda_version"))
    argv = [str(a) for a in server_argv]
    with tempfile.TemporaryDirectory(prefix="moesweep-dryrun-") as tmp:
        at = _model_option(argv)
        source = None
        if model_config is not None or model_files is not None:
            model_dir = Path(tmp) / "model"
            model_dir.mkdir()
            if model_config is not None:
                (model_dir / "config.json").write_text(json.dumps(model_config))
                source = "the given config.json"
            else:
                for name in MODEL_FILES:
                    if (model_files / name).is_file():
                        shutil.copy(model_files / name, model_dir / name)
                source = str(model_files.relative_to(REPO_ROOT)) if model_files.is_relative_to(REPO_ROOT) \
                    else str(model_files)
            if at is not None:
                argv[at] = str(model_dir)
        req = sglang_dryrun.request(
            argv, environment=environment, gpus=gpus, stub_missing=True,
            sys_path=sys_path_of(info, version, info["python"]), sglang_version=version, offline=True,
            torch_version=info.get("torch_version"), stub_names=info.get("stub_names"))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "TMPDIR": tmp, "LANG": "C.UTF-8",
               "PYTHONHASHSEED": "0"}
        started = time.monotonic()
        try:
            proc = subprocess.run([python, "-I", "-S", "-c", sglang_dryrun.program_source()],
                                  input=json.dumps(req), capture_output=True, text=True, env=env, cwd=tmp,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"verdict": "undecided", "sglang_version": version, "where": "controller",
                    "reason": "the dry run did not finish in %d s" % timeout}
        answer = sglang_dryrun.parse_output(proc.stdout)
        if answer is None:
            tail = " | ".join((proc.stderr or "").strip().splitlines()[-4:])
            return {"verdict": "undecided", "sglang_version": version, "where": "controller",
                    "reason": "the dry run gave no answer (rc %s): %s" % (proc.returncode, tail[-600:])}
    answer["where"] = "controller"
    answer["wall_s"] = round(time.monotonic() - started, 3)
    answer["model_source"] = source
    answer["sandbox"] = {k: info.get(k) for k in ("stack", "wheel", "python", "packages")}
    if source and at is not None:
        # the fields that named the dry run's copy of the model's files name the launch's model again
        for table in (answer.get("resolved") or {}, answer.get("key_fields") or {}):
            for key, value in table.items():
                if isinstance(value, str) and value.startswith(str(Path(tmp) / "model")):
                    table[key] = server_argv[at] + value[len(str(Path(tmp) / "model")):]
    return answer


# A GPU's memory where the facts do not give it, by SM: what nvidia-smi reports for the usual card of that SM
# (sm90: H100 80GB HBM3, tests/fixtures/nvidia-smi/h100-x1-device; sm100: B200,
# tests/fixtures/nvidia-smi/public/table-610-b200-sglang-27487.txt; sm120: RTX PRO 6000 Blackwell Server Edition,
# tests/fixtures/nvidia-smi/public). sglang sizes its memory defaults from the smallest GPU's memory.total.
ASSUMED_MEMORY_MIB = {90: 81559, 100: 183359, 120: 97887}


def dry_run_point(version, server_argv, environment, facts, model=None, cuda_version=None, run_fn=None) -> dict:
    """The controller's dry run of one launch (``moesweep check`` and the sweep's preflight call this one
    function). ``model``: the model's config.json (a dict), a model id, or None (the launch's ``--model-path``);
    its files come from ``data/models/<id>/`` when the repository holds them. Returns the dry run's answer, or an
    ``undecided`` answer saying why it was not run (no version, no GPU facts, no config.json for the model)."""
    base = {"verdict": "undecided", "sglang_version": version, "where": "controller", "ran": False}
    if not version:
        return dict(base, reason="no sglang version: the dry run runs that version's pinned wheel")
    argv = [str(a) for a in server_argv]
    at = _model_option(argv)
    model_id = model if isinstance(model, str) else (argv[at] if at is not None else None)
    config = model if isinstance(model, dict) and model.get("architectures") else None
    files = None if config is not None else known_model_dir(model_id)
    if config is None and files is None:
        return dict(base, reason="the model's config.json is not on the controller (%s): give it with "
                                 "--model-config, or add the model's published files under data/models/"
                    % (model_id or "no --model-path"))
    gpus = sglang_dryrun.gpus_from_facts(facts, cuda_version=cuda_version)
    if gpus is None:
        return dict(base, reason="the host's facts give no GPU count and SM to answer torch's queries from")
    assumed = None
    if not gpus.get("memory_total_mib"):
        sm = gpus["capability"][0] * 10 + gpus["capability"][1]
        gpus["memory_total_mib"] = ASSUMED_MEMORY_MIB.get(sm) or ASSUMED_MEMORY_MIB[90]
        assumed = "the GPUs' memory is not in the facts: the dry run assumed %d MiB, what the usual sm%d card has" \
            % (gpus["memory_total_mib"], sm)
    if at is None:
        argv = ["--model-path", model_id or "model"] + argv
    result = (run_fn or run)(version, argv, environment, gpus, model_config=config, model_files=files)
    result["ran"] = True
    if assumed:
        result.setdefault("assumptions", []).append(assumed)
    return result
