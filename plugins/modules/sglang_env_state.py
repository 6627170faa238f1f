#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: sglang_env_state
short_description: Compare SGLang venvs with their hash-pinned locks and with the recorded provenance
version_added: "0.1.0"
description:
  - The read-only half of the C(moesweep.sweep.sglang_env) role. For each venv it parses the lock
    (written by C(scripts/lock_stacks.py)), runs a stdlib-only probe with the venv's own interpreter
    (C(importlib.metadata) and a fingerprint of the installed C(*.dist-info) directories), and returns
    the missing pins, whether the provenance record of the last run still holds for that venv, and
    the pip command that installs the lock.
  - It also chooses the interpreter that creates venvs (O(python), else C(python<X.Y of the lock>),
    then C(python3)), computes the index URLs to probe before installing, and builds the provenance
    record and its file text.
  - With O(verify=true) it also imports the stack in every venv whose record does not hold and hashes
    its C(pip freeze --all), and runs C(python -m sglang.check_env) in the server venv when O(check_env)
    is set and C(nvidia-smi -L) lists a GPU; the record is then complete.
  - >-
    Refuses, before anything else, a lock whose header says C("complete": false), a lock that is cut
    or has unhashed pins, a relative venv path, and an interpreter older than the stack needs.
  - Changes nothing on the host, in check mode or not.
extends_documentation_fragment:
  # first: the support it states wins over the base fragment's platform N/A
  - moesweep.sweep.attributes.READ_ONLY
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.IDEMPOTENT
options:
  venvs:
    description: The venvs to manage. Exactly one is named V(server); its entry is the record's top level.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Which venv this is.
        type: str
        required: true
        choices: [server, client]
      path:
        description: Absolute path of the venv.
        type: str
        required: true
      stack:
        description: Name of the stack; the lock's header must name the same.
        type: str
        required: true
      lock:
        description: The text of the stack's lock file, exactly as committed (its sha256 is recorded).
        type: str
        required: true
      python_min:
        description: Oldest Python the stack runs on (its Requires-Python floor).
        type: str
        required: true
      imports:
        description: Modules imported by the check of O(verify).
        type: list
        elements: str
        default: []
  python:
    description: Interpreter that creates the venvs. Empty tries C(python<X.Y>) of the server lock, then C(python3).
    type: str
    default: ""
  python_install:
    description: When no interpreter runs, return the apt packages to install instead of failing.
    type: bool
    default: true
  python_packages:
    description: apt packages providing the interpreter; empty means C(python<X.Y>) and C(python<X.Y>-venv).
    type: list
    elements: str
    default: []
  index_url:
    description: Package index (PEP 503); empty means C(--no-index).
    type: str
    default: https://pypi.org/simple
  torch_index_url:
    description: Index carrying the stack's CUDA build of torch; empty for none.
    type: str
    default: ""
  extra_index_urls:
    description: Further indexes, after O(torch_index_url).
    type: list
    elements: str
    default: []
  find_links:
    description: Wheelhouse directories or URLs (pip C(--find-links)).
    type: list
    elements: str
    default: []
  trusted_hosts:
    description: Hosts pip may reach over plain http (pip C(--trusted-host)).
    type: list
    elements: str
    default: []
  pip_extra_args:
    description: Extra pip install arguments, appended verbatim to the returned command.
    type: list
    elements: str
    default: []
  lock_dir:
    description: Directory on the host where the locks pip installs from are copied.
    type: path
    default: /etc/moesweep/locks
  provenance_path:
    description: The provenance record written by the last run, read to decide what still holds.
    type: path
    default: /etc/moesweep/provenance.json
  cuda_home:
    description: The CUDA toolkit in use, recorded as C(cuda_home).
    type: str
  check_env:
    description: With O(verify), run C(python -m sglang.check_env) in the server venv where C(nvidia-smi -L) lists a GPU.
    type: bool
    default: false
  verify:
    description:
      - Import O(venvs[].imports) and hash C(pip freeze --all) in every venv whose record does not hold.
      - Fails when such a venv still misses pins of its lock (run it after installing).
    type: bool
    default: false
