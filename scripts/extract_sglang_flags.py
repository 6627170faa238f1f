#!/usr/bin/env python3
"""Extract SGLang's real server CLI flag schema from the published sglang wheels.

Regenerate the committed data (no make needed), from the repository root:

    python3.11 scripts/extract_sglang_flags.py                     # 0.5.9 and 0.5.23
    python3.11 scripts/extract_sglang_flags.py 0.5.9 0.5.18        # other versions
    python3.11 scripts/extract_sglang_flags.py --out-dir /tmp/x    # somewhere else

Use CPython 3.11: the parser's error texts and the default ``prog`` are those of the interpreter that builds
it, and 3.11 is what sglang's wheels and the target hosts (Debian 12) run.

What it does, per version V:

1. ``pip download --no-deps sglang==V -d ~/.cache/moesweep/wheels`` (skipped when the wheel is cached).
2. Unpacks the wheel to a temporary directory and installs the few dependencies that the parser construction
   really needs (``msgspec``, whose Struct semantics 0.5.23's field records are built on) with
   ``pip install --target ~/.cache/moesweep/sglang-deps/<V>``.
3. In a child interpreter started with ``-I -S`` (no site-packages, no PYTHON* environment, so nothing
   installed on this machine leaks in), every import that is neither the standard library, the wheel, nor
   those dependencies is answered by a permissive stub module (torch, triton, transformers, ...).
4. Calls the wheel's own ``sglang.srt.server_args.prepare_server_args([])`` with
   ``argparse.ArgumentParser.parse_args`` intercepted, which hands back the exact parser object that
   ``python -m sglang.launch_server`` parses ``sys.argv`` with, and dumps every action of it.
5. Runs a few probe command lines through that real parser (``--tp 8``, an ambiguous prefix, an invalid choice,
   ...) and records exit codes and the exact stderr text, so the argparse behaviour is evidence, not memory.

If the real parser cannot be built, it falls back to reading ``add_argument`` calls from
``sglang/srt/server_args.py`` with ``ast`` and records ``"extraction_method": "ast"``.

Output: ``data/sglang/flags-<V>.json``. Standard library only; pip runs as a subprocess.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

DEFAULT_VERSIONS = ["0.5.9", "0.5.23"]
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT_DIR = REPO_ROOT / "data" / "sglang"
CACHE_DIR = Path(os.environ.get("MOESWEEP_CACHE_DIR", Path.home() / ".cache" / "moesweep"))
WHEEL_DIR = CACHE_DIR / "wheels"
DEPS_DIR = CACHE_DIR / "sglang-deps"
SCHEMA_VERSION = 1
HELP_CHARS = 300
USAGE_COLUMNS = 80  # argparse wraps at COLUMNS-2; under systemd there is no tty, so COLUMNS or 80 decides

# Packages imported for real (pip --target): the parser construction depends on their behaviour (msgspec
# Structs carry 0.5.23's field records; packaging compares the version strings that import-time gates test).
REAL_DEPS = ["msgspec", "packaging"]

# Probe command lines run through the real parser (--model-path is required by both versions).
PROBES = [
    ("tp_abbrev", ["--model-path", "m", "--tp", "8"]),
    ("tp_size", ["--model-path", "m", "--tp-size", "8"]),
    ("tp_abbrev_equals", ["--model-path", "m", "--tp=8"]),
    ("cuda_graph_max_bs", ["--model-path", "m", "--cuda-graph-max-bs", "64"]),
    ("nsa_backends", ["--model-path", "m", "--nsa-decode-backend", "trtllm", "--nsa-prefill-backend", "trtllm"]),
    ("dsa_backends", ["--model-path", "m", "--dsa-decode-backend", "trtllm", "--dsa-prefill-backend", "trtllm"]),
    ("moe_runner_cutedsl", ["--model-path", "m", "--moe-runner-backend", "flashinfer_cutedsl"]),
    ("invalid_choice", ["--model-path", "m", "--moe-runner-backend", "bogus"]),
    ("invalid_int", ["--model-path", "m", "--tp-size", "eight"]),
    ("invalid_float", ["--model-path", "m", "--mem-fraction-static", "lots"]),
    ("missing_value", ["--model-path", "m", "--tp-size"]),
    ("unknown_option", ["--model-path", "m", "--no-such-flag", "1"]),
    ("bool_with_value", ["--model-path", "m", "--trust-remote-code=yes"]),
    ("bool_flag", ["--model-path", "m", "--trust-remote-code"]),
    ("no_args", []),
]


# --------------------------------------------------------------------------------------------------
# parent side: download, unpack, run the worker, write JSON
# --------------------------------------------------------------------------------------------------


def _pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    print("+", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)


def find_or_download_wheel(version: str) -> Path:
    WHEEL_DIR.mkdir(parents=True, exist_ok=True)
    pattern = f"sglang-{version}-*.whl"
    found = sorted(WHEEL_DIR.glob(pattern))
    if not found:
        try:
            _pip("download", "--no-deps", f"sglang=={version}", "-d", str(WHEEL_DIR))
        except subprocess.CalledProcessError:
            # a platform wheel for another interpreter: ask for the one the target hosts run (cp311, glibc 2.34+)
            _pip("download", "--no-deps", "--only-binary=:all:", "--python-version", "3.11",
                 "--platform", "manylinux_2_34_x86_64", f"sglang=={version}", "-d", str(WHEEL_DIR))
        found = sorted(WHEEL_DIR.glob(pattern))
    if not found:
        raise SystemExit(f"no wheel for sglang=={version} in {WHEEL_DIR}")
    return found[0]


def ensure_deps(version: str, src: Path) -> tuple[Path, dict[str, str]]:
    """pip install --target the REAL_DEPS (unpinned in sglang's METADATA; the newest is what pip gives users)."""
    target = DEPS_DIR / version
    versions = _installed_versions(target)
    if not all(name in versions for name in REAL_DEPS):
        target.mkdir(parents=True, exist_ok=True)
        _pip("install", "--quiet", "--no-deps", "--upgrade", "--target", str(target), *REAL_DEPS)
        versions = _installed_versions(target)
    return target, {name: versions.get(name, "?") for name in REAL_DEPS}


def _installed_versions(target: Path) -> dict[str, str]:
    out = {}
    for meta in target.glob("*.dist-info/METADATA"):
        name = ver = None
        for line in meta.read_text(errors="replace").splitlines():
            if line.startswith("Name: "):
                name = line[6:].strip().lower()
            elif line.startswith("Version: "):
                ver = line[9:].strip()
            if name and ver:
                break
        if name and ver:
            out[name] = ver
    return out


def sha256_of(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def prog_source(src: Path) -> dict:
    """The ArgumentParser(...) line inside prepare_server_args, verbatim, with its line number."""
    path = src / "sglang" / "srt" / "server_args.py"
    lines = path.read_text().splitlines()
    inside = False
    for no, line in enumerate(lines, 1):
        if line.startswith("def prepare_server_args"):
            inside = True
        elif inside and line and not line[0].isspace():
            break
        if inside and "ArgumentParser(" in line:
            return {"file": "sglang/srt/server_args.py", "line": no, "text": line.strip()}
    return {"file": "sglang/srt/server_args.py", "line": None, "text": None}


def run_worker(version: str, src: Path, deps: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="sglang-flags-") as tmp:
        out = Path(tmp) / "out.json"
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": tmp,  # nothing of the user's (sglang reads ~/.cache paths, never writes during parser build)
            "LANG": "C.UTF-8",
            "COLUMNS": str(USAGE_COLUMNS),
            "TMPDIR": tmp,
        }
        cmd = [sys.executable, "-I", "-S", str(Path(__file__).resolve()), "--worker",
               "--src", str(src), "--deps", str(deps), "--out", str(out)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0 or not out.exists():
            tail = "\n".join((proc.stderr or "").splitlines()[-30:])
            raise RuntimeError(f"worker for {version} failed (rc={proc.returncode}):\n{tail}")
        return json.loads(out.read_text())


def extract_version(version: str, out_dir: Path, force_ast: bool = False) -> Path:
    wheel = find_or_download_wheel(version)
    with tempfile.TemporaryDirectory(prefix=f"sglang-{version}-") as tmp:
        src = Path(tmp) / "src"
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(src)
        doc: dict = {
            "schema_version": SCHEMA_VERSION,
            "sglang_version": version,
            "wheel": wheel.name,
            "wheel_sha256": sha256_of(wheel),
            "prog_source": prog_source(src),
            "python_version": ".".join(map(str, sys.version_info[:3])),
        }
        worker_error = None
        result = None
        real_deps: dict[str, str] = {}
        if not force_ast:
            try:
                deps, real_deps = ensure_deps(version, src)
                result = run_worker(version, src, deps)
            except Exception as exc:  # noqa: BLE001 - recorded, then the ast fallback runs
                worker_error = f"{type(exc).__name__}: {exc}"
                print(f"real parser for {version} failed, falling back to ast: {worker_error}", file=sys.stderr)
        if result is not None:
            doc.update(result)
            doc["extraction_method"] = "real-parser"
            doc["real_dependencies"] = real_deps
        else:
            doc.update(ast_extract(src))
            doc["extraction_method"] = "ast"
            doc["real_parser_error"] = worker_error
    doc["error_format"] = error_format_notes(doc)
    doc["counts"] = count_kinds(doc["actions"])
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"flags-{version}.json"
    doc["actions"] = sorted(doc["actions"], key=lambda a: (a["option_strings"] or [a["dest"]])[0])
    path.write_text(json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return path


def error_format_notes(doc: dict) -> dict:
    return {
        "exit_status": 2,
        "stream": "stderr",
        "layout": "{usage}{prog}: error: {message}\n",
        "usage_note": "{usage} is parser.format_usage() (the 'usage' field: 'usage: ...' wrapped at COLUMNS-2, "
        f"recorded with COLUMNS={USAGE_COLUMNS}, which is also what a process without a tty and without COLUMNS "
        "gets), ending in a newline; argparse prints both to stderr via parser.error() and exits 2",
        "messages_python_3_11": {
            "unrecognized": "unrecognized arguments: {args joined by a space}",
            "ambiguous": "ambiguous option: {token} could match {option strings in registration order, ', '}",
            "invalid_choice": "argument {all option strings joined by '/'}: invalid choice: {value!r} "
            "(choose from {choices as repr, ', '})",
            "invalid_type": "argument {all option strings joined by '/'}: invalid {type.__name__} value: {value!r} "
            "(json.loads shows as 'loads'; an ArgumentTypeError from sglang's own type callables, e.g. "
            "json_list_type or human_readable_int, replaces the whole text after 'argument ...: ')",
            "expected_one": "argument {all option strings joined by '/'}: expected one argument",
            "ignored_explicit": "argument {all option strings joined by '/'}: ignored explicit argument {value!r}",
            "required": "the following arguments are required: {option strings joined by '/'}, ...",
        },
        "note": "Python 3.12+ changed some of these texts (e.g. invalid choice no longer uses repr); "
        "the probes below ran on python_version.",
    }


def count_kinds(actions: list[dict]) -> dict:
    by_kind: dict[str, int] = {}
    by_class: dict[str, int] = {}
    for a in actions:
        by_kind[a["kind"]] = by_kind.get(a["kind"], 0) + 1
        by_class[a["action_class"]] = by_class.get(a["action_class"], 0) + 1
    return {
        "by_kind": dict(sorted(by_kind.items())),
        "by_action_class": dict(sorted(by_class.items())),
        "actions": len(actions),
        "actions_without_help": sum(1 for a in actions if a["kind"] != "help"),
        "option_strings": sum(len(a["option_strings"]) for a in actions),
        "taking_a_value": sum(1 for a in actions if a.get("takes_value")),
        "deprecated": sum(1 for a in actions if a["kind"].startswith("deprecated")),
    }


# --------------------------------------------------------------------------------------------------
# ast fallback: add_argument calls with literal arguments (incomplete for dataclass-derived parsers)
# --------------------------------------------------------------------------------------------------


def ast_extract(src: Path) -> dict:
    path = src / "sglang" / "srt" / "server_args.py"
    tree = ast.parse(path.read_text())
    actions = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        opts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if not opts:
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        action_name = _lit(kw.get("action"))
        if action_name is None and "action" in kw:
            action_name = ast.unparse(kw["action"])
        type_node = kw.get("type")
        type_name = None if type_node is None else ast.unparse(type_node)
        if type_name == "json.loads":
            type_name = "json"
        action_class = {None: "_StoreAction", "store_true": "_StoreTrueAction", "store_false": "_StoreFalseAction",
                        "append": "_AppendAction", "count": "_CountAction"}.get(
                            action_name, (action_name or "").rpartition(".")[2])
        nargs = _lit(kw.get("nargs"), "?" if "nargs" in kw else None)
        kind = _KIND_BY_CLASS.get(action_class) or ("custom_flag" if nargs == 0 else "custom_store")
        takes_value = kind not in ("store_true", "store_false", "count", "boolean_optional", "deprecated",
                                   "deprecated_store_true", "custom_flag") and nargs != 0
        dest = _lit(kw.get("dest")) or next((o for o in opts if o.startswith("--")), opts[0]).lstrip("-")
        help_text = _lit(kw.get("help"))
        default = _lit(kw.get("default"), ast.unparse(kw["default"]) if "default" in kw else None)
        if kind == "boolean_optional":
            opts = opts + ["--no-" + o[2:] for o in opts if o.startswith("--")]
        actions.append({
            "dest": dest.replace("-", "_"), "option_strings": opts, "kind": kind,
            "action_class": action_class, "nargs": nargs, "type": type_name or
            ("str" if takes_value else None), "choices": _lit(kw.get("choices")), "default": default,
            "required": bool(_lit(kw.get("required"))), "const": None, "takes_value": takes_value,
            "help": help_text[:HELP_CHARS] if isinstance(help_text, str) else None,
            "order": node.lineno,
        })
    actions.sort(key=lambda a: a["order"])
    for i, a in enumerate(actions):
        a["order"] = i
    return {"actions": actions, "prog": None, "allow_abbrev": True, "prefix_chars": "-",
            "prog_by_entrypoint": {}, "probes": {}}


def _lit(node, fallback=None):
    if node is None:
        return fallback
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return fallback


# --------------------------------------------------------------------------------------------------
# worker side: runs under `python -I -S`, stubs heavy imports, builds the real parser
# --------------------------------------------------------------------------------------------------


# Attributes a stub module must NOT have, so hasattr() probes answer like a CUDA build of torch on a machine
# without a GPU (plain stubs answer hasattr() with True for everything, which reads as "this is an NPU").
_ABSENT_ATTRS = {
    "torch": {"npu", "hpu", "musa", "mlu", "gcu", "sdaa", "xla", "dipu", "maca"},
}


# Dunder attributes that stub classes do answer (with an empty stub); every other dunder raises AttributeError,
# so hasattr(x, "__wrapped__") and friends keep telling the truth.
_STUB_DUNDERS = {"__class_validators__"}


def _install_stubs(real_top_levels: set[str]) -> None:
    import abc
    import importlib.abc
    import importlib.machinery
    import types

    def _is_function(obj):
        return isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                                staticmethod, classmethod, property))

    def _false(*_a, **_k):
        return False

    def _self(self, *_a, **_k):
        return self

    class _StubMeta(abc.ABCMeta):
        """Metaclass of stub classes: attribute access yields more stubs; they subclass, call and compare."""

        def __getattr__(cls, name):
            if name.startswith("__") and name.endswith("__") and name not in _STUB_DUNDERS:
                raise AttributeError(name)
            child = _new_stub_class(name, f"{cls.__qualname__}.{name}", cls.__module__)
            type.__setattr__(cls, name, child)
            return child

        def __call__(cls, *args, **kwargs):
            # a stub used as a decorator (@torch.compile, @triton.jit, @custom_op(...)) hands back what it got
            if cls.__dict__.get("_pure_stub") and len(args) == 1 and not kwargs and _is_function(args[0]):
                return args[0]
            return super().__call__(*args, **kwargs)

        def register(cls, *args, **kwargs):
            # AutoProcessor.register(Config, Processor) on a stub is a no-op; real ABCs keep ABCMeta's
            if cls.__dict__.get("_pure_stub"):
                return args[-1] if args else None
            return super().register(*args, **kwargs)

        def __getitem__(cls, _item):
            return cls

        def __setitem__(cls, _key, _value):
            pass

        __delitem__ = __setitem__

        def __contains__(cls, _item):
            return False

        def __bool__(cls):
            return not cls.__dict__.get("_pure_stub", False)

        def __iter__(cls):
            return iter(())

        def __len__(cls):
            return 0

        __lt__ = __le__ = __gt__ = __ge__ = _false
        __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __floordiv__ = _self

        def __int__(cls):
            return 0

        __index__ = __int__

        def __float__(cls):
            return 0.0

        def __repr__(cls):
            return f"<stub {cls.__qualname__}>"

        def __str__(cls):
            return ""

    class _StubBase(str):
        """Instances are empty strings too, so getattr(torch, stub) and f-strings keep working."""

        def __new__(cls, *_a, **_k):
            return str.__new__(cls, "")

        def __init__(self, *_a, **_k):
            pass

        def __init_subclass__(cls, **_kwargs):  # class X(TypedDictLikeStub, total=False)
            super().__init_subclass__()

        def __getattr__(self, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            return _new_stub_class(name, name, "stub")()

        def __call__(self, *args, **kwargs):
            if len(args) == 1 and not kwargs and _is_function(args[0]):
                return args[0]
            return type(self)()

        def __getitem__(self, _item):
            return type(self)()

        def __setitem__(self, _key, _value):
            pass

        __delitem__ = __setitem__

        def __bool__(self):
            return False

        def __iter__(self):
            return iter(())

        def __len__(self):
            return 0

        def __int__(self):
            return 0

        __index__ = __int__

        def __float__(self):
            return 0.0

        def __enter__(self):
            return self

        def __exit__(self, *_a):
            return False

        __lt__ = __le__ = __gt__ = __ge__ = _false
        __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __floordiv__ = _self
        __or__ = __ror__ = __and__ = __rand__ = __neg__ = __pow__ = __mod__ = _self

        def __contains__(self, _item):
            return False

        def __hash__(self):
            return id(self)

        def __eq__(self, other):
            return self is other

        def __str__(self):
            return ""

        def __repr__(self):
            return f"<stub {type(self).__qualname__} instance>"

    def _new_stub_class(name, qualname, module):
        cls = _StubMeta(name, (_StubBase,), {"_pure_stub": True, "__module__": module})
        cls.__qualname__ = qualname
        return cls

    class _StubModule(types.ModuleType):
        __version__ = "99.0.0"  # "new enough": version gates take the modern path

        def __getattr__(self, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            if name in _ABSENT_ATTRS.get(self.__name__, ()):
                raise AttributeError(name)
            child = _new_stub_class(name, f"{self.__name__}.{name}", self.__name__)
            setattr(self, name, child)
            return child

    class _StubLoader(importlib.abc.Loader):
        def create_module(self, spec):
            mod = _StubModule(spec.name)
            mod.__path__ = []
            return mod

        def exec_module(self, module):
            return None

    stubbed: set[str] = set()

    class _StubFinder(importlib.abc.MetaPathFinder):
        """Last on sys.meta_path: whatever the real finders could not find and is not ours becomes a stub."""

        def find_spec(self, fullname, path=None, target=None):
            top = fullname.partition(".")[0]
            if top in real_top_levels or top in sys.stdlib_module_names:
                return None
            stubbed.add(top)
            return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)

    sys.meta_path.append(_StubFinder())
    _install_stubs.stubbed = stubbed  # type: ignore[attr-defined]


def _json_safe(value, depth=0):
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else repr(value)
    if depth < 4 and isinstance(value, (list, tuple)):
        return [_json_safe(v, depth + 1) for v in value]
    if depth < 4 and isinstance(value, (set, frozenset)):
        return sorted((_json_safe(v, depth + 1) for v in value), key=repr)
    if depth < 4 and isinstance(value, dict):
        return {str(k): _json_safe(v, depth + 1) for k, v in value.items()}
    if hasattr(value, "value") and hasattr(value, "name") and type(value).__module__ != "builtins":
        return _json_safe(value.value, depth + 1)  # Enum members
    return repr(value)


_KIND_BY_CLASS = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "_StoreConstAction": "store_const",
    "BooleanOptionalAction": "boolean_optional",
    "_AppendAction": "append",
    "_AppendConstAction": "append_const",
    "_ExtendAction": "extend",
    "_CountAction": "count",
    "_HelpAction": "help",
    "_VersionAction": "version",
    "DeprecatedAction": "deprecated",
    "DeprecatedStoreTrueAction": "deprecated_store_true",
    "DeprecatedStoreConstAction": "deprecated_store_const",
    "DeprecatedAliasStoreAction": "deprecated_alias",
}


def _type_name(t) -> str | None:
    if t is None:
        return None
    if t in (int, float, str, bool):
        return t.__name__
    if getattr(t, "__module__", None) == "json" and getattr(t, "__name__", None) == "loads":
        return "json"
    name = getattr(t, "__qualname__", None) or getattr(t, "__name__", None) or type(t).__name__
    return name


def _dump_action(action, order: int) -> dict:
    cls = type(action).__name__
    kind = _KIND_BY_CLASS.get(cls)
    if kind is None:
        # custom Action subclass: describe it by what it consumes
        kind = "custom_flag" if action.nargs == 0 else "custom_store"
    if cls == "DeprecatedAction" and getattr(action, "error_message", None):
        kind = "deprecated_error"
    help_text = action.help
    if help_text is not None and not isinstance(help_text, str):
        help_text = str(help_text)
    entry = {
        "dest": action.dest,
        "option_strings": list(action.option_strings),
        "kind": kind,
        "action_class": cls,
        "nargs": action.nargs,
        "takes_value": action.nargs != 0,
        "type": _type_name(action.type),
        # a set of choices is sorted here; argparse itself lists it in hash order, which varies per process
        "choices": None if action.choices is None else _json_safe(
            action.choices if isinstance(action.choices, (set, frozenset)) else list(action.choices)),
        "default": _json_safe(action.default),
        "const": _json_safe(action.const),
        "required": bool(action.required),
        "help": None if help_text is None else help_text[:HELP_CHARS],
        "order": order,
    }
    if isinstance(action.choices, (set, frozenset)):
        entry["choices_unordered"] = True
    for extra in ("new_flag", "error_message", "const_value"):
        if getattr(action, extra, None) is not None:
            entry[extra] = _json_safe(getattr(action, extra))
    return entry


def worker_main(src: str, deps: str, out: str) -> None:
    import io
    import logging

    sys.path[:0] = [src, deps]
    real = {"sglang"} | {p.name.split("-")[0].split(".")[0] for p in Path(deps).iterdir()
                          if not p.name.endswith((".dist-info", ".data"))}
    _install_stubs(real)
    logging.disable(logging.CRITICAL)  # sglang's import-time warnings are not what we are after

    class _Captured(Exception):
        def __init__(self, parser):
            self.parser = parser

    def capture(argv0: str):
        from sglang.srt import server_args as sa

        real_parse = argparse.ArgumentParser.parse_args

        def intercept(self, *a, **k):
            raise _Captured(self)

        sys.argv = [argv0]
        argparse.ArgumentParser.parse_args = intercept
        try:
            sa.prepare_server_args([])
        except _Captured as cap:
            return cap.parser
        finally:
            argparse.ArgumentParser.parse_args = real_parse
        raise RuntimeError("prepare_server_args returned without parsing")

    launch_server_py = str(Path(src) / "sglang" / "launch_server.py")
    parser = capture(launch_server_py)  # what `python -m sglang.launch_server` gets
    prog_cli = capture("/usr/local/bin/sglang").prog  # what the `sglang serve` console script gets
    actions = [_dump_action(a, i) for i, a in enumerate(parser._actions)]
    for action in parser._actions:
        # set-valued choices print in hash order, which differs per process; sort them so usage and the probes
        # below are reproducible (the real server shows the same members in some order)
        if isinstance(action.choices, (set, frozenset)):
            action.choices = sorted(action.choices, key=repr)

    probes = {}
    for name, argv in PROBES:
        err = io.StringIO()
        real_err, sys.stderr = sys.stderr, err
        try:
            ns = parser.parse_args(argv)
            rc = 0
        except SystemExit as exc:
            ns, rc = None, exc.code
        finally:
            sys.stderr = real_err
        probe = {"argv": argv, "exit_status": rc}
        text = err.getvalue()
        if rc:
            lines = text.splitlines()
            probe["error_line"] = lines[-1] if lines else ""
        if ns is not None:
            defaults = {a.dest: a.default for a in parser._actions}
            probe["set"] = {k: _json_safe(v) for k, v in sorted(vars(ns).items())
                            if k in defaults and v != defaults[k]}
        probes[name] = probe

    result = {
        "prog": parser.prog,
        "prog_by_entrypoint": {"python -m sglang.launch_server": parser.prog, "sglang serve": prog_cli},
        "allow_abbrev": parser.allow_abbrev,
        "prefix_chars": parser.prefix_chars,
        "add_help": parser.add_help,
        "exit_on_error": parser.exit_on_error,
        "usage": parser.format_usage(),
        "usage_columns": USAGE_COLUMNS,
        "actions": actions,
        "probes": probes,
        "stubbed_imports": sorted(_install_stubs.stubbed),  # type: ignore[attr-defined]
    }
    Path(out).write_text(json.dumps(result))


# --------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("versions", nargs="*", default=DEFAULT_VERSIONS, help="sglang versions (default: %(default)s)")
    ap.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR)
    ap.add_argument("--ast", action="store_true", help="skip the real parser; use the ast fallback")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--src", help=argparse.SUPPRESS)
    ap.add_argument("--deps", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker_main(args.src, args.deps, args.out)
        return 0
    if sys.version_info[:2] != (3, 11):
        print(f"warning: running on Python {sys.version.split()[0]}; argparse texts are recorded for 3.11",
              file=sys.stderr)
    for version in args.versions:
        if not re.fullmatch(r"[0-9][0-9A-Za-z.+-]*", version):
            raise SystemExit(f"not a version: {version!r}")
        path = extract_version(version, args.out_dir, force_ast=args.ast)
        doc = json.loads(path.read_text())
        print(f"{version}: {doc['extraction_method']} prog={doc['prog']!r} counts={doc['counts']} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
