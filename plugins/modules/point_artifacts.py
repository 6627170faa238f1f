#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: point_artifacts
short_description: Read a sweep point's artifacts from the host in one round trip
description:
  - Runs on the target. Reads the files a sweep point keeps (the rendered unit, its environment file, the
    benchmark's result and telemetry files) and the journal of one server run (its systemd InvocationID), and
    returns their text with size and sha256, so the results callback on the controller can write them.
  - Secrets never leave the host - the values of secret names (HF_TOKEN, *_API_KEY, ...) in files listed in
    O(env_files) and credential-looking strings in every text are replaced by C(<redacted>) before returning.
  - Files larger than O(max_bytes) are cut to their last O(max_bytes) bytes and say so (C(truncated)).
  - It only reads; it never changes the host.
version_added: "0.1.0"
author: moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  # first: the support it states wins over the base fragment's platform N/A
  - moesweep.sweep.attributes.READ_ONLY
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.IDEMPOTENT
options:
  files:
    description: Artifact name to path on the host; a missing path is reported as missing, not an error.
    type: dict
    default: {}
  env_files:
    description: Artifact names (keys of O(files)) that are systemd environment files whose secret values are redacted.
    type: list
    elements: str
    default: []
  invocation_id:
    description:
      - The server run (its systemd InvocationID, 32 hex digits) whose journal is returned as the artifact
        C(journal.txt); empty - no journal.
    type: str
    default: ""
  max_bytes:
    description: Largest text returned per artifact.
    type: int
    default: 4000000
attributes:
  check_mode:
    details: It reads in check mode too.
"""

EXAMPLES = r"""
- name: Collect a point's artifacts
  moesweep.sweep.point_artifacts:
    files:
      unit.service: /etc/systemd/system/sglang.service
      unit.env: /etc/moesweep/sglang.env
    env_files: [unit.env]
    invocation_id: "{{ readiness.invocation_id }}"
"""

RETURN = r"""
artifacts:
  description:
    - Artifact name (a key of O(files), and C(journal.txt) with O(invocation_id)) to its text and what it was.
    - Each value holds C(content) (the redacted text, null when missing), C(size) and C(sha256) (of the whole
      file as read, before redaction and truncation), C(truncated), C(missing) and, for a missing file, C(error).
  returned: always
  type: dict
  sample: {"unit.service": {"content": "[Unit]...", "size": 1234, "sha256": "ab...", "truncated": false, "missing": false}}
"""

import hashlib
import json
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import readiness, secrets

_INVOCATION_RE = re.compile(r"^[0-9a-f]{32}$")


def _entry(data, max_bytes, redact_env):
    size = len(data)
    digest = hashlib.sha256(data).hexdigest()
    truncated = size > max_bytes
    if truncated:
        data = data[-max_bytes:]
    text = data.decode("utf-8", "replace")
    text = secrets.redact_env_file(text) if redact_env else secrets.redact_text(text)
    return {"content": text, "size": size, "sha256": digest, "truncated": truncated, "missing": False}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(type="dict", default={}),
            env_files=dict(type="list", elements="str", default=[]),
            invocation_id=dict(type="str", default=""),
            max_bytes=dict(type="int", default=4000000),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["max_bytes"] <= 0:
        module.fail_json(msg="max_bytes must be greater than 0", artifacts={})
    if p["invocation_id"] and not _INVOCATION_RE.match(p["invocation_id"]):
        module.fail_json(msg="invocation_id must be a systemd InvocationID (32 hex digits)", artifacts={})
    out = {}
    for name, path in sorted((p["files"] or {}).items()):
        try:
            with open(str(path), "rb") as fh:
                out[name] = _entry(fh.read(), p["max_bytes"], name in p["env_files"])
        except (IOError, OSError) as exc:
            out[name] = {"content": None, "size": 0, "sha256": None, "truncated": False, "missing": True,
                         "error": str(exc)}
    if p["invocation_id"]:
        journalctl = module.get_bin_path("journalctl")
        if journalctl:
            rc, stdout, _err = module.run_command(
                readiness.journal_argv(journalctl, p["invocation_id"], follow=False),
                environ_update={"LC_ALL": "C", "SYSTEMD_PAGER": ""})
            lines = []
            for raw in stdout.splitlines() if rc == 0 else []:
                entry = readiness.journal_entry(raw)
                if entry is not None:
                    lines.append(entry[0])
            out["journal.txt"] = _entry(("\n".join(lines) + "\n").encode("utf-8"), p["max_bytes"], False)
    json.dumps(out)
    module.exit_json(changed=False, artifacts=out)


if __name__ == "__main__":
    main()
