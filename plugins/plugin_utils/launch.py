# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The SGLang launch of one sweep point, planned once on the controller.

``plan(inputs)`` merges the common flags, the backend's overlay and the extra flags, resolves the
sglang version and the program, validates the flags against the version's real argparse schema
(``sglang_flags``) - the only place a launch is validated - and renders the argv and the unit's
environment. The ``sglang_preflight`` action returns the plan; the unit template renders it.

Secrets never enter the plan: the environment passed in is the public part and secret names are listed. An
API key reaches sglang in a YAML file the unit names with ``--config`` (0600, the service user's; the
``sglang_unit`` module writes it), never on the command line, where every local user could read it
(``/proc/PID/cmdline``). sglang has no environment fallback for ``api_key``; it reads it from ``--api-key`` or from
``--config``: ``prepare_server_args`` runs ``ConfigArgumentMerger`` when the literal word ``--config`` is in argv
(sglang v0.5.9 python/sglang/srt/server_args.py:5583-5589; v0.5.23 server_args.py:683-689), which turns each YAML
key into ``--<key> <value>`` verbatim, ahead of the command line's words, so the command line wins
(v0.5.9 python/sglang/srt/server_args_config_parser.py:67-82 and 140-184; v0.5.23
python/sglang/srt/utils/server_args_config_parser.py:91-106 and 164-210). The key is therefore spelled as the
option is, ``api-key``, and the path is its own argv word after ``--config`` (``--config=PATH`` is not seen).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import shlex

from ansible_collections.moesweep.sweep.plugins.module_utils import secrets
from ansible_collections.moesweep.sweep.plugins.plugin_utils import nodes, sglang_flags

CONFIG_FLAG = "config"
API_KEY_FLAG = "api-key"
# ConfigArgumentMerger._validate_yaml_file refuses any other suffix (v0.5.9 server_args_config_parser.py:131-138)
CONFIG_SUFFIXES = (".yaml", ".yml")
BACKEND_FLAG = "moe-runner-backend"
QUANT_FLAG = "quantization"
DEFAULT_PORT = 30000  # ServerArgs.port (python/sglang/srt/server_args.py)
DEFAULT_HOST = "127.0.0.1"  # ServerArgs.host


class LaunchError(ValueError):
    """A launch that cannot be planned: the message names the problem and the fix."""


def _name(key):
    return str(key)[2:] if str(key).startswith("--") else str(key)


def resolve_version(explicit, provenance):
    """The sglang version: the explicit one, else the one the sglang_env role recorded on the host."""
    if explicit:
        return str(explicit)
    recorded = ((provenance or {}).get("versions") or {}).get("sglang")
    if recorded:
        return str(recorded)
    raise LaunchError(
        "no sglang version for this host: set sglang_server_sglang_version (one of %s), or provision the host "
        "with site.yml, which records it in /etc/moesweep/provenance.json"
        % ", ".join(sglang_flags.list_versions()))


def schema_for(version):
    """The real flag schema of that sglang version, or LaunchError naming the versions moesweep knows."""
    try:
        return sglang_flags.load_schema(version)
    except (OSError, ValueError) as exc:
        raise LaunchError("no flag schema for sglang %s: moesweep knows %s; set sglang_server_sglang_version to one "
                          "of them" % (version, ", ".join(sglang_flags.list_versions()))) from exc


def backend_choices(schema):
    action = schema["_options"].get("--" + BACKEND_FLAG) or {}
    return list(action.get("choices") or [])


