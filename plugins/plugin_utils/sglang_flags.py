# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""SGLang server CLI schema: load, resolve options like argparse, validate a flag dict, render argv.

Controller side. Reads ``data/sglang/flags-<version>.json`` (made by ``scripts/extract_sglang_flags.py`` from the
real sglang wheel's argparse parser). Pure standard library, Python 3.9+.

Flag dicts name options without the leading ``--``, the way a playbook's vars do::

    {"tp-size": 8, "trust-remote-code": True, "moe-runner-backend": "flashinfer_cutlass"}

A boolean value means "pass the flag" (True) or "leave it out" (False); ``None`` always means "leave it out, let
sglang's default stand". A ``boolean_optional`` option (``--x/--no-x``) renders ``--x`` for True and ``--no-x``
for False.

Option resolution follows CPython 3.11's ``argparse.ArgumentParser._parse_optional`` exactly (exact match, then
``--name=value`` split, then every option string starting with the token when ``allow_abbrev``), including the
text of its ambiguity error. ``validate_flags`` accepts what the version's real parser accepts: an abbreviation
that is the prefix of exactly one option (``tp`` for ``--tp-size``; sglang's parsers keep argparse's
``allow_abbrev=True``, recorded in the schema) and refuses an ambiguous one with argparse's message
(``cuda-graph-max-bs`` on 0.5.20+, where ``--cuda-graph-max-bs-decode`` and ``-prefill`` share it).
``canonical_flags`` writes each abbreviation as the option it stands for, so a unit never carries a prefix that
a later version may make ambiguous; ``allow_abbrev=False`` is the strict mode that refuses abbreviations.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

__all__ = [
    "SchemaError",
    "default_data_dir",
    "list_versions",
    "load_schema",
    "resolve_option",
    "validate_flags",
    "render_argv",
    "canonical_flags",
    "FLAG_KINDS",
]

# kinds whose option usually takes no value (the schema's "takes_value", from nargs, has the last word)
FLAG_KINDS = frozenset({
    "store_true", "store_false", "store_const", "append_const", "count", "help", "version",
    "deprecated", "deprecated_error", "deprecated_store_true", "deprecated_store_const", "custom_flag",
})
_NOT_RENDERABLE = frozenset({"help", "version", "deprecated_error"})
_VERSION_RE = re.compile(r"^flags-(.+)\.json$")


class SchemaError(ValueError):
    """An option token argparse would refuse (unknown or ambiguous), with argparse's message."""


def default_data_dir() -> Path:
    """``<repo>/data/sglang``, found from this file (``plugins/module_utils/`` is two levels below the root)."""
    return Path(__file__).resolve().parents[2] / "data" / "sglang"


def _version_key(version: str):
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"[.+-]", version))


def list_versions(data_dir=None) -> list:
    """The sglang versions with a schema file, oldest first."""
    directory = Path(data_dir) if data_dir is not None else default_data_dir()
    found = []
    for path in directory.glob("flags-*.json"):
        match = _VERSION_RE.match(path.name)
        if match:
            found.append(match.group(1))
    return sorted(found, key=_version_key)


_CACHE: dict = {}


def load_schema(version: str, data_dir=None) -> dict:
    """Load ``flags-<version>.json`` and index it.

    The returned dict is the file's content plus ``_options``: option string -> action, in the parser's
    registration order (the order argparse's ambiguity message lists matches in), and ``_data_dir``.
    Raises ``FileNotFoundError`` naming the versions that do exist.
    """
    directory = Path(data_dir) if data_dir is not None else default_data_dir()
    path = directory / "flags-{0}.json".format(version)
    key = str(path.resolve()) if path.exists() else str(path)
    if key in _CACHE:
        return _CACHE[key]
    if not path.is_file():
        raise FileNotFoundError(
            "no SGLang flag schema for version {0!r} in {1} (have: {2})".format(
                version, directory, ", ".join(list_versions(directory)) or "none"))
    with path.open(encoding="utf-8") as fh:
        schema = json.load(fh)
    options = {}
    for action in sorted(schema["actions"], key=lambda a: a["order"]):
        for opt in action["option_strings"]:
            options[opt] = action
    schema["_options"] = options
    schema["_data_dir"] = str(directory)
    _CACHE[key] = schema
    return schema


