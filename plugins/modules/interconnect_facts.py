#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: interconnect_facts
short_description: Measure all-reduce latency, bus bandwidth and P2P access across the GPUs of a TP group
version_added: "0.1.0"
description:
  - Runs a measuring program across the first O(ngpus) visible GPUs under the unit's NCCL environment (the
    C(NCCL_*), C(CUDA_VISIBLE_DEVICES) and C(CUDA_DEVICE_ORDER) entries of O(environment)) and returns its
    all-reduce table in NVIDIA nccl-tests' C(all_reduce_perf) terms (time, algbw, busbw = algbw x 2(n-1)/n per
    message size) and P2P access per GPU pair.
  - The program is, by default, O(program_source) (the server role's C(files/allreduce_perf.py), torch.distributed
    over NCCL) run with O(python), the server venv's interpreter, so the torch and NCCL that SGLang loads are what is
    measured. It is written to a private temporary directory and removed afterwards. O(command) replaces it (a
    simulated host's stand-in, or NVIDIA's C(all_reduce_perf) itself with its own arguments).
  - Refuses to measure while a compute process holds a GPU (a running server's all-reduces would share the links,
    and its memory may not leave room); stop the server first.
  - Bounded by O(timeout) seconds; the program is also told to start no further message size after most of it.
  - Also reads the model's C(config.json) (layers, hidden size) from O(model_path) or the Hugging Face cache under
    O(home), for the share estimate of C(module_utils/interconnect.py).
  - "With O(nccl_debug), NCCL states the transport it chose between every GPU pair (C(NCCL_DEBUG=INFO),
    C(NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH) for the measurement only); its lines are read into C(transport) of RV(interconnect)
    (C(module_utils/nccl_log.py)) and kept out of its C(output)."
  - The program also gets the NCCL variables sglang sets in its own processes (C(NCCL_CUMEM_ENABLE),
    C(NCCL_NVLS_ENABLE), from O(flags)), so NCCL connects as in the server.
  - Changes nothing on the host.