def merge_flags(flags, overlays, backend, extra_flags, choices):
    """(effective flags, the point's --moe-runner-backend, notes) for backend ``backend``.

    ``backend`` is an overlay key of ``overlays`` or a --moe-runner-backend choice. The common flags lose
    the overlay's ``remove`` list and gain its ``flags``; ``extra_flags`` go last. A point named after a
    choice must run that choice: variables that say otherwise are refused.
    """
    for label, value in (("flags", flags), ("extra flags", extra_flags), ("backend overlays", overlays)):
        if not isinstance(value, dict):
            raise LaunchError("sglang_server %s must be a mapping, got %s" % (label, type(value).__name__))
    if not isinstance(backend, str) or not backend:
        raise LaunchError("the backend must be one --moe-runner-backend name (a string), got %r; loop over "
                          "sweep points instead" % (backend,))
    overlay = overlays.get(backend)
    if overlay is None and backend not in choices:
        close = sorted(choices, key=lambda c: _distance(c, backend))[:1]
        raise LaunchError(
            "backend %r has no overlay in sglang_server_backends and is not a --moe-runner-backend choice of this "
            "sglang version%s. Overlays: %s; valid choices: %s."
            % (backend, " (did you mean %r?)" % close[0] if close else "", ", ".join(sorted(overlays)) or "none",
               ", ".join(choices)))
    overlay = overlay or {}
    if not isinstance(overlay, dict) or set(overlay) - {"flags", "remove", "environment"}:
        raise LaunchError("overlay %r must be a mapping with 'flags', 'remove' and/or 'environment', got %r"
                          % (backend, overlay))
    remove = {_name(k) for k in overlay.get("remove") or []}
    out = {}
    for key, value in flags.items():
        if _name(key) not in remove:
            out[_name(key)] = value
    for key, value in (overlay.get("flags") or {}).items():
        out[_name(key)] = value
    if BACKEND_FLAG not in out and backend in choices:
        out[BACKEND_FLAG] = backend
    implied = out.get(BACKEND_FLAG)
    for key, value in extra_flags.items():
        out[_name(key)] = value
    effective = out.get(BACKEND_FLAG) or "auto"
    if backend in choices and effective != backend:
        raise LaunchError(
            "sweep point %r would run --moe-runner-backend %s (set by %s): a point named after a backend must run "
            "it. Remove moe-runner-backend from that variable, or name the point %r."
            % (backend, effective, "sglang_server_extra_flags" if implied == backend else "the overlay / flags",
               effective))
    if implied is not None and effective != implied:
        raise LaunchError(
            "sweep point %r: its overlay runs --moe-runner-backend %s but sglang_server_extra_flags sets %s; remove "
            "moe-runner-backend from sglang_server_extra_flags" % (backend, implied, effective))
    return out, effective


