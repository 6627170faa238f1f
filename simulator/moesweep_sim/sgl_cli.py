"""The `sglang serve` / `python -m sglang.launch_server` command line of the emulated version.

The argparse parser is rebuilt from ``data/sglang/flags-<version>.json`` (extracted from the real
wheel by scripts/extract_sglang_flags.py): same option strings, nargs, types, choices, defaults and
``prog``/``allow_abbrev``, so unknown flags, bad choices and ambiguous prefixes exit 2 with
argparse's own messages, and ``--tp 8`` works by prefix abbreviation exactly as in sglang (the parser is
a plain ``argparse.ArgumentParser``, whose allow_abbrev defaults to True:
https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/server_args.py ``prepare_server_args``).
Deprecated-alias actions are mapped onto their target dest.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA_DIRS = (
    os.environ.get("MOESWEEP_SIM_DATA_DIR", ""),
    "/opt/moesweep-sim/data/sglang",
    os.path.join(os.path.dirname(os.path.dirname(HERE)), "data", "sglang"),  # <repo>/data/sglang
)

def find_flags_file(version: str) -> str:
    for d in DATA_DIRS:
        if d:
            p = os.path.join(d, f"flags-{version}.json")
            if os.path.exists(p):
                return p
    raise SystemExit(f"[moesweep-sim] no flags-{version}.json in {', '.join(d for d in DATA_DIRS if d)}")


def _human_readable_int(value):
    """sglang >= 0.5.2x context-length parser: SI (k, M, G, T) and IEC (Ki, Mi, Gi, Ti) suffixes."""
    s = str(value).strip()
    iec = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}
    si = {"k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12}
    for suf, mul in iec.items():
        if s.endswith(suf):
            return int(s[:-2]) * mul
    for suf, mul in si.items():
        if s.endswith(suf):
            return int(float(s[:-1]) * mul)
    return int(s)


def json_list_type(value):
    return json.loads(value)


def nullable_str(value):
    return None if value in ("None", "none", "") else value


def parse_cuda_graph_backend_arg(raw):
    """0.5.23 sglang/srt/model_executor/cuda_graph_config.py: reject the retired backend."""
    from . import templates as T

    if raw == "tc_piecewise":
        raise argparse.ArgumentTypeError(T.render(T.CUDA_GRAPH_BACKEND_REMOVED_23))
    return raw


# cuda_graph_config.py Phase.ALL and ALLOWED_KEYS_PER_PHASE
_CG_PHASES = ("decode", "prefill")
_CG_KEYS = {"decode": ("backend", "max_bs", "bs"),
            "prefill": ("backend", "max_bs", "bs", "max_context_size", "full_prefill_max_req",
                        "full_prefill_prefix_chunk_tokens", "max_seq_len")}


def parse_cuda_graph_config_arg(raw):
    """0.5.23 cuda_graph_config.py parse_cuda_graph_config_arg: a JSON object of phase -> settings object,
    every key checked against the phase's allowed keys (argparse prints the ArgumentTypeError text)."""
    from . import templates as T

    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(T.render(T.CUDA_GRAPH_CONFIG_JSON_23, e=e)) from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(T.render(T.CUDA_GRAPH_CONFIG_OBJECT_23, t=type(parsed).__name__))
    result = {}
    for phase, settings in parsed.items():
        phase = str(phase)
        if phase not in _CG_PHASES:
            raise argparse.ArgumentTypeError(T.render(T.CUDA_GRAPH_CONFIG_PHASE_23, phase=phase, phases=_CG_PHASES))
        if not isinstance(settings, dict):
            raise argparse.ArgumentTypeError(T.render(T.CUDA_GRAPH_CONFIG_PHASE_OBJECT_23, phase=phase,
                                                      t=type(settings).__name__))
        if "backend" in settings:
            parse_cuda_graph_backend_arg(settings["backend"])
        result[phase] = {}
        for key, value in settings.items():
            if key not in _CG_KEYS[phase]:
                raise argparse.ArgumentTypeError(T.render(T.CUDA_GRAPH_CONFIG_KEY_23, phase=phase, key=key,
                                                          allowed=_CG_KEYS[phase]))
            result[phase][key] = value
    return result


_TYPES = {"int": int, "float": float, "str": str, "json": json.loads, "json_list_type": json_list_type,
          "nullable_str": nullable_str, "human_readable_int": _human_readable_int,
          "parse_cuda_graph_config_arg": parse_cuda_graph_config_arg,
          "parse_cuda_graph_backend_arg": parse_cuda_graph_backend_arg}


def _type(name):
    if name is None:
        return None
    if name in _TYPES:
        return _TYPES[name]
    # a custom parser of sglang's that the schema records only by name: keep its name for
    # argparse's "invalid <name> value" message, pass the string through
    def f(v):
        return v

    f.__name__ = name
    return f


def _deprecated_warning(message: str):
    """print_deprecated_warning: logger.warning before logging is configured -> the lastResort
    handler prints the bare message to stderr (S9 server_args.py:5725, S23 argparse_actions.py:28)."""
    print(f"\033[1;33m{message}\033[0m", file=sys.stderr, flush=True)


