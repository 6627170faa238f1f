"""sglang's ``--config FILE``: the YAML file's keys become options placed before the command line's words.

Written from sglang's own code, separately from moesweep's plugins (which write the file):
``prepare_server_args`` runs the merge only when the word ``--config`` itself is in argv
(v0.5.9 python/sglang/srt/server_args.py:5583-5589, v0.5.23 server_args.py:683-689), then argparse parses the
result, so an option given both ways takes the command line's value (argparse keeps the last).
``ConfigArgumentMerger`` (v0.5.9 python/sglang/srt/server_args_config_parser.py, v0.5.23
python/sglang/srt/utils/server_args_config_parser.py; https://github.com/sgl-project/sglang):

* exactly one ``--config`` followed by a path, else ValueError (S9 84-98, S23 108-122);
* the path must end in .yaml / .yml, then exist (S9 131-138, S23 155-162); it is read with ``yaml.safe_load``
  (a failure is logged as "Failed to read config file ...", then raised: S9 115-120, S23 139-144); an empty file is
  {}, anything but a mapping a ValueError (S9 122-127, S23 146-151);
* each key is written back verbatim as ``--<key>`` (so ``api-key``, not ``api_key``, names ``--api-key``), its
  underscore spelling looked up among the parser's actions: a bool is the bare flag (true) or nothing (false) for a
  store_true action, else ``--key true|false``; a list is ``--key item...`` (nothing when empty); 0.5.23 writes a
  mapping as JSON; anything else is ``str(value)`` (S9 140-184, S23 164-210);
* a key of an action that is neither store_true nor a plain store (S9 33-42), or that does not take one value
  (S23 49-66, which also knows a key by any long spelling of the flag), is refused;
* the result is ``config args + the words before --config + the words after its path`` (S9 74-82, S23 98-106).

The simulated host's python3 has no PyYAML (the image's packages, src/moesweep/sim/image.py): without it a minimal
reader takes the YAML such files hold - a flat mapping of scalars and lists, with PyYAML's YAML 1.1 scalar types -
and refuses anything else by line, rather than reading it differently.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import PurePath

CONFIG_FLAG = "--config"


class ConfigError(Exception):
    """The exception sglang raises, with the frames its traceback shows (innermost last)."""

    def __init__(self, message: str, frames: list, exc_type: str = "ValueError", logged: str | None = None):
        super().__init__(message)
        self.message = message
        self.frames = frames
        self.exc_type = exc_type
        self.logged = logged


# (path in site-packages, {raise site: (line, function, code)}) per version; the call sites lead to them
_SITES = {
    "0.5.9": ("sglang/srt/server_args_config_parser.py", {
        "extract": (67, "merge_config_with_args", "config_file_path = self._extract_config_file_path(cli_args)"),
        "parse": (71, "merge_config_with_args", "config_data = self._parse_yaml_config(config_file_path)"),
        "convert": (72, "merge_config_with_args", "config_args = self._convert_config_to_args(config_data)"),
        "multiple": (89, "_extract_config_file_path",
                     'raise ValueError("Multiple config files specified! Only one allowed.")'),
        "no_file": (96, "_extract_config_file_path",
                    'raise ValueError("No config file specified after --config flag!")'),
        "validate": (113, "_parse_yaml_config", "self._validate_yaml_file(file_path)"),
        "open": (116, "_parse_yaml_config", 'with open(file_path, "r") as file:'),
        "load": (117, "_parse_yaml_config", "config_data = yaml.safe_load(file)"),
        "not_dict": (127, "_parse_yaml_config",
                     'raise ValueError("Config file must contain a dictionary at root level")'),
        "suffix": (135, "_validate_yaml_file",
                   'raise ValueError(f"Config file must be YAML format, got: {path.suffix}")'),
        "missing": (138, "_validate_yaml_file", 'raise ValueError(f"Config file not found: {file_path}")'),
        "unsupported": (149, "_convert_config_to_args", "raise ValueError(msg)"),
    }),
    "0.5.23": ("sglang/srt/utils/server_args_config_parser.py", {
        "extract": (91, "merge_config_with_args", "config_file_path = self._extract_config_file_path(cli_args)"),
        "parse": (95, "merge_config_with_args", "config_data = self._parse_yaml_config(config_file_path)"),
        "convert": (96, "merge_config_with_args", "config_args = self._convert_config_to_args(config_data)"),
        "multiple": (113, "_extract_config_file_path",
                     'raise ValueError("Multiple config files specified! Only one allowed.")'),
        "no_file": (120, "_extract_config_file_path",
                    'raise ValueError("No config file specified after --config flag!")'),
        "validate": (137, "_parse_yaml_config", "self._validate_yaml_file(file_path)"),
        "open": (140, "_parse_yaml_config", 'with open(file_path, "r") as file:'),
        "load": (141, "_parse_yaml_config", "config_data = yaml.safe_load(file)"),
        "not_dict": (151, "_parse_yaml_config",
                     'raise ValueError("Config file must contain a dictionary at root level")'),
        "suffix": (159, "_validate_yaml_file",
                   'raise ValueError(f"Config file must be YAML format, got: {path.suffix}")'),
        "missing": (162, "_validate_yaml_file", 'raise ValueError(f"Config file not found: {file_path}")'),
        "unsupported": (173, "_convert_config_to_args", "raise ValueError(msg)"),
    }),
}
# launch_server.py's call and prepare_server_args' call of the merger
_OUTER = {
    "0.5.9": [("sglang/launch_server.py", 32, "<module>", "server_args = prepare_server_args(sys.argv[1:])"),
              ("sglang/srt/server_args.py", 5589, "prepare_server_args",
               "argv = config_merger.merge_config_with_args(argv)")],
    "0.5.23": [("sglang/launch_server.py", 81, "<module>", "server_args = prepare_server_args(sys.argv[1:])"),
               ("sglang/srt/server_args.py", 689, "prepare_server_args",
                "argv = config_merger.merge_config_with_args(argv)")],
}


def _frames(version: str, *sites: str) -> list:
    path, table = _SITES.get(version, _SITES["0.5.23"])
    outer = _OUTER.get(version, _OUTER["0.5.23"])
    return list(outer) + [(path,) + table[s] for s in sites]


# ------------------------------------------------------------------------------------------- the actions
def _long_keys(action: dict) -> set:
    return {action["dest"]} | {o[2:].replace("-", "_") for o in action["option_strings"] if o.startswith("--")}


def action_tables(version: str, spec: dict) -> tuple[set, dict]:
    """(keys of store_true actions, key -> action class name of the actions a config file may not set)."""
    actions = [a for a in spec["actions"] if a["option_strings"]]
    store_true = [a for a in actions if a.get("action_class") == "_StoreTrueAction"]
    excluded = ("--config", "--help", "-h")
    if version == "0.5.9":
        unsupported = {a["dest"]: a.get("action_class") for a in actions
                       if a.get("action_class") not in ("_StoreTrueAction", "_StoreAction")
                       and not any(o in a["option_strings"] for o in excluded)}
        return {a["dest"] for a in store_true}, unsupported
    supported = [a for a in actions if a.get("action_class") in ("_StoreTrueAction", "_StoreAction")
                 or a.get("nargs") is None]
    supported_keys = {k for a in supported for k in _long_keys(a)}
    unsupported = {}
    for a in actions:
        if a in supported or any(o in a["option_strings"] for o in excluded):
            continue
        for key in _long_keys(a):
            if key not in supported_keys:
                unsupported[key] = a.get("action_class")
    return {k for a in store_true for k in _long_keys(a)}, unsupported


def config_to_args(version: str, spec: dict, config: dict) -> list:
    store_true, unsupported = action_tables(version, spec)
    args = []
    for key, value in config.items():
        key_norm = key.replace("-", "_")
        if key_norm in unsupported:
            raise ConfigError(f"Unsupported config option '{key_norm}' with action '{unsupported[key_norm]}'",
                              _frames(version, "convert", "unsupported"))
        if isinstance(value, bool):
            if key_norm in store_true:
                if value:
                    args.append(f"--{key}")
            else:
                args.extend([f"--{key}", str(value).lower()])
        elif isinstance(value, list):
            if value:
                args.append(f"--{key}")
                args.extend(str(item) for item in value)
        elif isinstance(value, dict) and version != "0.5.9":
            args.extend([f"--{key}", json.dumps(value)])
        else:
            args.extend([f"--{key}", str(value)])
    return args


def merge(version: str, spec: dict, argv: list) -> list:
    """argv with its --config FILE replaced by the file's options in front, as prepare_server_args hands it to
    argparse; argv itself when it has no --config word. Raises ConfigError where sglang raises."""
    if CONFIG_FLAG not in argv:
        return list(argv)
    where = [i for i, word in enumerate(argv) if word == CONFIG_FLAG]
    if len(where) > 1:
        raise ConfigError("Multiple config files specified! Only one allowed.", _frames(version, "extract", "multiple"))
    if where[0] == len(argv) - 1:
        raise ConfigError("No config file specified after --config flag!", _frames(version, "extract", "no_file"))
    path = argv[where[0] + 1]
    suffix = PurePath(path).suffix
    if suffix.lower() not in (".yaml", ".yml"):
        raise ConfigError(f"Config file must be YAML format, got: {suffix}",
                          _frames(version, "parse", "validate", "suffix"))
    if not os.path.exists(path):
        raise ConfigError(f"Config file not found: {path}", _frames(version, "parse", "validate", "missing"))
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError as exc:
        raise ConfigError(str(exc), _frames(version, "parse", "open"), type(exc).__name__,
                          logged=f"Failed to read config file {path}: {exc}") from None
    try:
        data = load_yaml(text)
    except ConfigError as exc:
        exc.frames = _frames(version, "parse", "load")
        exc.logged = f"Failed to read config file {path}: {exc.message}"
        raise
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("Config file must contain a dictionary at root level",
                          _frames(version, "parse", "not_dict"))
    return config_to_args(version, spec, data) + argv[:where[0]] + argv[where[0] + 2:]


def traceback_text(exc: ConfigError, site: str) -> str:
    """The traceback python prints for the exception (the logged line, when sglang logs one, before it)."""
    out = [exc.logged + "\n"] if exc.logged else []
    out.append("Traceback (most recent call last):\n"
               '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
               '  File "<frozen runpy>", line 88, in _run_code\n')
    for path, line, func, code in exc.frames:
        out.append(f'  File "{site}/{path}", line {line}, in {func}\n    {code}\n')
    out.append(f"{exc.exc_type}: {exc.message}\n")
    return "".join(out)


# ----------------------------------------------------------------------------------------- the YAML
def load_yaml(text: str):
    """``yaml.safe_load(text)``, with PyYAML when the interpreter has it, else the minimal reader below."""
    try:
        import yaml
    except ImportError:
        return load_minimal(text)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(str(exc), [], type(exc).__module__ + "." + type(exc).__name__) from None


# PyYAML's YAML 1.1 implicit types (its resolver.py): what a plain scalar becomes
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = {"yes": True, "Yes": True, "YES": True, "true": True, "True": True, "TRUE": True, "on": True, "On": True,
         "ON": True, "no": False, "No": False, "NO": False, "false": False, "False": False, "FALSE": False,
         "off": False, "Off": False, "OFF": False}
_INT = re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$")
_FLOAT = re.compile(r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
                    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
# sexagesimal numbers and timestamps: PyYAML makes ints, floats and dates of them; the minimal reader refuses them
_OTHER = re.compile(r"^(?:[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}.*|<<|=)$")
_ESCAPES = {"0": "\0", "a": "\x07", "b": "\x08", "t": "\t", "\t": "\t", "n": "\n", "v": "\x0b", "f": "\x0c",
            "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85", "_": "\xa0",
            "L": "\u2028", "P": "\u2029"}
_HEX = {"x": 2, "u": 4, "U": 8}


class _Refused(Exception):
    pass


def _plain(word: str):
    if _NULL.match(word):
        return None
    if word in _BOOL:
        return _BOOL[word]
    if _INT.match(word):
        digits = word.replace("_", "")
        sign = -1 if digits.startswith("-") else 1
        digits = digits.lstrip("+-")
        if digits.startswith("0b"):
            return sign * int(digits[2:], 2)
        if digits.startswith("0x"):
            return sign * int(digits[2:], 16)
        if digits != "0" and digits.startswith("0"):
            return sign * int(digits, 8)
        return sign * int(digits)
    if _FLOAT.match(word):
        digits = word.replace("_", "").lower()
        if digits.endswith("inf"):
            return float("-inf") if digits.startswith("-") else float("inf")
        if digits.endswith("nan"):
            return float("nan")
        return float(digits)
    if _OTHER.match(word):
        raise _Refused(f"{word!r} (PyYAML reads it as a number, date or merge key): quote it")
    if word[:1] in "&*!|>%@`{" or word.startswith(("- ", "? ")):
        raise _Refused(f"{word!r} (anchors, aliases, tags, block scalars and flow mappings are not read)")
    return word


def _double(text: str, i: int):
    """(the double-quoted scalar starting at text[i] == '"', the index after its closing quote)."""
    out, i = [], i + 1
    while i < len(text):
        c = text[i]
        if c == '"':
            return "".join(out), i + 1
        if c == "\\":
            e = text[i + 1:i + 2]
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
                i += 2
            elif e in _HEX:
                n = _HEX[e]
                code = text[i + 2:i + 2 + n]
                if len(code) != n or not all(ch in "0123456789abcdefABCDEF" for ch in code):
                    raise _Refused(f"a bad escape \\{e}{code}")
                out.append(chr(int(code, 16)))
                i += 2 + n
            else:
                raise _Refused(f"an unknown escape \\{e}")
        else:
            out.append(c)
            i += 1
    raise _Refused("a double-quoted scalar that does not end on its line")


def _single(text: str, i: int):
    out, i = [], i + 1
    while i < len(text):
        if text[i] == "'":
            if text[i + 1:i + 2] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out), i + 1
        out.append(text[i])
        i += 1
    raise _Refused("a single-quoted scalar that does not end on its line")


def _rest_is_comment(text: str, i: int) -> bool:
    rest = text[i:]
    return not rest.strip() or rest.lstrip().startswith("#") and rest[:1] in (" ", "\t")


def _scalar(text: str):
    """A value on one line: quoted, or plain up to a comment (' #')."""
    text = text.strip()
    if text[:1] in ('"', "'"):
        value, end = (_double if text[0] == '"' else _single)(text, 0)
        if not _rest_is_comment(text, end):
            raise _Refused("text after a quoted scalar")
        return value
    plain = re.split(r"[ \t]#", text, maxsplit=1)[0].rstrip()
    if plain.startswith("#"):
        plain = ""
    if re.search(r":(?:[ \t]|$)", plain):
        raise _Refused("': ' inside a plain scalar (PyYAML refuses a mapping there)")
    return _plain(plain)


def _flow_list(text: str) -> list:
    body = re.split(r"\][ \t]*(?:#.*)?$", text.strip()[1:], maxsplit=1)
    if len(body) != 2 or body[1]:
        raise _Refused("a flow sequence that does not end on its line")
    inner = body[0].strip()
    if not inner:
        return []
    if any(c in inner for c in "[]{}\"'"):
        raise _Refused("nested or quoted items in a flow sequence")
    return [_plain(item.strip()) for item in inner.split(",") if item.strip()]


def _key(line: str):
    """(key, the rest after ':'), or None when the line is not 'key: ...'."""
    if line[:1] in ('"', "'"):
        key, end = (_double if line[0] == '"' else _single)(line, 0)
        rest = line[end:]
        if not rest.startswith(":"):
            return None
        return key, rest[1:]
    m = re.match(r"^([^#:\s][^:]*?|[^#\s][^\s]*?):(?:[ \t]+|$)(.*)$", line)
    if not m:
        return None
    key = _plain(m.group(1).strip())
    return key, m.group(2)


def load_minimal(text: str):
    """A flat YAML mapping of scalars and lists, typed as PyYAML's safe_load types them; anything else is refused
    naming its line (ConfigError)."""
    lines = text.splitlines()
    data: dict = {}
    seen_content = False
    current = None  # the key whose block sequence the next "- item" lines fill
    for number, raw in enumerate(lines, 1):
        try:
            line = raw.rstrip()
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            if stripped in ("---", "...") and line == stripped:
                if seen_content and stripped == "---":
                    raise _Refused("a second document")
                continue
            if "\t" in line[:len(line) - len(line.lstrip())]:
                raise _Refused("a tab in the indentation")
            indent = len(line) - len(line.lstrip())
            if stripped.startswith("- ") or stripped == "-":
                if current is None:
                    if not seen_content:
                        return [stripped]  # a document that is a list: sglang refuses it as not a mapping
                    raise _Refused("a sequence item outside a key's list")
                item = stripped[1:].strip()
                if item.startswith(("[", "- ")) or (_key(item) is not None and item[:1] not in ('"', "'")):
                    raise _Refused("nested collections")
                data[current].append(_scalar(item) if item else None)
                continue
            if indent:
                raise _Refused("an indented line (nested mappings and multi-line scalars are not read)")
            found = _key(line)
            if found is None:
                if not seen_content:
                    # a document that is one scalar: sglang refuses it as not a mapping
                    return _scalar(line) if not line.startswith("[") else _flow_list(line)
                raise _Refused("a line that is not 'key: value'")
            seen_content = True
            key, rest = found
            if not isinstance(key, str):
                raise _Refused("a key that is not a string")
            if current is not None and data[current] == []:
                data[current] = None  # "key:" with nothing under it is null
            current = None
            value = rest.strip()
            if not value or value.startswith("#"):
                data[key] = []
                current = key
            elif value.startswith("["):
                data[key] = _flow_list(value)
            else:
                data[key] = _scalar(value)
        except _Refused as exc:
            raise ConfigError(f"line {number}: {exc} - the simulator's minimal YAML reader (no PyYAML on this host) "
                              "does not read it", [], "ValueError") from None
    if current is not None and data[current] == []:
        data[current] = None
    return data if seen_content else None