def _option_tuples(schema: dict, token: str) -> list:
    """argparse 3.11 ``_get_option_tuples``: every (action, option_string, explicit_arg) the token may mean."""
    options = schema["_options"]
    chars = schema.get("prefix_chars", "-")
    result = []
    if token[0] in chars and token[1] in chars:
        if schema.get("allow_abbrev", True):
            prefix, sep, explicit = token.partition("=")
            explicit = explicit if sep else None
            for opt, action in options.items():
                if opt.startswith(prefix):
                    result.append((action, opt, explicit))
    elif token[0] in chars and token[1] not in chars:
        short_prefix, short_explicit = token[:2], token[2:]
        for opt, action in options.items():
            if opt == short_prefix:
                result.append((action, opt, short_explicit))
            elif opt.startswith(token):
                result.append((action, opt, None))
    return result


def resolve_option(schema: dict, token: str):
    """Resolve one command-line token to ``(action, option_string, explicit_arg)`` as sglang's argparse would.

    ``explicit_arg`` is the text after ``=`` (or after a short option's letter), else None. Returns None for a
    token argparse treats as a positional (no leading ``-``, a lone ``-``, a negative number, a space).
    Raises ``SchemaError`` for an ambiguous prefix (argparse's exact message) or an unknown option.
    """
    options = schema["_options"]
    chars = schema.get("prefix_chars", "-")
    if not token or token[0] not in chars:
        return None
    if token in options:
        return options[token], token, None
    if len(token) == 1:
        return None
    if "=" in token:
        opt, explicit = token.split("=", 1)
        if opt in options:
            return options[opt], opt, explicit
    tuples = _option_tuples(schema, token)
    if len(tuples) > 1:
        matches = ", ".join(opt for _action, opt, _explicit in tuples)
        raise SchemaError("ambiguous option: {0} could match {1}".format(token, matches))
    if len(tuples) == 1:
        return tuples[0]
    if re.match(r"^-\d+$|^-\d*\.\d+$", token):
        return None  # sglang registers no negative-number-like options
    if " " in token:
        return None
    raise SchemaError("unrecognized arguments: {0}".format(token))


def _all_long_options(schema: dict) -> list:
    return [opt for opt in schema["_options"] if opt.startswith("--")]


def _other_versions_knowing(schema: dict, option: str) -> list:
    directory = schema.get("_data_dir")
    if not directory:
        return []
    found = []
    for version in list_versions(directory):
        if version == schema.get("sglang_version"):
            continue
        try:
            other = load_schema(version, directory)
        except (OSError, ValueError):
            continue
        if option in other["_options"]:
            found.append(version)
    return found


def _unknown_message(schema: dict, name: str) -> str:
    option = "--" + name
    version = schema.get("sglang_version", "?")
    msg = "unknown option {0} for sglang {1}".format(option, version)
    elsewhere = _other_versions_knowing(schema, option)
    if elsewhere:
        msg += " (it exists in sglang {0})".format(", ".join(elsewhere))
    close = difflib.get_close_matches(option, _all_long_options(schema), n=3, cutoff=0.75)
    if close:
        msg += "; did you mean {0}?".format(" or ".join(close))
    return msg


def _lookup(schema: dict, name, allow_abbrev: bool):
    """Resolve a flag-dict key to (action, option_string) or return an error string."""
    if not isinstance(name, str) or not name:
        return "option names must be non-empty strings, got {0!r}".format(name)
    if name.startswith("-"):
        return "write option {0!r} without leading dashes ({1!r})".format(name, name.lstrip("-"))
    if "=" in name:
        return "option name {0!r} contains '='; give the value as the dict value".format(name)
    option = "--" + name
    options = schema["_options"]
    if option in options:
        return options[option], option
    tuples = _option_tuples(schema, option)
    if len(tuples) > 1:
        matches = ", ".join(opt for _a, opt, _e in tuples)
        return "ambiguous option: {0} could match {1}".format(option, matches)
    if len(tuples) == 1:
        action, full, _explicit = tuples[0]
        if allow_abbrev:
            return action, full
        return ("{0} is only an abbreviation of {1} (sglang {2} accepts it through argparse prefix matching, "
                "which breaks as soon as another option shares the prefix); write {3!r}").format(
                    option, full, schema.get("sglang_version", "?"), full[2:])
    return _unknown_message(schema, name)