class _DeprecatedAction(argparse.Action):  # S9 server_args.py:5729-5738
    def __init__(self, option_strings, dest, nargs=0, **kw):
        super().__init__(option_strings, dest, nargs=nargs, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        from . import templates as T
        _deprecated_warning(T.render(T.DEPRECATED_ARG_9, opt=option_string))


class _DeprecatedStoreTrue(argparse.Action):  # S23 arg_groups/argparse_actions.py:77-100
    def __init__(self, option_strings, dest, new_flag=None, **kw):
        self.new_flag = new_flag
        kw.pop("const", None)
        super().__init__(option_strings, dest, nargs=0, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        from . import templates as T
        repl = T.render(T.DEPRECATED_REPLACEMENT_23, new=self.new_flag) if self.new_flag else ""
        _deprecated_warning(T.render(T.DEPRECATED_FLAG_23, opt=option_string, repl=repl))
        setattr(namespace, self.dest, True)


class _DeprecatedStoreConst(_DeprecatedStoreTrue):
    def __init__(self, option_strings, dest, new_flag=None, const_value=True, **kw):
        self.const_value = const_value
        kw.pop("nargs", None)
        argparse.Action.__init__(self, option_strings, dest, nargs=None, **{k: v for k, v in kw.items()
                                                                           if k != "const"})
        self.new_flag = new_flag

    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, values, option_string)
        setattr(namespace, self.dest, self.const_value)


class _SimParser(argparse.ArgumentParser):
    recorded_usage = None

    def format_usage(self):
        # the real parser's usage text, recorded with COLUMNS=80 (what a process without a tty gets)
        return self.recorded_usage if self.recorded_usage else super().format_usage()

    def print_usage(self, file=None):
        self._print_message(self.format_usage(), file or sys.stderr)


def entrypoint_prog(spec: dict) -> str:
    ep = os.environ.get("MOESWEEP_SIM_ENTRYPOINT", "python -m sglang.launch_server")
    return (spec.get("prog_by_entrypoint") or {}).get(ep) or spec.get("prog") or "sglang serve"


def build_parser(spec: dict) -> argparse.ArgumentParser:
    prog = entrypoint_prog(spec)
    parser = _SimParser(prog=prog, allow_abbrev=spec.get("allow_abbrev", True), add_help=True)
    usage = spec.get("usage")
    if usage and prog != spec.get("prog"):
        usage = usage.replace("usage: " + spec.get("prog", ""), "usage: " + prog, 1)
    parser.recorded_usage = usage
    for opt in sorted(spec["actions"], key=lambda o: o.get("order", 0)):
        strings = opt["option_strings"]
        kind = opt.get("kind", "store")
        if not strings or kind == "help":
            continue
        kw = {"dest": opt["dest"], "help": opt.get("help"), "default": opt.get("default")}
        if opt.get("required"):
            kw["required"] = True
        if kind in ("store_true", "store_false"):
            kw["action"] = kind
        elif kind == "boolean_optional":
            kw["action"] = argparse.BooleanOptionalAction
        elif kind == "deprecated":
            kw["action"] = _DeprecatedAction
        elif kind == "deprecated_store_true":
            kw["action"] = _DeprecatedStoreTrue
            kw["new_flag"] = opt.get("new_flag")
        elif kind == "deprecated_store_const":
            kw["action"] = _DeprecatedStoreConst
            kw["new_flag"] = opt.get("new_flag")
            kw["const_value"] = opt.get("const_value", True)
            if opt.get("choices") is not None:
                kw["choices"] = opt["choices"]
        elif kind in ("store_const", "append_const"):
            kw["action"] = kind
            kw["const"] = opt.get("const")
        else:  # store, custom_store (LoRAPathAction: keeps the raw strings), append
            if kind == "append":
                kw["action"] = "append"
            if opt.get("nargs") is not None:
                kw["nargs"] = opt["nargs"]
            if opt.get("type") is not None:
                kw["type"] = _type(opt.get("type"))
            if opt.get("choices") is not None:
                kw["choices"] = opt["choices"]
            if opt.get("const") is not None:
                kw["const"] = opt["const"]
        parser.add_argument(*strings, **kw)
    return parser


def load_spec(version: str) -> dict:
    with open(find_flags_file(version), encoding="utf-8") as f:
        return json.load(f)


def merge_config(version: str, argv: list[str]) -> list[str]:
    """argv as prepare_server_args hands it to argparse: a ``--config FILE``'s options in front (config_file.merge;
    raises config_file.ConfigError where sglang raises)."""
    from . import config_file

    if config_file.CONFIG_FLAG not in argv:
        return list(argv)
    return config_file.merge(version, load_spec(version), argv)


def parse(version: str, argv: list[str]) -> tuple[dict, dict]:
    """Parse argv like the emulated sglang.  Exits 2 (argparse) on a bad command line."""
    spec = load_spec(version)
    args = vars(build_parser(spec).parse_args(argv))
    # ServerArgs field names (S9's argparse dests differ for a few aliases)
    for alias, field in (("tensor_parallel_size", "tp_size"), ("expert_parallel_size", "ep_size"),
                         ("data_parallel_size", "dp_size"), ("pipeline_parallel_size", "pp_size")):
        if alias in args and field not in args:
            args[field] = args.pop(alias)
    return args, spec
