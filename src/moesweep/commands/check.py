"""``moesweep check``: run the preflight's evaluator from the controller against a host's facts.

The facts come from one of: ``--facts FILE`` (gpu_facts output), ``--nvidia-smi FILE ...`` (any saved
nvidia-smi output, read as ``moesweep facts`` reads it: so someone holding only a pasted nvidia-smi can
ask whether a backend will run there), or ``--sm`` / ``--gpus`` / ``--interconnect`` / ``--virt``
alone. Given with a file, those four override what the file says. The driver comes from the facts or the
nvidia-smi output, or ``--driver``; the model's architecture (which the attention rules need: GLM-5 and
DeepSeek V3.2 run DeepSeek Sparse Attention) from ``--model-config`` (the model's config.json) or ``--model``
(an id of the knowledge base's cited model table).

Same code as the ``sglang_preflight`` action (``plugin_utils.compat``), imported through the in-repo
collection, never copied. Every argument is checked before anything is evaluated.

With ``--nvidia-smi``, the host checks also run on the files (``moesweep facts --from-file``'s reading: any
nvidia-smi output, ``topo -p2p``, ``lspci -vvv``, ``/proc/cmdline`` or a grub line, ``/proc/PID/limits``, the
kernel log, NCCL INFO lines), with the verdicts, evidence and fixes ``gpu_facts`` gives on a host, and the
checks the files cannot decide are named with the input that would decide them.

Exit status: 0 the point may run (supported, caveat, unknown), 1 it is refused (or a host check on the
``--nvidia-smi`` files fails, which refuses every point on a host), 2 bad input (the message names the fix),
3 the nvidia-smi output shows a driver failure.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

import moesweep._collection  # noqa: F401  (puts the in-repo collection on sys.path)

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import nvidia_smi as smi
from ansible_collections.moesweep.sweep.plugins.plugin_utils import compat, sglang_flags, sglang_sandbox

from moesweep.commands import facts as saved

EXIT_BAD_INPUT = 2
EXIT_DRIVER_FAILURE = 3
VIRT_KINDS = ("none", "vm", "container", "unknown")


class BadInput(ValueError):
    """A user's mistake, with the fix in the message."""


def _flag(text: str) -> tuple[str, object]:
    """``K=V`` with V read as a YAML-ish scalar the way Ansible reads ``-e`` values: true/false are
    booleans, numbers are numbers, anything else a string; a bare ``K`` is a set boolean flag."""
    if "=" not in text:
        return text.lstrip("-"), True
    key, value = text.split("=", 1)
    low = value.strip().lower()
    if low in ("true", "yes", "on"):
        return key.lstrip("-"), True
    if low in ("false", "no", "off"):
        return key.lstrip("-"), False
    for cast in (int, float):
        try:
            return key.lstrip("-"), cast(value)
        except ValueError:
            pass
    return key.lstrip("-"), value


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "check",
        help="check one sweep point (backend, quantization, flags, sglang version) against host facts",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--facts", help="JSON file: gpu_facts output (ansible_facts.moesweep_gpu, or a result holding it)"
    )
    source.add_argument(
        "--nvidia-smi",
        dest="nvidia_smi",
        metavar="FILE",
        nargs="+",
        action="extend",
        help="saved nvidia-smi output (table, -q, -q -x, CSV, -L, topo -m, topo -p2p) and what else the host "
        "checks read (lspci -vvv, /proc/cmdline or a grub line, NCCL INFO lines ...); several are merged, and the "
        "host checks run on them",
    )
    source.add_argument(
        "-i",
        "--inventory",
        help="check on the inventory's gpu_hosts over SSH (their facts, their "
        "sglang version and launch settings; nothing on the hosts changes)",
    )
    p.add_argument("--limit", help="host pattern (with --inventory)")
    p.add_argument("--sm", help="SM of the host: 120, sm120 or 12.0")
    p.add_argument("--gpus", type=int, help="GPU count (1 or more)")
    p.add_argument("--interconnect", choices=smi.INTERCONNECT_VALUES, help="GPU-to-GPU interconnect")
    p.add_argument("--virt", choices=VIRT_KINDS, help="virtualization kind")
    p.add_argument("--backend", help="--moe-runner-backend value (required, but with --table)")
    p.add_argument(
        "--table",
        action="store_true",
        help="print what the preflight knows as tables (per audited version: backend x SM per quantization, "
        "each cell the verdict, the stage and the deciding rule; the launch-wide rules with their sources), "
        "the text of docs/compatibility.md",
    )
    p.add_argument("--out", metavar="FILE", help="with --table: write the tables to FILE instead of printing them")
    p.add_argument("--quantization", help="--quantization value (omit for bf16)")
    p.add_argument(
        "--sglang-version",
        help="sglang version whose flag schema (data/sglang/flags-<version>.json) checks --flag; "
        "without it, version-dependent rules answer unknown",
    )
    p.add_argument("--cuda-version", help="CUDA toolkit release used for JIT (nvcc in CUDA_HOME), e.g. 12.8")
    p.add_argument("--flag", action="append", default=[], metavar="K=V", help="a launch flag (repeatable)")
    model = p.add_mutually_exclusive_group()
    model.add_argument(
        "--model-config",
        metavar="FILE",
        help="the model's config.json (its architectures and index_topk decide the attention rules)",
    )
    model.add_argument(
        "--model", help="a model id of the knowledge base's model table (data/compat.yml `models`), e.g. zai-org/GLM-5"
    )
    p.add_argument("--driver", help="NVIDIA driver version of the host, e.g. 570.133.20 (overrides the facts')")
    p.add_argument(
        "--no-dry-run",
        dest="dry_run",
        action="store_false",
        help="skip the dry run of the version's own argument handling (its pinned wheel, in a sandbox on this "
        "machine: plugins/plugin_utils/sglang_sandbox.py); the knowledge base decides alone",
    )
    p.add_argument("--kb", help="knowledge base file (default: the collection's data/compat.yml)")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.set_defaults(func=run)


