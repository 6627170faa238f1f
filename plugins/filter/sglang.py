# Copyright: moesweep developers
# Apache License 2.0
"""Filters that turn a flags dict into the exact SGLang command line, validated against the real
flag schema of the pinned sglang version (``data/sglang/flags-<version>.json``)."""

import shlex

from ansible.errors import AnsibleFilterError
from ansible_collections.moesweep.sweep.plugins.plugin_utils import sglang_flags


def _schema(version):
    try:
        return sglang_flags.load_schema(str(version))
    except (OSError, ValueError, KeyError) as exc:
        raise AnsibleFilterError(
            "no flag schema for sglang %s (%s); known versions: %s"
            % (version, exc, ", ".join(sglang_flags.list_versions()))
        ) from exc


def sglang_flag_errors(flags, version):
    """List of human-readable problems with ``flags`` for that sglang version ([] when valid)."""
    if not isinstance(flags, dict):
        return ["sglang flags must be a mapping of flag name to value, got %s" % type(flags).__name__]
    return list(sglang_flags.validate_flags(_schema(version), flags))


def sglang_argv(flags, version):
    """The argv (canonical long options, never abbreviations) for ``flags``; fails on invalid flags."""
    errors = sglang_flag_errors(flags, version)
    if errors:
        raise AnsibleFilterError("invalid sglang %s flags: %s" % (version, "; ".join(errors)))
    return list(sglang_flags.render_argv(_schema(version), flags))


def sglang_choices(option, version):
    """The valid choices of one valued option (e.g. ``moe-runner-backend``) in that version."""
    name = option if option.startswith("--") else "--" + option
    action = _schema(version)["_options"].get(name)
    if action is None:
        raise AnsibleFilterError("sglang %s has no option %s" % (version, name))
    return list(action.get("choices") or [])


def _systemd_word(word):
    # systemd.service(5) "Command lines": quote words with whitespace or quotes; % and $ are specifiers.
    word = str(word).replace("%", "%%").replace("$", "$$")
    if word == "" or any(c in word for c in " \t\"'\\;"):
        return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return word


def systemd_exec_lines(argv):
    """Group argv into lines for ExecStart: the program words first, then one flag (with its values) per line."""
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
    return shlex.join([str(a) for a in argv])


class FilterModule:
    def filters(self):
        return {
            "sglang_flag_errors": sglang_flag_errors,
            "sglang_argv": sglang_argv,
            "sglang_choices": sglang_choices,
            "systemd_exec_lines": systemd_exec_lines,
            "shell_join": shell_join,
        }
