# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Pure decisions of the ``sglang_env`` role: a venv against its hash-pinned lock.

Nothing here runs a command or touches a file: the ``sglang_env_state`` module runs the scripts below
with the venv's own interpreter and passes their output in.

- ``parse_lock``: a lock written by ``scripts/lock_stacks.py`` (first line ``# moesweep-lock: {json}``,
  then ``name==version --hash=sha256:...`` lines): header, pins, sha256, and why it cannot be
  installed (incomplete, truncated, unhashed pins).
- ``PROBE_SCRIPT`` / ``parse_probe``: what a venv has installed (``importlib.metadata``) and its
  fingerprint; ``missing_pins``: the lock's pins the venv lacks.
- ``record_holds``: whether the provenance recorded by the last run still describes the venv.
- interpreter choice, pip command line, index probe URLs, and the provenance record itself.

Stdlib only; runs on the target (Python 3.9+) as well as on the controller.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re
import stat as _stat

LOCK_HEADER_PREFIX = "# moesweep-lock: "
LOCK_TOOL = "python scripts/lock_stacks.py --stack %s"

# Owner and mode of the files the role writes (its copy / file tasks use the same): a copy on the
# host is current only when content, owner and mode all match, as ansible.builtin.copy decides.
FILE_MODE = 0o644
DIR_MODE = 0o755
OWNER_UID = 0
OWNER_GID = 0

# Run by the venv's own interpreter (stdlib only): the installed distributions as canonical
# ``name==version`` pins, and a fingerprint of the installed set: sha256 of the interpreter version
# and of every ``*.dist-info`` directory name in the venv's site-packages with its RECORD's mtime and
# size. Any install, removal or reinstall changes it; a few stat calls, where importing the stack
# takes seconds.
PROBE_SCRIPT = """\
import hashlib, importlib.metadata as m, json, os, re, sys, sysconfig
pins = sorted({re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower() + "==" + d.version
               for d in m.distributions() if d.metadata["Name"]})
fp = hashlib.sha256(sys.version.encode())
for sp in sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}):
    for name in sorted(os.listdir(sp)) if os.path.isdir(sp) else []:
        if name.endswith(".dist-info"):
            try:
                st = os.stat(os.path.join(sp, name, "RECORD"))
                tag = "%d:%d" % (st.st_mtime_ns, st.st_size)
            except OSError:
                tag = "-"
            fp.update(("%s/%s %s\\n" % (sp, name, tag)).encode())
print(json.dumps({"python": "%d.%d.%d" % sys.version_info[:3], "pins": pins, "fingerprint": fp.hexdigest()}))
"""

# Run by a candidate interpreter: its version.
PYTHON_VERSION_SCRIPT = "import sys; print('%d.%d.%d' % sys.version_info[:3])"

# Run by the venv's interpreter with the stack's import names as arguments: what a user's import sees.
VERIFY_SCRIPT = """\
import importlib, json, sys
out = {"python": "%d.%d.%d" % sys.version_info[:3], "modules": {}}
for name in sys.argv[1:]:
    mod = importlib.import_module(name)
    out["modules"][name] = str(getattr(mod, "__version__", ""))
torch = sys.modules.get("torch")
out["torch_cuda"] = getattr(torch.version, "cuda", None) if torch else None
print(json.dumps(out))
"""

# Environment of the import check: no hub lookups from an air-gapped host, no warnings in the output.
VERIFY_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}

PIP_ENV = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}

# The fields of one venv's provenance entry that only an import check and pip freeze can produce.
VERIFIED_FIELDS = ("python", "versions", "torch_cuda", "freeze_sha256")


class LockError(ValueError):
    """A lock that cannot be installed; the message names the problem and the fix."""