# ---- checking the arguments ------------------------------------------------------------------


def load_kb(path: str | None) -> dict:
    import yaml

    where = f"--kb {path}" if path else f"the knowledge base {compat.DEFAULT_KB_PATH}"
    try:
        kb = compat.load_kb(path)
    except OSError as exc:
        raise BadInput(f"{where}: cannot read it ({exc.strerror or exc}); give the path of a compat.yml") from exc
    except UnicodeDecodeError as exc:
        raise BadInput(f"{where}: not a text file; give the path of a compat.yml") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise BadInput(f"{where}: not valid YAML{at}; give the path of a compat.yml") from exc
    except ValueError as exc:  # the loader's own validation (compat.KBError is a ValueError), where it has one
        raise BadInput(f"{where}: {exc}") from exc
    if not isinstance(kb, dict) or not isinstance(kb.get("rules"), list):
        raise BadInput(f"{where}: not a moesweep knowledge base (no `rules` list); give the path of a compat.yml")
    return kb


def known_sms(kb: dict) -> list[int]:
    """SMs that exist: NVIDIA's compute capability tables, plus any the knowledge base's rules name."""
    sms = {smi.sm_number(cap) for cap in smi.KNOWN_COMPUTE_CAPS}
    for group in ("rules", "flags", "auto_resolution"):
        for rule in kb.get(group) or []:
            for key in ("sm_in", "sm_not_in"):
                sms.update(x for x in rule.get(key) or [] if isinstance(x, int))
    return sorted(sms)


def check_sm(text: str, kb: dict) -> str:
    if not text.strip():
        raise BadInput("--sm is empty: give the host's compute capability, e.g. --sm 120, --sm sm120 or --sm 12.0")
    sm = compat.sm_number(text)
    if sm is None:
        raise BadInput(f"--sm {text!r}: not a compute capability; expected e.g. 120, sm120 or 12.0")
    known = known_sms(kb)
    if sm not in known:
        raise BadInput(
            f"--sm {text}: sm{sm} is not the compute capability of any NVIDIA GPU "
            f"(known: {', '.join(f'sm{x}' for x in known)}; see https://developer.nvidia.com/cuda-gpus)"
        )
    return f"sm{sm}"