def _takes_value(action: dict) -> bool:
    """Whether the option consumes an argument (nargs != 0); e.g. 0.5.23's deprecated --monokernel-backend does."""
    if "takes_value" in action:
        return bool(action["takes_value"])
    return action["kind"] not in FLAG_KINDS


def _label(action: dict) -> str:
    return "argument " + "/".join(action["option_strings"])


# sglang's own argparse type callables that parse JSON text (json.loads, orjson.loads, a JSON object parser)
_JSON_TYPES = frozenset({"json", "json_list_type", "parse_cuda_graph_config_arg"})
_HUMAN_INT_RE = re.compile(r"^\s*[0-9]+(\.[0-9]+)?\s*(k|M|G|T|Ki|Mi|Gi|Ti)?\s*$")


def _to_text(value) -> str:
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return str(value)


def _check_scalar(action: dict, value) -> list:
    """One value for a valued option: type like argparse's ``type=`` callable, then ``choices``."""
    label = _label(action)
    typ = action.get("type")
    if isinstance(value, bool):
        return ["{0}: takes a value, got {1!r}; true/false only fit flags (quote it if you mean the "
                "string {2!r})".format(label, value, str(value).lower())]
    if isinstance(value, (dict, list, tuple)):
        if typ in _JSON_TYPES or (isinstance(value, dict) and typ in ("str", "nullable_str", None)):
            return []  # rendered as compact JSON text (e.g. --json-model-override-args takes a JSON string)
        return ["{0}: expected a single value, got a {1}".format(label, type(value).__name__)]
    if not isinstance(value, (str, int, float)):
        return ["{0}: unsupported value {1!r} ({2})".format(label, value, type(value).__name__)]
    text = _to_text(value)
    converted = text
    try:
        if typ == "int":
            if isinstance(value, float):
                raise ValueError(text)
            converted = int(text)
        elif typ == "float":
            converted = float(text)
        elif typ in _JSON_TYPES:
            converted = json.loads(text)
        elif typ == "human_readable_int" and not _HUMAN_INT_RE.match(text):
            raise ValueError(text)
    except ValueError:
        shown = "loads" if typ == "json" else typ
        return ["{0}: invalid {1} value: {2!r}".format(label, shown, text)]
    choices = action.get("choices")
    if choices is not None and converted not in choices:
        shown = ", ".join(repr(c) for c in choices)
        return ["{0}: invalid choice: {1!r} (choose from {2})".format(label, converted, shown)]
    return []


def _check_value(action: dict, option: str, value) -> list:
    kind = action["kind"]
    label = _label(action)
    if value is None:
        return []
    if kind in _NOT_RENDERABLE:
        return ["{0}: cannot be set in a server flag dict ({1})".format(label, kind)]
    if kind == "count":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return ["{0}: counts take a non-negative int, got {1!r}".format(label, value)]
        return []
    if not _takes_value(action):
        if not isinstance(value, bool):
            return ["{0}: is a flag and takes true/false, got {1!r}".format(label, value)]
        if value is False and kind in ("store_true", "deprecated_store_true") and action.get("default") is True:
            return ["{0}: defaults to true and cannot be turned off from the command line".format(label)]
        return []
    nargs = action.get("nargs")
    if nargs == "?" and value is True:
        return []  # bare option: argparse stores const
    if nargs in ("*", "+") or isinstance(nargs, int) or kind in ("append", "extend"):
        items = value if isinstance(value, (list, tuple)) else [value]
        if nargs == "+" and not items:
            return ["{0}: expected at least one argument".format(label)]
        if isinstance(nargs, int) and len(items) != nargs:
            return ["{0}: expected {1} arguments".format(label, nargs)]
        errors = []
        for item in items:
            errors.extend(_check_scalar(action, item))
        return errors
    if isinstance(value, (list, tuple)) and action.get("type") not in _JSON_TYPES:
        return ["{0}: takes one value, got a list".format(label)]
    return _check_scalar(action, value)


def _abbrev(schema: dict, allow_abbrev) -> bool:
    """None: as the version's real parser (its recorded ``allow_abbrev``, argparse's default True)."""
    return schema.get("allow_abbrev", True) if allow_abbrev is None else bool(allow_abbrev)