attributes:
  idempotent:
    details: It only reads (the import check and C(sglang.check_env) load the stack without changing it).
notes:
  - Read-only. The import check and C(sglang.check_env) load the stack (seconds for torch); they run only
    for a venv whose record no longer holds, that is after any install, removal or reinstall in it.
  - The venv's distributions are read by its own interpreter (C(importlib.metadata)), never by the
    interpreter running this module.
seealso:
  - module: moesweep.sweep.gpu_facts
author:
  - moesweep contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Compare the server venv with its lock
  moesweep.sweep.sglang_env_state:
    venvs:
      - name: server
        path: /opt/moesweep/venvs/sglang
        stack: cu128-sglang-0.5.9
        lock: "{{ lookup('ansible.builtin.file', 'locks/cu128-sglang-0.5.9.txt', rstrip=false) }}"
        python_min: "3.10"
        imports: [sglang, flashinfer, torch]
  register: state

- name: Install what the module says is missing
  ansible.builtin.command:
    argv: "{{ item.install_argv }}"
  loop: "{{ state.venvs }}"
  when: item.install
"""

RETURN = r"""
venvs:
  description: One entry per venv, in the order of O(venvs).
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: The venv's name., type: str, sample: server}
    path: {description: The venv's path., type: str, sample: /opt/moesweep/venvs/sglang}
    stack: {description: Its stack., type: str, sample: test-cpu-sglang-0.5.9}
    lock_sha256: {description: sha256 of the lock text., type: str, sample: 9f2c...}
    lock_python: {description: The Python the lock was resolved for., type: str, sample: "3.11"}
    lock_pins:
      description: The lock's pins, canonical C(name==version).
      type: list
      elements: str
      sample: [aiohappyeyeballs==2.7.1, aiohttp==3.14.5]
    exists: {description: Whether C(<path>/bin/python) exists., type: bool, sample: true}
    python: {description: "The venv interpreter's version (empty when it could not be probed).", type: str, sample: 3.11.2}
    installed:
      description: What the venv has installed, canonical C(name==version).
      type: list
      elements: str
      sample: [aiohappyeyeballs==2.7.1, pip==23.0.1]
    fingerprint: {description: "Fingerprint of the installed distributions (empty when not probed).", type: str, sample: 5b1e...}
    probe_error: {description: "Why an existing venv could not be probed; null otherwise.", type: str, sample: null}
    missing:
      description: Pins of the lock the venv does not have.
      type: list
      elements: str
      sample: []
    extra:
      description: Installed distributions the lock does not pin (informational).
      type: list
      elements: str
      sample: [pip==23.0.1]
    install: {description: Whether the lock must be installed in this venv., type: bool, sample: false}
    install_argv:
      description: The pip command that installs the lock (hash-checked, no dependency resolution, wheels only).
      type: list
      elements: str
      sample: [/opt/moesweep/venvs/sglang/bin/python, -m, pip, install, --require-hashes, --no-deps]
    record_holds: {description: Whether the recorded provenance still describes this venv., type: bool, sample: true}
    status: {description: "Why the record holds or not, in a few words.", type: str, sample: unchanged since verified}
    lock_copy_current: {description: "Whether the host's copy of the lock has this content, owner root and mode 0644.", type: bool, sample: true}
    verified:
      description: What this run's import check saw (O(verify)); null when the record holds or nothing was verified.
      type: dict
      sample: {python: 3.11.2, versions: {sglang: 0.5.9}, torch_cuda: null, freeze_sha256: 0c1d...}
    check_env:
      description: Output of C(python -m sglang.check_env) when it ran; null otherwise.
      type: dict
      sample: {rc: 0, stdout: "Python: 3.11.2 ..."}
python:
  description: The interpreter that creates venvs.
  returned: always
  type: dict
  contains:
    interpreter: {description: "Path of the first candidate that ran; empty when none did.", type: str, sample: /usr/bin/python3.11}
    version: {description: Its version., type: str, sample: 3.11.2}
    tried:
      description: Each candidate tried, with its path, version or error.
      type: list
      elements: dict
      sample: [{candidate: python3.11, path: /usr/bin/python3.11, version: 3.11.2, error: null}]
    install_packages:
      description: apt packages to install because no candidate ran (empty otherwise).
      type: list
      elements: str
      sample: []
    create_with: {description: "The interpreter to create venvs with (the one found, or the one the packages install).", type: str, sample: /usr/bin/python3.11}
install:
  description: Whether any venv must be installed.
  returned: always
  type: bool
  sample: false
verify:
  description: Names of the venvs whose record does not hold (their imports must be checked).
  returned: always
  type: list
  elements: str
  sample: []
index_probe_urls:
  description: URLs to probe before installing (the PEP 503 page of the first missing project on each index, http(s) find-links).
  returned: always
  type: list
  elements: str
  sample: [https://pypi.org/simple/aiohappyeyeballs/]
lock_copies_current:
  description: Whether O(lock_dir) and every lock copy in it are current (content, owner root, modes 0755 / 0644).
  returned: always
  type: bool
  sample: true
recorded:
  description: The provenance record read from O(provenance_path); null when absent or unreadable.
  returned: always
  type: dict
provenance:
  description: The record this run establishes; null until every venv is either unchanged since verified or verified now.
  returned: always
  type: dict
  sample: {stack: test-cpu-sglang-0.5.9, versions: {sglang: 0.5.9}, client: {stack: client-sglang-0.5.9}}
provenance_content:
  description: The record's file text (sorted keys, 4-space indent, trailing newline); null while RV(provenance) is null.
  returned: always
  type: str
provenance_current:
  description: Whether O(provenance_path) already holds exactly that text with owner root and mode 0644 in a 0755 directory.
  returned: always
  type: bool
  sample: true
"""

import hashlib
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import nvidia_smi as smi
from ansible_collections.moesweep.sweep.plugins.module_utils import venv_lock as vl


def _stat(path):
    try:
        return os.stat(path)
    except OSError:
        return None


def _file_sha256(path):
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 16), b""):
                digest.update(chunk)
    except (IOError, OSError):
        return None
    return digest.hexdigest()


def _read_text(path):
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return None


def _last_line(*texts):
    for text in texts:
        lines = [ln for ln in (text or "").splitlines() if ln.strip()]
        if lines:
            return lines[-1].strip()
    return "no output"


def probe_interpreters(module, candidates):
    """Run each candidate until one prints its version. Returns (tried, found or None)."""
    tried = []
    for candidate in candidates:
        entry = dict(candidate=candidate, path=None, version=None, error=None)
        tried.append(entry)
        path = module.get_bin_path(candidate) if not os.path.isabs(candidate) else candidate
        if not path or not os.path.exists(path):
            entry["error"] = "not found"
            continue
        entry["path"] = path
        rc, out, err = module.run_command([path, "-c", vl.PYTHON_VERSION_SCRIPT], environ_update={"LC_ALL": "C"})
        version = vl.parse_python_version(out) if rc == 0 else None
        if version is None:
            entry["error"] = "rc=%s: %s" % (rc, _last_line(err, out))
            continue
        entry["version"] = ".".join(str(v) for v in version)
        return tried, entry
    return tried, None


def probe_venv(module, path):
    """What the venv has installed, read by its own interpreter."""
    python = path.rstrip("/") + "/bin/python"
    result = dict(exists=os.path.exists(python), python="", installed=[], fingerprint="", probe_error=None)
    if not result["exists"]:
        return result
    rc, out, err = module.run_command([python, "-c", vl.PROBE_SCRIPT], environ_update={"LC_ALL": "C"})
    if rc != 0:
        result["probe_error"] = "rc=%s: %s" % (rc, _last_line(err, out))
        return result
    try:
        probe = vl.parse_probe(out)
    except ValueError as exc:
        result["probe_error"] = str(exc)
        return result
    result.update(python=probe["python"], installed=probe["pins"], fingerprint=probe["fingerprint"])
    return result


def verify_venv(module, venv):
    """Import the stack and hash pip freeze; fail with the import's last error line."""
    python = venv["path"].rstrip("/") + "/bin/python"
    rc, out, err = module.run_command([python, "-c", vl.VERIFY_SCRIPT] + list(venv["imports"]),
                                      environ_update=dict(vl.VERIFY_ENV, LC_ALL="C"))
    if rc != 0:
        module.fail_json(msg="Importing %s in the %s venv %s failed: %s" % (
            ", ".join(venv["imports"]), venv["name"], venv["path"], _last_line(err, out)), rc=rc, stdout=out, stderr=err)
    try:
        seen = vl.parse_verify(out)
    except ValueError as exc:
        module.fail_json(msg="The import check in %s printed no result: %s" % (venv["path"], exc), stdout=out, stderr=err)
    rc, out, err = module.run_command([python, "-m", "pip", "freeze", "--all", "--disable-pip-version-check"],
                                      environ_update=dict(vl.PIP_ENV, LC_ALL="C"))
    if rc != 0:
        module.fail_json(msg="pip freeze in %s failed: %s" % (venv["path"], _last_line(err, out)),
                         rc=rc, stdout=out, stderr=err)
    seen["freeze_sha256"] = vl.freeze_sha256(out)
    return seen


def run_check_env(module, venv):
    """sglang's own environment report, where a GPU exists (it queries the driver)."""
    binary = module.get_bin_path("nvidia-smi")
    if not binary:
        return None
    rc, out, _err = module.run_command([binary, "-L"], environ_update={"LC_ALL": "C"})
    if rc != 0 or not smi.parse_smi_list(out)["gpus"]:
        return None
    rc, out, err = module.run_command([venv["path"].rstrip("/") + "/bin/python", "-m", "sglang.check_env"])
    if rc != 0:
        module.fail_json(msg="python -m sglang.check_env in %s failed: %s" % (venv["path"], _last_line(err, out)),
                         rc=rc, stdout=out, stderr=err)
    return dict(rc=rc, stdout=out)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venvs=dict(type="list", elements="dict", required=True, options=dict(
                name=dict(type="str", required=True, choices=["server", "client"]),
                path=dict(type="str", required=True),
                stack=dict(type="str", required=True),
                lock=dict(type="str", required=True),
                python_min=dict(type="str", required=True),
                imports=dict(type="list", elements="str", default=[]),
            )),
            python=dict(type="str", default=""),
            python_install=dict(type="bool", default=True),
            python_packages=dict(type="list", elements="str", default=[]),
            index_url=dict(type="str", default="https://pypi.org/simple"),
            torch_index_url=dict(type="str", default=""),
            extra_index_urls=dict(type="list", elements="str", default=[]),
            find_links=dict(type="list", elements="str", default=[]),
            trusted_hosts=dict(type="list", elements="str", default=[]),
            pip_extra_args=dict(type="list", elements="str", default=[]),
            lock_dir=dict(type="path", default="/etc/moesweep/locks"),
            provenance_path=dict(type="path", default="/etc/moesweep/provenance.json"),
            cuda_home=dict(type="str"),
            check_env=dict(type="bool", default=False),
            verify=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    venvs = p["venvs"]

    # Input first: nothing is run on the host for a request that cannot succeed.
    names = [v["name"] for v in venvs]
    if names.count("server") != 1 or len(set(names)) != len(names):
        module.fail_json(msg="venvs must name exactly one server venv and at most one client venv, got %s" % names)
    for v in venvs:
        problem = vl.venv_path_problem(v["name"], v["path"])
        if problem:
            module.fail_json(msg=problem)
    paths = [v["path"].rstrip("/") for v in venvs]
    if len(set(paths)) != len(paths):
        module.fail_json(msg="The server and client venvs share the path %s; give each its own." % paths[0])
    locks = {}
    for v in venvs:
        try:
            lock = vl.parse_lock(v["lock"], v["stack"])
        except vl.LockError as exc:
            module.fail_json(msg=str(exc))
        problem = vl.lock_problem(lock)
        if problem:
            module.fail_json(msg=problem)
        locks[v["name"]] = lock
    lock_python = locks["server"]["python"]

    tried, found = probe_interpreters(module, vl.interpreter_candidates(p["python"], lock_python))
    python = dict(interpreter="", version="", tried=tried, install_packages=[], create_with="")
    if found:
        python.update(interpreter=found["path"], version=found["version"], create_with=found["path"])
        for v in venvs:
            if vl.too_old(found["version"], v["python_min"]):
                module.fail_json(msg=vl.too_old_message(found["version"], found["path"], v["stack"], v["python_min"],
                                                        locks[v["name"]]["python"]), python=python)
    elif p["python_install"]:
        python.update(install_packages=vl.python_packages(p["python_packages"], lock_python),
                      create_with="python" + lock_python)
    else:
        module.fail_json(msg="No Python interpreter found (tried %s) and python_install (sglang_env_python_install) "
                             "is false: install python%s or set sglang_env_python."
                             % (", ".join(t["candidate"] for t in tried), lock_python), python=python)

    recorded_text = _read_text(p["provenance_path"])
    recorded = vl.parse_provenance(recorded_text)
    by_venv = vl.recorded_venvs(recorded)
    extras = vl.extra_indexes(p["torch_index_url"], p["extra_index_urls"])
    pip_index = vl.index_args(p["index_url"], extras, p["find_links"], p["trusted_hosts"])
    lock_dir_ok = vl.dir_current(_stat(p["lock_dir"]))

    out, entries = [], {}
    for v in venvs:
        lock = locks[v["name"]]
        seen = probe_venv(module, v["path"])
        missing = vl.missing_pins(lock["pins"], seen["installed"])
        holds, status = vl.record_holds(by_venv.get(v["name"]), v["stack"], v["path"], lock["sha256"],
                                        seen["fingerprint"], missing)
        copy = vl.lock_path(p["lock_dir"], v["stack"])
        entry = dict(
            name=v["name"], path=v["path"], stack=v["stack"], lock_sha256=lock["sha256"], lock_python=lock["python"],
            lock_pins=lock["pins"], missing=missing, extra=vl.extra_pins(lock["pins"], seen["installed"]),
            install=bool(missing), install_argv=vl.pip_install_argv(v["path"], copy, pip_index, p["pip_extra_args"]),
            record_holds=holds, status=status, verified=None, check_env=None,
            lock_copy_current=lock_dir_ok and vl.file_current(_stat(copy), _file_sha256(copy), vl.sha256_text(v["lock"])),
        )
        entry.update(seen)
        if holds:
            entries[v["name"]] = vl.venv_entry(v["stack"], v["path"], by_venv[v["name"]], lock, seen["fingerprint"])
        elif p["verify"]:
            if missing:
                module.fail_json(msg="%s does not match lock %s after installing: still missing %s" % (
                    v["path"], v["stack"], ", ".join(missing)), venvs=out + [entry])
            entry["verified"] = verify_venv(module, v)
            entry["status"] = "verified now (%s)" % status
            if v["name"] == "server" and p["check_env"]:
                entry["check_env"] = run_check_env(module, v)
            entries[v["name"]] = vl.venv_entry(v["stack"], v["path"], entry["verified"], lock, seen["fingerprint"])
        out.append(entry)

    first_missing = next((e["missing"][0] for e in out if e["missing"]), locks["server"]["pins"][0])
    result = dict(
        changed=False,
        venvs=out,
        python=python,
        install=any(e["install"] for e in out),
        verify=[e["name"] for e in out if not e["record_holds"]],
        index_probe_urls=vl.index_probe_urls(p["index_url"], extras, p["find_links"], first_missing.split("==")[0]),
        lock_copies_current=all(e["lock_copy_current"] for e in out),
        recorded=recorded,
        provenance=None,
        provenance_content=None,
        provenance_current=False,
    )
    if len(entries) == len(venvs):
        record = vl.provenance_record(entries, p["index_url"], extras, p["find_links"], p["cuda_home"])
        content = vl.render_provenance(record)
        result.update(provenance=record, provenance_content=content, provenance_current=(
            vl.dir_current(_stat(os.path.dirname(p["provenance_path"])))
            and vl.file_current(_stat(p["provenance_path"]), _file_sha256(p["provenance_path"]),
                                vl.sha256_text(content))))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