def check_arguments(args, kb: dict) -> dict:
    """Everything that can be wrong with the arguments alone, before any file is read. Returns the
    overrides (sm, gpu_count, interconnect, virtualization) the arguments give."""
    overrides: dict = {}
    if args.sm is not None:
        overrides["sm"] = check_sm(args.sm, kb)
    if args.gpus is not None:
        if args.gpus < 1:
            raise BadInput(f"--gpus {args.gpus}: a GPU count is 1 or more")
        overrides["gpu_count"] = args.gpus
    if args.interconnect:
        overrides["interconnect"] = args.interconnect
    if args.virt:
        overrides["virtualization"] = {"kind": args.virt}
    if not args.backend.strip():
        raise BadInput("--backend is empty: give a --moe-runner-backend value, e.g. --backend flashinfer_cutlass")
    if args.sglang_version is not None:
        versions = sglang_flags.list_versions()
        if args.sglang_version not in versions:
            raise BadInput(
                f"--sglang-version {args.sglang_version!r}: no flag schema for it in data/sglang/ "
                f"(have: {', '.join(versions) or 'none'}); use one of those, or extract its schema from the "
                "wheel with scripts/extract_sglang_flags.py"
            )
    elif args.flag:
        raise BadInput("--flag needs --sglang-version: flags are checked against that version's real CLI schema")
    if args.cuda_version is not None and not re.match(r"^\d+\.\d+$", args.cuda_version.strip()):
        raise BadInput(f"--cuda-version {args.cuda_version!r}: expected a release like 12.8 or 13.0")
    for item in args.flag:
        if not item.lstrip("-").split("=", 1)[0]:
            raise BadInput(f"--flag {item!r}: expected NAME or NAME=VALUE, e.g. --flag tp-size=8")
    if args.driver is not None:
        if not re.match(r"^\d{3}(\.\d+){0,2}$", args.driver.strip()):
            raise BadInput(f"--driver {args.driver!r}: expected an NVIDIA driver version like 580.95.05 or 570")
        overrides["driver_version"] = args.driver.strip()
        overrides["driver_cuda_version"] = None  # a file's CUDA version belongs to its own driver
    return overrides


def model_of(args, kb: dict):
    """The point's model: the parsed --model-config, or the table entry of --model; None when neither is given."""
    if args.model_config:
        where = f"--model-config {args.model_config}"
        try:
            with open(args.model_config, encoding="utf-8") as handle:
                config = json.load(handle)
        except OSError as exc:
            raise BadInput(f"{where}: cannot read it ({exc.strerror or exc})") from exc
        except (UnicodeDecodeError, ValueError) as exc:
            raise BadInput(f"{where}: not JSON ({exc}); give the model's config.json") from exc
        if not compat.model_facts(config if isinstance(config, dict) else {}):
            raise BadInput(f"{where}: no `architectures` list; give the model's own config.json")
        return config
    if args.model:
        files = sglang_sandbox.known_model_dir(args.model)
        if files is not None:  # its published config.json, kept in data/models/ (SOURCES.md there)
            with open(files / "config.json", encoding="utf-8") as handle:
                return json.load(handle)
        known = compat.known_model(kb, args.model)
        if known is None:
            ids = sorted({m["id"] for m in kb.get("models") or []} | set(sglang_sandbox.known_model_ids()))
            raise BadInput(
                f"--model {args.model!r}: not in the knowledge base's model table, nor in data/models/ "
                f"({', '.join(ids)}); give its config.json with --model-config FILE instead"
            )
        return {"architecture": known["architecture"], "index_topk": bool(known.get("index_topk"))}
    return None


# ---- the host's facts ------------------------------------------------------------------------


def facts_from_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise BadInput(f"--facts {path}: cannot read it ({exc.strerror or exc})") from exc
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadInput(f"--facts {path}: not JSON ({exc}); give gpu_facts' output") from exc
    for key in ("ansible_facts", "moesweep_gpu"):
        if isinstance(data, dict) and key in data:
            data = data[key]
    if not isinstance(data, dict):
        raise BadInput(f"--facts {path}: not gpu_facts output (expected an object with sm, gpu_count, ...)")
    return data