def _distance(a, b):
    """Levenshtein distance (for 'did you mean')."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def _systemd_word(word):
    # systemd.service(5) "Command lines": quote words with whitespace or quotes; % and $ are specifiers.
    word = str(word).replace("%", "%%").replace("$", "$$")
    if word == "" or any(c in word for c in " \t\"'\\;"):
        return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return word


def systemd_exec_lines(argv):
    """Group argv into ExecStart lines: the program words first, then one flag (with its values) per line."""
    lines, current = [], []
    for word in argv:
        if str(word).startswith("--") and current:
            lines.append(" ".join(current))
            current = []
        current.append(_systemd_word(word))
    if current:
        lines.append(" ".join(current))
    return lines


def shell_join(argv):
    """The command line exactly as a human would type it in a shell."""
    return " ".join(shlex.quote(str(w)) for w in argv)


def version_flags(by_version, version):
    """The flags of one sglang version (``sglang_server_version_flags``): merged over the common flags, before the
    backend's overlay, so one role default can launch every pinned version (0.5.23 renamed --nsa-*-backend to
    --dsa-*-backend and split --cuda-graph-max-bs, which its parser refuses as an ambiguous prefix)."""
    if by_version in (None, ""):
        return {}
    if not isinstance(by_version, dict):
        raise LaunchError("sglang_server_version_flags must map an sglang version to a flag mapping, got %s"
                          % type(by_version).__name__)
    known = sglang_flags.list_versions()
    stray = sorted(str(v) for v in by_version if str(v) not in known)
    if stray:
        raise LaunchError("sglang_server_version_flags names sglang %s, which moesweep has no flag schema for (it "
                          "knows %s); quote the version (\"0.5.9\"), or drop that entry"
                          % (", ".join(stray), ", ".join(known)))
    chosen = {str(k): v for k, v in by_version.items()}.get(str(version)) or {}
    if not isinstance(chosen, dict):
        raise LaunchError("sglang_server_version_flags[%r] must be a flag mapping, got %s"
                          % (str(version), type(chosen).__name__))
    return chosen


def overlay_environment(env, overlay):
    """The unit's environment with a point's overlay ``environment`` over it (a launch matrix's env:NAME axes): a
    value sets the variable, null unsets it. Secret-looking names are refused (the overlay is shown and recorded)."""
    extra = (overlay or {}).get("environment") if isinstance(overlay, dict) else None
    if extra in (None, {}):
        return env
    if not isinstance(extra, dict):
        raise LaunchError("an overlay's environment must map a variable name to its value, got %r" % (extra,))
    out = dict(env)
    for key, value in extra.items():
        if secrets.is_secret_name(key):
            raise LaunchError("an overlay sets %s, which looks like a secret: overlays are shown and recorded; put it "
                              "in sglang_server_environment from a vault" % key)
        if value is None:
            out.pop(str(key), None)
        else:
            out[str(key)] = str(value)
    return out


def _canonical(schema, flags):
    """A flag dict with each abbreviation written as the option it stands for (sglang_flags.canonical_flags): the
    unit carries ``--tp-size`` for ``tp``, and a later sglang that adds another ``--tp...`` option cannot make the
    recorded launch ambiguous. Anything not a mapping is left for merge_flags to refuse."""
    if not isinstance(flags, dict):
        return flags
    return sglang_flags.canonical_flags(schema, {_name(k): v for k, v in flags.items()})


def _canonical_overlays(schema, overlays):
    if not isinstance(overlays, dict):
        return overlays
    out = {}
    for key, overlay in overlays.items():
        if isinstance(overlay, dict):
            overlay = dict(overlay)
            if isinstance(overlay.get("flags"), dict):
                overlay["flags"] = _canonical(schema, overlay["flags"])
            if isinstance(overlay.get("remove"), list):
                overlay["remove"] = list(_canonical(schema, {_name(k): None for k in overlay["remove"]}))
        out[key] = overlay
    return out


def refuse_reserved(flags):
    """Refuse the flags moesweep sets itself: ``api-key`` (flags are shown and recorded) and ``config`` (sglang
    takes one --config file, and moesweep's carries the API key: a second one fails the launch with "Multiple
    config files specified! Only one allowed.", v0.5.9 server_args_config_parser.py:86-89; and options read from a
    file would escape the preflight's check against the flag schema and the record)."""
    names = {_name(k) for k in flags}
    if API_KEY_FLAG in names:
        raise LaunchError("put the API key in sglang_server_api_key (vault it), not in the launch flags: flags are "
                          "shown and recorded, the key must stay in the unit's 0600 --config file")
    if CONFIG_FLAG in names:
        raise LaunchError("the launch flags set --config, which moesweep passes itself (the 0600 file with the API "
                          "key; sglang takes only one): write that file's options as flags in sglang_server_flags or "
                          "sglang_server_extra_flags instead (each is checked against the flag schema and "
                          "recorded), and the key in sglang_server_api_key")


def secret_config_path(inputs):
    """The path of the unit's --config file when the server gets an API key, else None."""
    if not inputs.get("api_key_set"):
        return None
    path = str(inputs.get("secret_config_path") or "")
    if not path.startswith("/") or not path.endswith(CONFIG_SUFFIXES):
        raise LaunchError("a server with an API key needs secret_config_path, the absolute path of its 0600 --config "
                          "file ending in .yaml or .yml (sglang refuses any other suffix), got %r" % path)
    return path


def plan(inputs):
    """Plan one launch. ``inputs``: backend, flags, version_flags, backends, extra_flags, quantization,
    sglang_version, provenance, command, venv, environment (public), secret_environment_keys, api_key_set,
    secret_config_path (the unit's --config file, which carries the API key; required with api_key_set), home,
    cuda_home, and ``nodes``: this rank's node plan (``nodes.plan_nodes``) when the server spreads over a node group.

    Returns {sglang_version, backend, point, flags, flag_errors, argv, server_argv, command_line, exec_lines, port,
    host, environment, secret_environment_keys, launch_hash, nodes}. ``flag_errors`` are the schema's findings (the
    caller turns them into the refusal); anything else wrong raises LaunchError.
    """
    provenance = inputs.get("provenance") or {}
    version = resolve_version(inputs.get("sglang_version"), provenance)
    schema = schema_for(version)
    flags = _canonical(schema, dict(inputs.get("flags") or {}))
    flags.update(_canonical(schema, version_flags(inputs.get("version_flags"), version)))
    quant = inputs.get("quantization")
    if quant is not None:
        given = flags.get(QUANT_FLAG)
        if given is not None and str(given) != str(quant):
            raise LaunchError("quantization %r contradicts the flags' quantization %r" % (quant, given))
        flags[QUANT_FLAG] = quant
    extra_flags = _canonical(schema, inputs.get("extra_flags") or {})
    # only the point's own overlay is read (merge_flags names the others in a refusal): a launch matrix's thousand
    # cells are not canonicalized again for every cell
    overlays = inputs.get("backends") or {}
    if isinstance(overlays, dict) and isinstance(inputs.get("backend"), str) and inputs["backend"] in overlays:
        chosen = _canonical_overlays(schema, {inputs["backend"]: overlays[inputs["backend"]]})
        overlays = dict(dict.fromkeys(overlays, {}), **chosen)
    else:
        overlays = _canonical_overlays(schema, overlays)
    merged, backend = merge_flags(flags, overlays, inputs.get("backend"), extra_flags, backend_choices(schema))
    refuse_reserved(merged)
    config_path = secret_config_path(inputs)
    node_plan = inputs.get("nodes") or None
    if node_plan:
        try:
            merged = nodes.node_flags(node_plan, merged)
        except nodes.NodeError as exc:
            raise LaunchError(str(exc)) from exc
    errors = list(sglang_flags.validate_flags(schema, merged))
    command = list(inputs.get("command") or [])
    if not command:
        venv = inputs.get("venv")
        python = str(venv).rstrip("/") + "/bin/python" if venv else "python3"
        command = [python, "-m", "sglang.launch_server"]
    argv = command + (list(sglang_flags.render_argv(schema, merged)) if not errors else [])
    if config_path and not errors:
        argv += ["--" + CONFIG_FLAG, config_path]  # two words: ConfigArgumentMerger looks for "--config" itself
    env = {}
    for key, value in (inputs.get("environment") or {}).items():
        env[str(key)] = "" if value is None else str(value)
    env = overlay_environment(env, (inputs.get("backends") or {}).get(inputs.get("backend")))
    home = inputs.get("home")
    if home:
        # flashinfer / triton / sglang JIT caches under a writable HOME that persists across restarts
        # (flashinfer jit/env.py FLASHINFER_WORKSPACE_BASE; sglang environ.py SGLANG_CACHE_DIR from 0.5.18).
        env.setdefault("HOME", str(home))
        env.setdefault("SGLANG_CACHE_DIR", str(home).rstrip("/") + "/.cache/sglang")
        env.setdefault("FLASHINFER_WORKSPACE_BASE", str(home))
    if inputs.get("api_key_set") and inputs.get("log_filter_dir"):
        # sglang logs its ServerArgs, the key included: the filter there redacts it in every interpreter of the
        # server (roles/sglang_server/files/log_filter/sitecustomize.py); a PYTHONPATH already given comes after it
        given = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(inputs["log_filter_dir"]) + (":" + given if given else "")
    cuda_home = inputs.get("cuda_home") or provenance.get("cuda_home") or "/usr/local/cuda"
    env.setdefault("CUDA_HOME", str(cuda_home))
    secret_keys = sorted(set(inputs.get("secret_environment_keys") or []))
    for key in secret_keys:
        env.pop(key, None)
    host = str(merged.get("host") or DEFAULT_HOST)
    try:
        port = int(merged.get("port") or DEFAULT_PORT)
    except (TypeError, ValueError):
        port = DEFAULT_PORT  # the schema check above already reports a bad --port
    identity = {"argv": argv, "environment": env, "secret_environment_keys": secret_keys}
    launch_hash = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    return {
        "sglang_version": version,
        "backend": backend,
        "point": inputs.get("backend"),
        "flags": merged,
        "flag_errors": errors,
        "argv": argv,
        # the words sglang's parser reads (after the program), as the unit passes them: the dry run's input
        "server_argv": argv[len(command):],
        "command_line": shell_join(argv),
        "exec_lines": systemd_exec_lines(argv),
        "port": port,
        "host": host,
        "environment": env,
        "secret_environment_keys": secret_keys,
        "launch_hash": launch_hash,
        "nodes": node_plan or {},
    }