def canonical_flags(schema: dict, flags: dict) -> dict:
    """The flag dict with every abbreviation written as the option it stands for (``tp`` -> ``tp-size``), in the
    same order. Names that are exact option strings (an alias stays as written), unknown or ambiguous are kept as
    given (``validate_flags`` reports them), and so are two keys that would become the same name (validate_flags
    reports "set the same option")."""
    if not isinstance(flags, dict):
        return flags
    renamed, owner = {}, {}
    for name in flags:
        found = _lookup(schema, name, True) if isinstance(name, str) and name and not name.startswith("-") else None
        if isinstance(found, tuple) and found[1].startswith("--"):
            renamed[name] = found[1][2:]
            owner.setdefault(found[0]["order"], []).append(name)
    shared = {n for names in owner.values() if len(names) > 1 for n in names}
    return {(renamed[k] if k in renamed and k not in shared else k): v for k, v in flags.items()}


def validate_flags(schema: dict, flags: dict, allow_abbrev=None) -> list:
    """Check a flag dict against the schema; return a list of error strings (empty when it would parse).
    ``allow_abbrev`` None: abbreviations as the version's real parser takes them; False refuses them.

    Unknown names come with close matches and the versions that do know them; values are checked against
    choices and int/float/json types as argparse would; bools must go to flags and flags must get bools. Two
    keys naming the same option (an alias and its primary, or ``x`` and ``no-x``) are refused.
    """
    if not isinstance(flags, dict):
        return ["server flags must be a mapping of option name -> value, got {0}".format(type(flags).__name__)]
    errors = []
    seen = {}
    allow_abbrev = _abbrev(schema, allow_abbrev)
    for name in sorted(flags, key=str):
        found = _lookup(schema, name, allow_abbrev)
        if isinstance(found, str):
            errors.append(found)
            continue
        action, option = found
        ident = action["order"]
        if ident in seen:
            errors.append("{0} and {1} set the same option ({2})".format(
                "--" + seen[ident], "--" + name, "/".join(action["option_strings"])))
            continue
        seen[ident] = name
        errors.extend(_check_value(action, option, flags[name]))
    return errors


def _primary(action: dict) -> str:
    for opt in action["option_strings"]:
        if opt.startswith("--"):
            return opt
    return action["option_strings"][0]


def _value_args(option: str, values: list) -> list:
    if len(values) == 1 and values[0].startswith("-"):
        return ["{0}={1}".format(option, values[0])]  # otherwise argparse reads "-x" as an option
    return [option] + values


def render_argv(schema: dict, flags: dict, allow_abbrev=None) -> list:
    """Render a validated flag dict as argv (without the program), in the order of the dict.

    Uses the option string the key names (an alias is kept as written); an abbreviation (only with
    ``allow_abbrev``) is expanded to the option it stands for, never emitted. Raises ``SchemaError`` with all
    problems when ``validate_flags`` finds any.
    """
    allow_abbrev = _abbrev(schema, allow_abbrev)
    errors = validate_flags(schema, flags, allow_abbrev=allow_abbrev)
    if errors:
        raise SchemaError("; ".join(errors))
    argv = []
    for name, value in flags.items():
        if value is None:
            continue
        action, option = _lookup(schema, name, allow_abbrev)
        kind = action["kind"]
        if kind == "boolean_optional":
            positive = _primary(action)
            negated = "--no-" + positive[2:]
            want_positive = value if option != negated else not value
            argv.append(positive if want_positive else negated)
        elif kind == "count":
            argv.extend([option] * value)
        elif not _takes_value(action):
            if value:
                argv.append(option)
        elif action.get("nargs") == "?" and value is True:
            argv.append(option)
        elif kind in ("append", "extend") and action.get("nargs") in (None, "?"):
            for item in value if isinstance(value, (list, tuple)) else [value]:
                argv.extend(_value_args(option, [_to_text(item)]))
        elif isinstance(value, (list, tuple)) and action.get("type") not in _JSON_TYPES:
            argv.extend([option] + [_to_text(v) for v in value])
        else:
            argv.extend(_value_args(option, [_to_text(value)]))
    return argv