def facts_from_nvidia_smi(paths: list[str]) -> tuple[dict, dict]:
    """gpu_facts-shaped facts from saved nvidia-smi output, and the reading itself."""
    try:
        read, _sources = saved.load(paths)
    except saved.UnreadableInput as exc:
        raise BadInput(f"--nvidia-smi {exc}") from exc
    facts = {
        "gpu_count": read["gpu_count"],
        "gpu_models": read["gpu_models"],
        "mixed_models": read["mixed_models"],
        "sm": read["sm"],
        "compute_cap": read["compute_cap"],
        "driver_version": read["driver_version"],
        "driver_cuda_version": read["cuda_version"],
        "interconnect": read["interconnect_detail"],
        "virtualization": {"kind": smi.virtualization_kind(read["virtualization"])},
    }
    return {k: v for k, v in facts.items() if v is not None and v != {"kind": None}}, read


def host_line(read: dict, paths: list[str]) -> str:
    models = ", ".join(read["gpu_models"]) or "unnamed GPUs"
    return (
        f"host (from {', '.join(paths)}): {read['gpu_count']} x {models}, {read['sm'] or 'SM unknown'}, "
        f"interconnect {read['interconnect_detail'] or 'not shown'}, driver {read['driver_version'] or 'unknown'}"
    )


def host_checks_of(args) -> tuple[list[dict], list[dict]] | None:
    """The host checks on the files of ``--nvidia-smi`` (any pasted nvidia-smi, topo -p2p, lspci -vvv,
    /proc/cmdline, NCCL INFO lines ...): ``(checks, undecided)`` with gpu_facts' verdicts, evidence and fixes
    (``moesweep facts``' reading), or None without ``--nvidia-smi`` or when the driver failed."""
    if not args.nvidia_smi:
        return None
    try:
        read, _sources, hosts = saved.load_all(args.nvidia_smi)
    except saved.UnreadableInput as exc:
        raise BadInput(f"--nvidia-smi {exc}") from exc
    if read["driver_failure"]:
        return None
    return saved.host_checks(read, hosts)


def print_host_checks(host) -> None:
    if host is not None:
        print("host checks (from the --nvidia-smi files; a fail refuses every point on the host):")
        print("\n".join(saved.checks_lines(*host)))


def host_check_failed(host) -> bool:
    return host is not None and any(c["verdict"] == "fail" for c in host[0])


def gather(args, overrides: dict) -> tuple[dict, dict | None]:
    read = None
    if args.facts:
        facts = facts_from_json(args.facts)
    elif args.nvidia_smi:
        facts, read = facts_from_nvidia_smi(args.nvidia_smi)
        if read["driver_failure"]:
            return facts, read
        if not facts.get("sm") and "sm" not in overrides:
            if read["mixed_models"]:
                raise BadInput(f"--nvidia-smi: the GPUs differ ({', '.join(read['gpu_models'])}): check each with --sm")
            names = ", ".join(read["gpu_models"]) or "no GPU name"
            raise BadInput(
                f"--nvidia-smi: the output does not establish the compute capability ({names}; not printed, "
                "and not a name in NVIDIA's table); add --sm, or save `nvidia-smi --query-gpu=name,compute_cap "
                "--format=csv` with it"
            )
    else:
        facts = {}
    facts.update(overrides)
    return facts, read


# ---- the verdict -----------------------------------------------------------------------------


def dry_run_of(args, schema: dict, point: dict, facts: dict) -> dict:
    """The dry run of the point's launch line with the version's own argument handling (the same function the
    sweep's preflight calls). The line is the point's flags with its backend and quantization, and the model
    path the point names (``--flag model-path=ID``, else ``--model ID``)."""
    flags = dict(point["flags"])
    flags["moe-runner-backend"] = args.backend
    if args.quantization:
        flags["quantization"] = args.quantization
    model_id = flags.pop("model-path", None) or args.model
    model = point["model"] if args.model_config else None
    argv = ["--model-path", str(model_id or "model")] + sglang_flags.render_argv(schema, flags)
    return sglang_sandbox.dry_run_point(args.sglang_version, argv, {}, facts, model=model or model_id,
                                        cuda_version=args.cuda_version)



