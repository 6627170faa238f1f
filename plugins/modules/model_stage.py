#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: model_stage
short_description: Stage a Hugging Face model repository's server files in a local directory, verified
description:
  - Lists the repository's files at O(revision) with the C(huggingface_hub) of O(python) (the server venv's),
    keeps the ones a server loads (config, tokenizer, custom code, the safetensors weights, else .bin / .pt),
    refuses before any byte moves when they do not fit on the disk of O(local_dir) with O(reserve_bytes) to
    spare, downloads what is missing with C(snapshot_download) (a broken connection is resumed, up to 3 client
    runs), checks every file it fetched - its size, and the sha256 of the LFS ones against the hub's list -, fetches
    a mismatching file again once, and writes a record of the verified stage in O(local_dir) with each file's size
    and mtime as verified.
  - A hub that cannot be reached mid-stage fails the stage naming the client's error (C(snapshot_download) itself
    would return the directory as it is); the bytes of unfinished files stay under
    C(<local_dir>/.cache/huggingface/download/) and the next stage resumes them (an HTTP Range request).
  - A re-run with the revision staged reads nothing when every file has the size and mtime the record holds
    (C(changed) false). A file written since (a byte flipped in place, a copy over it) is read again against the
    hub's sha256 and fetched again when it differs; O(verify=full) reads every LFS file, whatever the record says.
  - The token goes to the client in E(HF_TOKEN), never on a command line nor in the result.
  - Check mode lists and decides, and changes nothing.
  - Before the download it writes its plan (the files, their total size, the bytes already there, when it started,
    its pid) to C(.moesweep-stage-plan.json) in O(local_dir), removed once the stage is verified; run as an async
    job, M(moesweep.sweep.model_stage_wait) reports the download's bytes, rate and time left against it.
version_added: 0.1.0
author:
  - moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  - moesweep.sweep.attributes