def canonical_name(name):
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def sha256_text(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse_lock(text, stack):
    """Parse the lock of ``stack``.

    Returns ``{"stack", "header", "complete", "python", "pins", "unhashed", "sha256"}``; ``pins`` are
    canonical ``name==version`` strings in file order. Raises LockError for a file that is not a
    lock of this stack. An incomplete lock parses (its refusal is ``lock_problem``).
    """
    regen = "regenerate it with `%s`" % (LOCK_TOOL % stack)
    lines = text.splitlines()
    if not lines or not lines[0].startswith(LOCK_HEADER_PREFIX):
        raise LockError("The lock of stack %s has no '%s{...}' header on its first line: %s."
                        % (stack, LOCK_HEADER_PREFIX, regen))
    try:
        header = json.loads(lines[0][len(LOCK_HEADER_PREFIX):])
    except ValueError as exc:
        raise LockError("The header of the lock of stack %s is not JSON (%s): %s." % (stack, exc, regen)) from None
    if not isinstance(header, dict):
        raise LockError("The header of the lock of stack %s is not a JSON object: %s." % (stack, regen))
    if header.get("stack") != stack:
        raise LockError("files/locks/%s.txt is the lock of stack %r, not %s: %s."
                        % (stack, header.get("stack"), stack, regen))
    pins, unhashed = [], []
    for number, raw in enumerate(lines[1:], start=2):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        token = line.split()[0]
        name, sep, version = token.partition("==")
        if not sep or not name or not version:
            raise LockError("Line %d of the lock of stack %s is not a name==version pin: %r; %s."
                            % (number, stack, token, regen))
        pin = canonical_name(name) + "==" + version
        pins.append(pin)
        if "--hash=sha256:" not in line:
            unhashed.append(pin)
    return {
        "stack": stack,
        "header": header,
        "complete": header.get("complete") is True,
        "python": str(header.get("python") or ""),
        "pins": pins,
        "unhashed": unhashed,
        "sha256": sha256_text(text),
    }


def lock_problem(lock):
    """Why this parsed lock cannot be installed, as a message saying how to fix it; None if it can."""
    stack = lock["stack"]
    if not lock["complete"]:
        return ("The lock of stack %s is incomplete (%s): it has no hashes and cannot be installed. Run `%s` "
                "on a machine that reaches those indexes and commit the result."
                % (stack, lock["header"].get("unresolved_reason", ""), LOCK_TOOL % stack))
    regen = "regenerate it with `%s`" % (LOCK_TOOL % stack)
    count = lock["header"].get("count")
    if count is not None and count != len(lock["pins"]):
        return ("The lock of stack %s lists %d pins but its header counts %s: the file was cut or edited by hand; %s."
                % (stack, len(lock["pins"]), count, regen))
    if not lock["pins"]:
        return "The lock of stack %s pins nothing; %s." % (stack, regen)
    if not lock["python"]:
        return "The header of the lock of stack %s names no python version; %s." % (stack, regen)
    if lock["unhashed"]:
        return ("The lock of stack %s pins %s without --hash, which `pip install --require-hashes` refuses; %s."
                % (stack, ", ".join(lock["unhashed"]), regen))
    return None


def venv_path_problem(name, path):
    """The role's rule for a venv path: absolute, no '..' component, no whitespace."""
    if re.match(r"^/[^\s]*$", path or "") and ".." not in path.split("/"):
        return None
    return "The %s venv path '%s' must be an absolute path without '..' or spaces." % (name, path)


def parse_probe(stdout):
    """The probe's JSON line -> {"python", "pins", "fingerprint"}; ValueError if it is not that."""
    data = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else None
    if not isinstance(data, dict) or not isinstance(data.get("pins"), list) \
            or not isinstance(data.get("fingerprint"), str) or not data["fingerprint"]:
        raise ValueError("not the probe's output: %r" % stdout[-200:])
    return {"python": str(data.get("python", "")), "pins": sorted(data["pins"]), "fingerprint": data["fingerprint"]}


def missing_pins(lock_pins, installed_pins):
    """The lock's pins that the venv does not have, in the lock's order."""
    have = set(installed_pins)
    return [p for p in lock_pins if p not in have]


def extra_pins(lock_pins, installed_pins):
    """Installed distributions the lock does not pin (pip itself from ensurepip, local additions)."""
    wanted = set(lock_pins)
    return [p for p in sorted(installed_pins) if p not in wanted]


def parse_provenance(text):
    """The recorded provenance file -> dict, or None when absent, unreadable or not an object."""
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def recorded_venvs(provenance):
    """Index a provenance record by venv: the server entry is the record's top level, the client's
    is under ``client``."""
    if not isinstance(provenance, dict):
        return {}
    client = provenance.get("client")
    return {"server": provenance, "client": client if isinstance(client, dict) else {}}


def record_holds(record, stack, venv, lock_sha256, fingerprint, missing):
    """Whether the recorded entry still describes this venv, and if not, why.

    It holds when the venv has every pin of its lock, and the record names the same stack, venv path,
    lock sha256 and installed-distribution fingerprint, and carries the verified fields. Returns
    ``(holds, reason)``.
    """
    record = record if isinstance(record, dict) else {}
    if missing:
        return False, "%d locked distribution(s) to install" % len(missing)
    if not fingerprint:
        return False, "the venv could not be probed"
    if not record:
        return False, "nothing recorded yet"
    if record.get("stack") != stack:
        return False, "recorded for stack %s" % record.get("stack")
    if record.get("venv") != venv:
        return False, "recorded for venv %s" % record.get("venv")
    if record.get("lock_sha256") != lock_sha256:
        return False, "the lock changed since the record"
    if record.get("dist_fingerprint") != fingerprint:
        return False, "the installed distributions changed since the record"
    if "versions" not in record or "freeze_sha256" not in record:
        return False, "the record lacks the verified versions"
    return True, "unchanged since verified"


def interpreter_candidates(python, lock_python):
    """The interpreters to try for creating venvs: the configured one, else python<X.Y>, python3."""
    if python:
        return [python]
    return ["python" + lock_python, "python3"] if lock_python else ["python3"]


def parse_python_version(stdout):
    """``3.11.2`` -> (3, 11, 2); None when stdout is not a version."""
    match = re.match(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?\s*$", stdout or "")
    if not match:
        return None
    return tuple(int(g) for g in match.groups() if g is not None)


def version_tuple(text):
    return tuple(int(p) for p in re.findall(r"\d+", text or ""))


def too_old(version, minimum):
    """Whether interpreter ``version`` (e.g. "3.9.18") is older than ``minimum`` (e.g. "3.10")."""
    return version_tuple(version) < version_tuple(minimum)


def too_old_message(version, interpreter, stack, minimum, lock_python):
    return ("Python %s (%s) is too old for stack %s, which requires Python >= %s (its lock was resolved for %s). "
            "Set sglang_env_python to a newer interpreter." % (version, interpreter, stack, minimum, lock_python))


def python_packages(override, lock_python):
    """apt packages that provide the interpreter: the configured ones, else python<X.Y> and its venv."""
    if override:
        return list(override)
    return ["python" + lock_python, "python" + lock_python + "-venv"]


def extra_indexes(torch_index_url, extra_index_urls):
    """The stack's torch index (when set) followed by the further indexes."""
    return ([torch_index_url] if torch_index_url else []) + list(extra_index_urls or [])


def index_args(index_url, extras, find_links, trusted_hosts):
    """pip's index arguments: ``--index-url`` or ``--no-index``, then every extra index, find-links
    location and trusted host."""
    args = ["--index-url", index_url] if index_url else ["--no-index"]
    args += ["--extra-index-url=" + u for u in extras]
    args += ["--find-links=" + u for u in find_links or []]
    args += ["--trusted-host=" + h for h in trusted_hosts or []]
    return args


def lock_path(lock_dir, stack):
    return lock_dir.rstrip("/") + "/" + stack + ".txt"


def pip_install_argv(venv, lock_file, index_arguments, extra_args):
    """Hash-checked install of the lock, no resolution on the host, wheels only."""
    return ([venv.rstrip("/") + "/bin/python", "-m", "pip", "install", "--require-hashes", "--no-deps",
             "--only-binary=:all:", "-r", lock_file] + list(index_arguments) + list(extra_args or []))


def index_probe_urls(index_url, extras, find_links, project):
    """URLs that show each index answers before anything changes: the PEP 503 page of ``project``
    on the index and on every extra index, and every http(s) find-links location."""
    urls = [u.rstrip("/") + "/" + project + "/" for u in ([index_url] if index_url else []) + list(extras)]
    return urls + [u for u in find_links or [] if re.match(r"^https?://", u)]


def parse_verify(stdout):
    """The import check's JSON -> {"python", "versions", "torch_cuda"}; ValueError otherwise."""
    data = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else None
    if not isinstance(data, dict) or not isinstance(data.get("modules"), dict):
        raise ValueError("not the import check's output: %r" % stdout[-200:])
    return {"python": str(data.get("python", "")), "versions": data["modules"], "torch_cuda": data.get("torch_cuda")}


def freeze_sha256(stdout):
    """sha256 of ``pip freeze --all`` output without its trailing newline (what the command module
    returned to earlier versions of the role, so records stay comparable)."""
    return sha256_text(stdout.rstrip("\r\n"))


def venv_entry(stack, venv, seen, lock, fingerprint):
    """One venv's provenance entry. ``seen``: the verified fields, from this run's import check or
    from the record that still holds."""
    return {
        "stack": stack,
        "venv": venv,
        "python": seen.get("python"),
        "versions": seen.get("versions"),
        "torch_cuda": seen.get("torch_cuda"),
        "lock_sha256": lock["sha256"],
        "lock_packages": len(lock["pins"]),
        "freeze_sha256": seen.get("freeze_sha256"),
        "dist_fingerprint": fingerprint,
    }


def provenance_record(entries, index_url, extras, find_links, cuda_home):
    """The host's record: the server entry at the top level, the client entry (or null) under
    ``client``, and where the packages came from."""
    record = dict(entries["server"])
    record.update({
        "client": entries.get("client"),
        "index_url": index_url,
        "extra_index_urls": list(extras),
        "find_links": list(find_links or []),
        "cuda_home": cuda_home,
    })
    return record


def render_provenance(record):
    """The file's text: sorted keys, four-space indent, trailing newline (to_nice_json's layout)."""
    return json.dumps(record, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"


def file_current(st, content_sha256, expected_sha256, mode=FILE_MODE):
    """Whether a file (its os.stat result and content sha256, or None when absent) already is what
    the role's copy task would write."""
    if st is None or not _stat.S_ISREG(st.st_mode):
        return False
    return (content_sha256 == expected_sha256 and _stat.S_IMODE(st.st_mode) == mode
            and st.st_uid == OWNER_UID and st.st_gid == OWNER_GID)


def dir_current(st, mode=DIR_MODE):
    """Whether a directory (its os.stat result, or None) already is what the role's file task makes."""
    if st is None or not _stat.S_ISDIR(st.st_mode):
        return False
    return _stat.S_IMODE(st.st_mode) == mode and st.st_uid == OWNER_UID and st.st_gid == OWNER_GID