def on_hosts(args) -> int:
    """``moesweep check -i INVENTORY --backend X``: the preflight on every host (playbooks/check.yml)."""
    from moesweep import api

    try:
        found = api.check(args.inventory, args.backend, limit=args.limit)
    except api.MoesweepError as exc:
        print(f"moesweep check: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        print(json.dumps(found, indent=2, sort_keys=True, default=str))
    refused = False
    for host, res in sorted(found.items()):
        refused = refused or bool(res.get("failed"))
        if not args.json:
            print(f"{host}: {res.get('msg')}")
            for warning in res.get("preflight_warnings") or []:
                print(f"  warning: {warning}")
    return 1 if refused else 0


def table(args) -> int:
    """``moesweep check --table``: the knowledge base as tables (moesweep.compat_table)."""
    from moesweep import compat_table

    try:
        kb = load_kb(args.kb)
    except BadInput as exc:
        print(f"moesweep check: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    audited = list(kb.get("versions") or {})
    if args.sglang_version and args.sglang_version not in audited:
        print(f"moesweep check: --sglang-version {args.sglang_version}: the knowledge base audits {', '.join(audited)}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    text = compat_table.render(kb, [args.sglang_version] if args.sglang_version else None)
    if not args.out:
        sys.stdout.write(text)
        return 0
    try:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        print(f"moesweep check: --out {args.out}: cannot write it ({exc.strerror or exc})", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def run(args) -> int:
    if getattr(args, "table", False):
        return table(args)
    if not args.backend:
        print("moesweep check: --backend is required (a --moe-runner-backend value, e.g. --backend triton), "
              "unless --table", file=sys.stderr)
        return EXIT_BAD_INPUT
    if getattr(args, "inventory", None):
        return on_hosts(args)
    host = None
    try:
        kb = load_kb(args.kb)
        overrides = check_arguments(args, kb)
        model = model_of(args, kb)
        host = host_checks_of(args)
        facts, read = gather(args, overrides)
    except BadInput as exc:
        if not args.json:
            print_host_checks(host)  # what the files decide, though the preflight cannot run
        print(f"moesweep check: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if read and read["driver_failure"]:
        print(
            f"moesweep check: the nvidia-smi output shows the driver is not usable: {read['driver_failure']}; "
            "fix the driver on that host (reload the module, or reboot after an upgrade), then save nvidia-smi again",
            file=sys.stderr,
        )
        return EXIT_DRIVER_FAILURE
    point = {
        "backend": args.backend,
        "quantization": args.quantization,
        "sglang_version": args.sglang_version,
        "cuda_version": args.cuda_version,
        "flags": dict(_flag(f) for f in args.flag),
        "model": model,
    }
    flag_errors = None
    notes = []
    dry_run = None
    if args.sglang_version is None:
        notes.append("no --sglang-version: rules that depend on the sglang version answer unknown")
    else:
        # as the real parser reads them: `--flag tp=8` is --tp-size 8, an ambiguous prefix is refused
        schema = sglang_flags.load_schema(args.sglang_version)
        point["flags"] = sglang_flags.canonical_flags(schema, point["flags"])
        flag_errors = list(sglang_flags.validate_flags(schema, point["flags"]))
        if point["model"] is None and point["flags"].get("model-path"):
            point["model"] = str(point["flags"]["model-path"])  # a known id, as --model names it
        if args.dry_run and not flag_errors:
            dry_run = dry_run_of(args, schema, point, facts)
    verdict = compat.evaluate(point, facts, kb, flag_errors=flag_errors, dry_run=dry_run)
    verdict["warnings"].extend(notes)
    verdict["warnings"].extend((dry_run or {}).get("assumptions") or [])
    if read:
        verdict["warnings"].extend(f"nvidia-smi output: {w}" for w in read["warnings"])
    refused = verdict["status"] == "unsupported" or host_check_failed(host)
    if args.json:
        if read:
            verdict["facts"] = facts
        if host is not None:
            verdict["host_checks"], verdict["host_checks_undecided"] = host
        print(json.dumps(verdict, indent=2, sort_keys=True))
    else:
        if read:
            print(host_line(read, args.nvidia_smi))
        if refused:
            print(compat.format_refusal(verdict))
        else:
            print(
                f"{verdict['status']}: --moe-runner-backend {verdict['backend']}"
                f" (runs {verdict['effective_backend']}) on {verdict['sm'] or 'unknown SM'}"
            )
        for warning in verdict["warnings"]:
            print(f"warning: {warning}")
        adv = verdict["advice"]
        if adv["env"] or adv["flags"]:
            env = " ".join(f"{k}={v}" for k, v in adv["env"].items())
            print(f"advice: {env} {' '.join(adv['flags'])}".rstrip())
        print_host_checks(host)
    return 1 if refused else 0