options:
  repo_id:
    description: The hub repository, C(org/name).
    type: str
    required: true
  revision:
    description: Branch, tag or commit to stage; the commit it resolves to is what is recorded.
    type: str
    default: main
  local_dir:
    description: Directory the files go to (created); the server is pointed at it.
    type: path
    required: true
  python:
    description: Interpreter with C(huggingface_hub) installed (the server venv's C(bin/python)).
    type: path
    required: true
  endpoint:
    description: The hub's URL (E(HF_ENDPOINT)), e.g. an internal mirror; the client's default when unset.
    type: str
  token:
    description: Hub token for gated or private repositories.
    type: str
  reserve_bytes:
    description: Free space kept beside the model for the JIT caches when judging whether it fits.
    type: int
    default: 10737418240
  verify:
    description:
      - C(quick) reads again (sha256) only the files the record of the last verified stage no longer vouches for
        (another size or mtime); C(full) reads every LFS file of the model (minutes per 100 GB on a fast disk).
    type: str
    choices: [quick, full]
    default: quick
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
notes:
  - Decisions are C(plugins/module_utils/model_stage.py).
seealso:
  - module: moesweep.sweep.model_stage_wait
"""

EXAMPLES = r"""
- name: Stage GLM-5-NVFP4 for the server
  moesweep.sweep.model_stage:
    repo_id: lukealonso/GLM-5-NVFP4
    local_dir: /var/lib/sglang/models/GLM-5-NVFP4
    python: /opt/moesweep/venvs/sglang/bin/python
    token: "{{ sglang_server_hf_token }}"
  register: staged

- name: Stage it as an async job, its progress reported while it downloads
  moesweep.sweep.model_stage:
    repo_id: lukealonso/GLM-5-NVFP4
    local_dir: /var/lib/sglang/models/GLM-5-NVFP4
    python: /opt/moesweep/venvs/sglang/bin/python
  async: 86400
  poll: 0
  changed_when: false
  register: staging

- name: Wait for the staging job, reporting its progress
  moesweep.sweep.model_stage_wait:
    results_file: "{{ staging.results_file }}"
    local_dir: /var/lib/sglang/models/GLM-5-NVFP4
  register: staged
  until: staged.finished
  retries: 8640
  delay: 0
"""

RETURN = r"""
repo_id: {description: The repository staged., returned: success, type: str, sample: lukealonso/GLM-5-NVFP4}
revision: {description: The commit hash staged., returned: success, type: str, sample: 3f0c1e2a9b8d7c6e5f4a3b2c1d0e9f8a7b6c5d4e}
local_path: {description: The directory holding the files., returned: success, type: str, sample: /var/lib/sglang/models/GLM-5-NVFP4}
bytes: {description: Size of the staged files., returned: success, type: int, sample: 453000000000}
files: {description: Number of staged files., returned: success, type: int, sample: 97}
downloaded: {description: Whether anything was downloaded (false when the revision was staged and verified)., returned: success, type: bool, sample: false}
refetched: {description: Files fetched again because their size or sha256 did not match the hub's., returned: success, type: list, elements: str, sample: []}
verified:
  description: Files whose sha256 was read against the hub's before any download (not vouched for by the record, or O(verify=full)).
  returned: success
  type: list
  elements: str
  sample: [model-00001-of-00097.safetensors]
interrupted:
  description: The client's error of each download run that broke off and was resumed by the next (up to 3 runs).
  returned: success
  type: list
  elements: str
  sample: ["requests.exceptions.ChunkedEncodingError: ('Connection broken: IncompleteRead(...)')"]
"""

import hashlib
import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import model_stage as ms
from ansible_collections.moesweep.sweep.plugins.module_utils import stage_progress

LIST = r"""
import json, os, sys
from huggingface_hub import HfApi
info = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None).model_info(sys.argv[1], revision=sys.argv[2],
                                                                         files_metadata=True)
print(json.dumps({"sha": info.sha, "files": [{"name": s.rfilename, "size": s.size,
                                               "sha256": s.lfs.sha256 if s.lfs else None} for s in info.siblings]}))
"""

DOWNLOAD = r"""
import json, logging, os, sys
from huggingface_hub import snapshot_download

# A hub it cannot reach is no error to snapshot_download when local_dir holds anything: it logs this warning and
# returns local_dir as it is (huggingface_hub 0.36.2 _snapshot_download.py:220-227, 1.33.0 :357-360). A stage must
# fail there, naming the client's error, not find files missing afterwards.
unreachable = []


class Unreachable(logging.Handler):
    def emit(self, record):
        text = record.getMessage()
        if "as remote repo cannot be accessed" in text:
            unreachable.append(text.split("`snapshot_download` (", 1)[-1].rstrip(".").rstrip(")"))


logging.getLogger("huggingface_hub").addHandler(Unreachable())
snapshot_download(sys.argv[1], revision=sys.argv[2], local_dir=sys.argv[3], allow_patterns=json.loads(sys.argv[4]),
                  endpoint=os.environ.get("HF_ENDPOINT") or None)
if unreachable:
    sys.stderr.write("the hub could not be reached: %s\n" % unreachable[-1])
    raise SystemExit(3)
"""


# A broken connection (a cut, a reset) ends one client run; the next one resumes from the bytes kept.
DOWNLOAD_ATTEMPTS = 3


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _stats(local_dir, files):
    """{name: (size, mtime_ns)} of the files on the disk."""
    out = {}
    for f in files:
        try:
            st = os.stat(os.path.join(local_dir, f["name"]))
        except OSError:
            continue
        out[f["name"]] = (st.st_size, st.st_mtime_ns)
    return out


def _client_record(local_dir, name):
    """huggingface_hub's record of a file it put in local_dir (``.cache/huggingface/download/<name>.metadata``,
    huggingface_hub 0.36.2 _local_folder.py:218): while it is there and older than the file, the client skips it."""
    return os.path.join(local_dir, ".cache", "huggingface", "download", name + ".metadata")


def _drop(local_dir, name):
    """Remove a file that is not the hub's and the client's record of it, so that the next client run fetches it;
    the bytes of unfinished downloads (``.incomplete``) are kept."""
    for path in (os.path.join(local_dir, name), _client_record(local_dir, name)):
        try:
            os.remove(path)
        except OSError:
            pass


def _incomplete_bytes(local_dir):
    total = 0
    for root, _dirs, names in os.walk(os.path.join(local_dir, ".cache", "huggingface", "download")):
        for name in names:
            if name.endswith(".incomplete"):
                try:
                    total += os.path.getsize(os.path.join(root, name))
                except OSError:
                    pass
    return total


def _free(path):
    probe = path
    while probe and not os.path.exists(probe):
        probe = os.path.dirname(probe)
    try:
        st = os.statvfs(probe or "/")
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _client(module, script, args, env):
    rc, out, err = module.run_command([module.params["python"], "-c", script] + args, environ_update=env)
    if rc != 0:
        last = (err or out or "").strip().splitlines()
        module.fail_json(msg="huggingface_hub failed for %s: %s" % (
            module.params["repo_id"], last[-1] if last else "exit %d" % rc), rc=rc)
    return out


def _download(module, args, env, result):
    """The download, resumed up to DOWNLOAD_ATTEMPTS times when the connection breaks: the client keeps what it
    received in ``.incomplete`` files and asks for the rest (an HTTP Range request)."""
    for _attempt in range(DOWNLOAD_ATTEMPTS):
        rc, out, err = module.run_command([module.params["python"], "-c", DOWNLOAD] + args, environ_update=env)
        if rc == 0:
            return
        last = (err or out or "").strip().splitlines()
        result["interrupted"].append(last[-1] if last else "exit %d" % rc)
    kept = _incomplete_bytes(module.params["local_dir"])
    module.fail_json(msg="huggingface_hub failed for %s %d times, the last: %s (%s: the next stage resumes %s)" % (
        module.params["repo_id"], DOWNLOAD_ATTEMPTS, result["interrupted"][-1],
        "%d bytes of unfinished files are kept under %s" % (
            kept, os.path.join(module.params["local_dir"], ".cache", "huggingface", "download")) if kept
        else "the finished files are kept", "them" if kept else "from there"), rc=rc, **result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            repo_id=dict(type="str", required=True),
            revision=dict(type="str", default="main"),
            local_dir=dict(type="path", required=True),
            python=dict(type="path", required=True),
            endpoint=dict(type="str"),
            token=dict(type="str", no_log=True),
            reserve_bytes=dict(type="int", default=10 << 30),
            verify=dict(type="str", default="quick", choices=["quick", "full"]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not os.access(p["python"], os.X_OK):
        module.fail_json(msg="python %s is not executable: point it at the server venv's bin/python (provision the "
                         "host with site.yml first)" % p["python"])
    env = {"HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    if p["endpoint"]:
        env["HF_ENDPOINT"] = p["endpoint"]
    if p["token"]:
        env["HF_TOKEN"] = p["token"]
    listed = json.loads(_client(module, LIST, [p["repo_id"], p["revision"]], env).strip().splitlines()[-1])
    files = ms.wanted(listed["files"])
    local_dir = p["local_dir"]
    result = dict(changed=False, repo_id=p["repo_id"], revision=listed["sha"], local_path=local_dir,
                  bytes=sum(f["size"] for f in files), files=len(files), downloaded=False, refetched=[],
                  interrupted=[], verified=[])
    marker_path = os.path.join(local_dir, ms.MARKER)
    try:
        with open(marker_path) as handle:
            marker = json.load(handle)
    except (OSError, ValueError):
        marker = None
    stats = _stats(local_dir, files)
    trusted = ms.vouched(marker, p["repo_id"], listed["sha"], files, stats)
    if p["verify"] == "full":
        # every LFS file is read; the others have no digest on the hub to read them against
        trusted -= set(f["name"] for f in files if f.get("sha256"))
    if len(trusted) == len(files):
        module.exit_json(**result)
    # What the marker no longer vouches for (every file with verify=full) and is on the disk at the hub's size is
    # read now: an LFS file against the hub's sha256, the rest left to the client's own record, which fetches a file
    # written after it. Only what fails is fetched again.
    seen = {}
    for f in files:
        got = stats.get(f["name"])
        if f["name"] not in trusted and got and got[0] == f["size"] and f.get("sha256"):
            seen[f["name"]] = (got[0], _sha256(os.path.join(local_dir, f["name"])))
            result["verified"].append(f["name"])
    wrong = [name for name, _why in ms.mismatches([f for f in files if f["name"] in seen], seen)]
    good = set(trusted) | (set(seen) - set(wrong))
    need = [f for f in files if f["name"] not in good]
    if not need:
        # every file is the hub's: only the marker learns the files' new mtimes (a touch, a copy back)
        _write_marker(marker_path, p["repo_id"], listed["sha"], local_dir, files, module.check_mode)
        module.exit_json(**result)
    problem = ms.space_problem(files, dict((n, st[0]) for n, st in stats.items() if n not in wrong),
                               _free(local_dir), p["reserve_bytes"], local_dir)
    if problem:
        module.fail_json(msg="%s (%s at %s): %s" % (p["repo_id"], "staging refused", listed["sha"][:12], problem),
                         **result)
    result.update(changed=True, downloaded=True)
    if module.check_mode:
        module.exit_json(**result)
    if not os.path.isdir(local_dir):
        os.makedirs(local_dir, 0o755)
    for name in wrong:
        result["refetched"].append(name)
        _drop(local_dir, name)
    # what model_stage_wait measures the download against, written before the first byte moves
    sizes = dict((f["name"], f["size"]) for f in files)
    stage_progress.write_plan(local_dir, stage_progress.plan(
        p["repo_id"], listed["sha"], files, stage_progress.measure(local_dir, sizes), time.time(), os.getpid()))
    args = [p["repo_id"], listed["sha"], local_dir, json.dumps(ms.allow_patterns(files))]
    _download(module, args, env, result)
    for attempt in (1, 2):
        # what this stage fetched (the files it needed) is read in full; what was good before is not read again
        seen = {}
        for f in need:
            path = os.path.join(local_dir, f["name"])
            if os.path.isfile(path):
                seen[f["name"]] = (os.path.getsize(path), _sha256(path) if f.get("sha256") else None)
        bad = ms.mismatches(need, seen)
        if not bad:
            break
        if attempt == 2:
            module.fail_json(msg="%s at %s: %s still differ from the hub after fetching them again: %s" % (
                p["repo_id"], listed["sha"][:12], len(bad), "; ".join("%s (%s)" % b for b in bad)), **result)
        for name, _why in bad:
            result["refetched"].append(name)
            _drop(local_dir, name)
        _download(module, args, env, result)
    _write_marker(marker_path, p["repo_id"], listed["sha"], local_dir, files, False)
    try:
        os.remove(os.path.join(local_dir, stage_progress.PLAN_FILE))  # the marker is the stage's record now
    except OSError:
        pass
    module.exit_json(**result)


def _write_marker(marker_path, repo_id, revision, local_dir, files, check_mode):
    if check_mode:
        return
    tmp = marker_path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(ms.record(repo_id, revision, local_dir, files, _stats(local_dir, files)), handle, indent=1,
                  sort_keys=True)
    os.replace(tmp, marker_path)


if __name__ == "__main__":
    main()