options:
  ngpus:
    description: Ranks of the TP group (the server's C(--tp-size)); one per GPU from visible GPU 0.
    type: int
    required: true
  environment:
    description: The unit's public environment; only the names NCCL reads are passed on.
    type: dict
    default: {}
  flags:
    description: The launch's flags (C(enable-symm-mem), C(enable-nccl-nvls) decide what sglang sets for NCCL).
    type: dict
    default: {}
  nccl_debug:
    description: Run the program with NCCL's INFO lines on and read the transport NCCL chose between every GPU pair.
    type: bool
    default: true
  python:
    description: The server venv's python, which runs O(program_source).
    type: path
    default: /opt/moesweep/venvs/sglang/bin/python
  program_source:
    description: The measuring program's text (the role passes C(files/allreduce_perf.py)). Required unless O(command).
    type: str
  command:
    description:
      - Argv to run instead of O(python) with O(program_source); C(--ngpus N) and the size and time arguments are
        appended when O(command_args) is C(moesweep).
    type: list
    elements: str
    default: []
  command_args:
    description: C(moesweep) appends the measuring program's arguments to O(command); C(none) runs it as given.
    type: str
    choices: [moesweep, none]
    default: moesweep
  min_bytes:
    description: Smallest message size.
    type: int
    default: 4096
  max_bytes:
    description: Largest message size.
    type: int
    default: 268435456
  timeout:
    description: Seconds the measurement may take in all.
    type: float
    default: 30
  model_path:
    description: The server's C(--model-path) (a directory holding C(config.json), or a Hugging Face repository id).
    type: str
    default: ""
  model_config:
    description: The model's C(config.json) itself; when given, O(model_path) is not looked up.
    type: path
    default: ""
  home:
    description: HOME of the server's unit, whose C(.cache/huggingface/hub) holds a downloaded model.
    type: path
    default: /var/lib/sglang
  nvidia_smi_path:
    description: Path of nvidia-smi. Found in E(PATH) when omitted.
    type: path
author:
  - moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.FACTS
attributes:
  check_mode:
    support: full
    details: It only measures, so it measures in check mode too.
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    support: full
    platforms: posix
seealso:
  - module: moesweep.sweep.gpu_facts
  - name: nccl-tests performance documentation
    description: What time, algbw and busbw mean.
    link: https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md
"""

EXAMPLES = r"""
- name: Measure the TP group's all-reduce under the unit's NCCL environment
  moesweep.sweep.interconnect_facts:
    ngpus: 8
    environment: {NCCL_P2P_LEVEL: PHB, NCCL_IB_DISABLE: "1"}
    program_source: "{{ lookup('ansible.builtin.file', 'files/allreduce_perf.py') }}"
    model_path: lukealonso/GLM-5-NVFP4
"""

RETURN = r"""
ansible_facts:
  description: C(moesweep_interconnect), the same dictionary as RV(interconnect).
  returned: success
  type: dict
interconnect:
  description:
    - The measurement, recorded per host and NCCL environment.
    - C(rows) (size, count, type, redop, time_us, algbw_gbs, busbw_gbs, in_place), C(ranks), C(devices),
      C(nccl_version), C(avg_busbw_gbs), C(p2p) (from, to, access), C(nccl_environment), C(key) (the NCCL environment
      and rank count hashed), C(elapsed), C(output) (the program's table as printed, without NCCL's lines),
      C(transport) (what NCCL printed of its transports, read by C(module_utils/nccl_log.py); C(found), C(nccl_version),
      C(pairs) with src, dst, transport, family, channels and NCCL's line, C(transports), C(refusals), C(environment),
      C(p2p_level), C(paths)), C(run_environment) (what the program ran under), C(nccl_lines) (NCCL lines read),
      C(model) (layers, hidden_size, model_type, config path) or C(model_error).
  returned: success
  type: dict
  sample:
    ranks: 8
    key: 3f2a9c1d0b7e
    nccl_environment: {NCCL_IB_DISABLE: "1", NCCL_P2P_LEVEL: PHB}
    rows: [{size: 16384, time_us: 42.6, algbw_gbs: 0.38, busbw_gbs: 0.67}]
    transport: {found: true, transports: {SHM: 8}, pairs: [{src: 0, dst: 1, transport: SHM, channels: 2}]}
    model: {layers: 78, hidden_size: 6144, model_type: glm_moe_dsa}
holders:
  description: Compute processes that held a GPU, when the module refused to measure.
  returned: failure
  type: list
  elements: dict
"""

import glob
import json
import os
import shutil
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import interconnect as ic
from ansible_collections.moesweep.sweep.plugins.module_utils import nccl_log
from ansible_collections.moesweep.sweep.plugins.module_utils import release as rel


def model_config_path(model_path, home, environ):
    """The config.json of ``model_path``: inside it when it is a directory, else the newest snapshot of the
    Hugging Face hub cache (HF_HUB_CACHE, HF_HOME/hub, HOME/.cache/huggingface/hub; huggingface_hub's constants.py)."""
    if not model_path:
        return None
    if os.path.isdir(model_path):
        path = os.path.join(model_path, "config.json")
        return path if os.path.isfile(path) else None
    caches = [environ.get("HF_HUB_CACHE"),
              os.path.join(environ["HF_HOME"], "hub") if environ.get("HF_HOME") else None,
              os.path.join(home, ".cache", "huggingface", "hub")]
    folder = "models--" + model_path.strip("/").replace("/", "--")
    for cache in [c for c in caches if c]:
        repo = os.path.join(cache, folder)
        ref = os.path.join(repo, "refs", "main")
        if os.path.isfile(ref):
            with open(ref) as fh:
                path = os.path.join(repo, "snapshots", fh.read().strip(), "config.json")
            if os.path.isfile(path):
                return path
        found = sorted(glob.glob(os.path.join(repo, "snapshots", "*", "config.json")), key=os.path.getmtime)
        if found:
            return found[-1]
    return None


def read_model(model_path, home, environ, config=None):
    path = config or model_config_path(model_path, home, environ)
    if not path:
        return None, "no config.json for %r (not a directory, nor in the Hugging Face cache under %s)" % (
            model_path, home)
    try:
        with open(path) as fh:
            dims = ic.model_dims(json.load(fh))
    except (IOError, OSError, ValueError) as exc:
        return None, "%s: %s" % (path, exc)
    dims["config"] = path
    return dims, None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            ngpus=dict(type="int", required=True),
            environment=dict(type="dict", default={}),
            flags=dict(type="dict", default={}),
            nccl_debug=dict(type="bool", default=True),
            python=dict(type="path", default="/opt/moesweep/venvs/sglang/bin/python"),
            program_source=dict(type="str"),
            command=dict(type="list", elements="str", default=[]),
            command_args=dict(type="str", choices=["moesweep", "none"], default="moesweep"),
            min_bytes=dict(type="int", default=ic.DEFAULT_MIN_BYTES),
            max_bytes=dict(type="int", default=ic.DEFAULT_MAX_BYTES),
            timeout=dict(type="float", default=30.0),
            model_path=dict(type="str", default=""),
            model_config=dict(type="path", default=""),
            home=dict(type="path", default="/var/lib/sglang"),
            nvidia_smi_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["ngpus"] < 1:
        module.fail_json(msg="ngpus must be at least 1 (the server's --tp-size), got %d" % p["ngpus"])
    if not 0 < p["min_bytes"] <= p["max_bytes"]:
        module.fail_json(msg="min_bytes must be > 0 and <= max_bytes (got %d, %d)" % (p["min_bytes"], p["max_bytes"]))
    if p["timeout"] <= 0:
        module.fail_json(msg="timeout must be greater than 0 (got %s)" % p["timeout"])
    if not p["command"] and not p["program_source"]:
        module.fail_json(msg="give program_source (the role's files/allreduce_perf.py) or command")
    if not p["command"] and not os.access(p["python"], os.X_OK):
        module.fail_json(msg="%s is not an executable python: install the server venv (the sglang_env role) or set "
                             "python" % p["python"])
    smi = p["nvidia_smi_path"] or module.get_bin_path("nvidia-smi")
    if not smi:
        module.fail_json(msg="no NVIDIA driver found on this host (nvidia-smi not in PATH)")
    try:
        seen = rel.observe(module.run_command, smi)
    except rel.ReleaseError as exc:
        module.fail_json(msg=exc.msg, rc=exc.rc)
    if seen["holders"]:
        who = "; ".join("PID %s (%s) on GPU %s" % (a["pid"], a["process_name"], a["gpu_bus_id"])
                        for a in seen["holders"])
        module.fail_json(msg="not measuring while a compute process holds a GPU (%s): stop the server first "
                             "(the sweep stops it before it measures)" % who, holders=seen["holders"])

    nccl_env = ic.nccl_environment(p["environment"])
    run_env = ic.measurement_environment(nccl_env, p["flags"], debug=p["nccl_debug"])
    env = dict(run_env, PYTHONUNBUFFERED="1", LC_ALL="C")
    # the unit's NCCL environment and nothing else NCCL reads: names this process inherited are unset (env(1) -u)
    inherited = sorted(k for k in os.environ if (k.startswith(ic.ENV_PREFIXES) or k in ic.ENV_NAMES)
                       and k not in run_env)
    budget = max(1.0, p["timeout"] * 0.6)
    tmpdir = tempfile.mkdtemp(prefix="moesweep-allreduce-")
    try:
        if p["command"]:
            argv = list(p["command"])
        else:
            script = os.path.join(tmpdir, "allreduce_perf.py")
            with open(script, "w") as fh:
                fh.write(p["program_source"])
            argv = [p["python"], script]
        if p["command_args"] == "moesweep":
            argv += ["--ngpus", str(p["ngpus"]), "--min-bytes", str(p["min_bytes"]), "--max-bytes",
                     str(p["max_bytes"]), "--time-budget", "%.1f" % budget]
        started = time.time()
        # timeout(1) bounds the program and every process it spawned (its process group is killed with it)
        timeout_bin = module.get_bin_path("timeout")
        run = ([timeout_bin, "-k", "3", "%.0f" % p["timeout"]] + argv) if timeout_bin else argv
        if inherited:
            run = [module.get_bin_path("env", required=True)] + [a for k in inherited for a in ("-u", k)] + run
        rc, out, err = module.run_command(run, environ_update=env, cwd=tmpdir)
        elapsed = round(time.time() - started, 3)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    if rc == 124:
        module.fail_json(msg="the all-reduce measurement did not finish in %.0f s (killed): %s"
                             % (p["timeout"], (err or out).strip()[-500:]), rc=rc, stdout=out, stderr=err,
                         elapsed=elapsed)
    try:
        table = ic.parse_all_reduce_perf(out)
    except ic.InterconnectError as exc:
        module.fail_json(msg="the measuring program (%s) gave no all-reduce table (rc %d): %s; %s"
                             % (" ".join(argv[:2]), rc, exc, (err or "").strip()[-800:]), rc=rc, stdout=out,
                         stderr=err, elapsed=elapsed)
    if rc != 0:
        module.fail_json(msg="the measuring program exited with %d: %s" % (rc, (err or "").strip()[-800:]), rc=rc,
                         stdout=out, stderr=err, elapsed=elapsed)
    own, nccl_lines = ic.split_output(out)
    transport = nccl_log.record(nccl_log.read("\n".join(nccl_lines))) if nccl_lines else {"found": False}
    ranks = table["ranks"] or p["ngpus"]
    model, model_error = read_model(p["model_path"], p["home"], dict(os.environ, **{
        k: v for k, v in (p["environment"] or {}).items() if k in ("HF_HOME", "HF_HUB_CACHE")}), p["model_config"])
    facts = dict(table, ranks=ranks, nccl_environment=nccl_env, key=ic.environment_key(nccl_env, ranks),
                 environment_text=ic.environment_text(nccl_env), elapsed=elapsed, output=own, transport=transport,
                 run_environment=run_env, nccl_lines=len(nccl_lines), model=model,
                 model_error=model_error, measured=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    module.exit_json(changed=False, interconnect=facts, ansible_facts={"moesweep_interconnect": facts})


if __name__ == "__main__":
    main()
