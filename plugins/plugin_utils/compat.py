# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Evaluate a sweep point (MoE backend, quantization, flags, environment, sglang version) against host
facts and the knowledge base ``data/compat.yml``.

``evaluate(point, facts, kb)`` is pure apart from reading the version's flag schema (the one owner of
which ``--moe-runner-backend`` / ``--quantization`` names a version has: ``sglang_flags.load_schema``).
The KB adds what a schema cannot say - what each choice does on each GPU - with a version range on
every rule and citations that resolve to public source URLs. Used by the ``sglang_preflight`` action
and the ``moesweep check`` CLI, so both give the same verdict.
"""

import os
import re
import types

from ansible_collections.moesweep.sweep.plugins.module_utils import sglang_dryrun
from ansible_collections.moesweep.sweep.plugins.module_utils.nvidia_smi import sm_number  # noqa: F401  (re-exported)
from ansible_collections.moesweep.sweep.plugins.plugin_utils import sglang_flags

STATUS_ORDER = {"supported": 0, "caveat": 1, "unknown": 2, "unsupported": 3}  # an undecidable failure outranks a caveat
STATUSES = tuple(STATUS_ORDER)
# When a launch fails, in the order a launch reaches these points (compat.yml `stage`).
STAGES = ("server_args", "scheduler_init", "model_init", "kv_cache", "attention_init", "first_forward")
# The dry run's stages (module_utils/sglang_dryrun.py) as the knowledge base names them, and the stages the knowledge
# base leaves to a dry run that got past them: sglang's own code decided those, so a hand-written rule there yields.
DRY_RUN_STAGES = {"import": "server_args", "arguments": "server_args", "server_args": "server_args",
                  "scheduler_init": "scheduler_init", "model_init": "model_init", "attention_init": "attention_init"}
DRY_RUN_DECIDES = ("server_args", "scheduler_init")
DEFAULT_KB_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "data", "compat.yml")
UNQUANTIZED = ("", "none", "null", "bf16", "bfloat16", "unquant")
_TRUE = ("1", "true", "yes", "on")
_PRIMARY = re.compile(
    r"^https://github\.com/[^/\s]+/[^/\s]+/("
    r"blob/(v\d[\w.-]*|[0-9a-f]{40})/\S+"  # source at a release tag or a commit
    r"|(issues|pull)/\d+)$"  # an issue or pull request
    r"|^https://github\.com/[^/\s]+/[^/\s#]+#[\w-]+$"  # a section of a repository's README
    r"|^https://docs\.nvidia\.com/\S+$"
    r"|^https://huggingface\.co/[^/\s]+/[^/\s]+/blob/[\w.-]+/config\.json$"  # a model's own config.json
    r"|^https://pypi\.org/project/[\w.-]+/[\w.+-]+/$"  # a pinned wheel's release, where no source tag is public
)
MATCH_KEYS = frozenset(
    {
        "sglang",
        "backend",
        "backend_not_in",
        "quant_in",
        "quant_not_in",
        "sm_in",
        "sm_not_in",
        "sm_below",
        "cuda_below",
        "cuda_at_least",
        "toolkit",
        "env_unset",
        "env_true",
        "env_not_true",
        "flags_absent",
        "a2a_in",
        "ep_size_above",
        "flag",
        "also",
        "value",
        "value_above",
        "value_at_most",
        "flag_in",
        "env_not_false",
        "env_false",
        "model_dsa",
        "arch_in",
        "driver_below",
    }
)
SAY_KEYS = frozenset({"id", "status", "stage", "runs", "reason", "error", "cite", "replacement", "resolves_to"})
_FALSE = ("0", "false", "no", "n")  # sglang's EnvBool reads these as false (srt/environ.py EnvBool.parse)


class KBError(ValueError):
    """The knowledge base file is not a valid moesweep compat.yml (names every problem)."""


_KB_CACHE = {}


def load_kb(path=None):
    """Read and validate the YAML knowledge base (controller side; needs PyYAML), with libyaml's safe loader when
    PyYAML has it (the same documents, several times faster). A process that plans many points (sweep_plan) reads
    the file once per version of it (its path, size and modification time); each caller gets its own copy.

    Raises OSError / UnicodeDecodeError / yaml.YAMLError for an unreadable file and KBError naming every
    problem for a file that is not a valid knowledge base."""
    import copy

    import yaml

    path = path or DEFAULT_KB_PATH
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
    if key not in _KB_CACHE:
        with open(path, encoding="utf-8") as handle:
            kb = yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - safe loaders
        problems = kb_problems(kb)
        if problems:
            raise KBError("not a moesweep knowledge base: %s" % "; ".join(problems))
        _KB_CACHE.clear()
        _KB_CACHE[key] = kb
    return copy.deepcopy(_KB_CACHE[key])


def kb_problems(kb):
    """Every problem of a loaded knowledge base, as messages naming the rule and the fix ([] when valid)."""
    if not isinstance(kb, dict):
        return ["the top level is not a mapping"]
    problems = []
    versions = kb.get("versions")
    if not isinstance(versions, dict) or not versions:
        return ["no `versions` mapping (the audited sglang versions)"]
    sources = kb.get("sources")
    if not isinstance(sources, dict):
        return ["no `sources` mapping (citation key -> URL)"]
    for key, url in sources.items():
        if not isinstance(url, str) or not _PRIMARY.match(url):
            problems.append(
                "source %s: %r is not a primary-source URL (GitHub source at a tag or commit, an issue "
                "or pull request, an NVIDIA docs page, a pinned wheel's PyPI release)" % (key, url)
            )
    if not isinstance(kb.get("rules"), list):
        problems.append("no `rules` list")
    for section in ("auto_resolution", "rules", "flags", "launch"):
        for i, rule in enumerate(kb.get(section) or []):
            where = "%s[%d] %s" % (section, i, (rule or {}).get("id", "") if isinstance(rule, dict) else "")
            if not isinstance(rule, dict):
                problems.append("%s: not a mapping" % where)
                continue
            unknown = set(rule) - MATCH_KEYS - SAY_KEYS
            if unknown:
                problems.append("%s: unknown key(s) %s" % (where, ", ".join(sorted(unknown))))
            rng = rule.get("sglang")
            if not isinstance(rng, dict) or not rng.get("min") or not rng.get("max"):
                problems.append("%s: needs sglang: {min, max} (both bounds)" % where)
            else:
                for bound in ("min", "max"):
                    if str(rng[bound]) not in versions:
                        problems.append(
                            "%s: sglang %s %s is not an audited version (%s)"
                            % (where, bound, rng[bound], ", ".join(versions))
                        )
            cites = rule.get("cite")
            if not cites or not isinstance(cites, list):
                problems.append("%s: needs cite: [source keys]" % where)
            else:
                problems.extend("%s: cite %r is not a key of `sources`" % (where, c) for c in cites if c not in sources)
            if section == "auto_resolution":
                if not rule.get("resolves_to"):
                    problems.append("%s: needs resolves_to" % where)
                continue
            status = rule.get("status")
            if status not in STATUSES:
                problems.append("%s: status %r is not one of %s" % (where, status, ", ".join(STATUSES)))
            if status == "unsupported":
                if rule.get("stage") not in STAGES:
                    problems.append("%s: an unsupported rule needs stage: one of %s" % (where, ", ".join(STAGES)))
                if not rule.get("error"):
                    problems.append("%s: an unsupported rule needs the error the launch hits" % where)
    for i, model in enumerate(kb.get("models") or []):
        if not isinstance(model, dict) or not model.get("id") or not model.get("architecture"):
            problems.append("models[%d]: needs id and architecture" % i)
            continue
        if set(model) - {"id", "architecture", "index_topk", "cite"}:
            problems.append(
                "models[%d] %s: unknown key(s) %s"
                % (i, model["id"], ", ".join(sorted(set(model) - {"id", "architecture", "index_topk", "cite"})))
            )
        cites = model.get("cite")
        if not cites or not isinstance(cites, list) or any(c not in sources for c in cites):
            problems.append("models[%d] %s: needs cite: [source keys] (its config.json)" % (i, model["id"]))
    return problems


def known_model(kb, model_id):
    """The models table's entry for a model id (``org/name``; a local path ending in it matches too), or None."""
    text = str(model_id or "").strip().rstrip("/")
    if not text:
        return None
    for model in kb.get("models") or []:
        if text == model["id"] or text.endswith("/" + model["id"]) or text.lower() == model["id"].lower():
            return model
    return None


def parse_version(text):
    """``'0.5.9'`` -> (0, 5, 9); ``'12.8'`` -> (12, 8); ``'0.5.10rc0'`` -> (0, 5, 10). None if unparsable."""
    if text is None:
        return None
    m = re.match(r"^\s*v?(\d+(?:\.\d+)*)", str(text))
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def _in_range(version, rng):
    if not rng:
        return True
    if version is None:
        return None  # unknown
    lo = parse_version(rng.get("min"))
    hi = parse_version(rng.get("max"))
    if lo and version < lo:
        return False
    if hi and version > hi:
        return False
    return True


def normalise_quantization(quant):
    """--quantization value as sglang sees it; ``"none"`` for unquantized (no --quantization)."""
    if quant is None:
        return "none"
    text = str(quant).strip().lower()
    return "none" if text in UNQUANTIZED else text


def quant_families(kb, quant):
    """The set of names a quantization matches in rules: itself plus its family."""
    names = {quant}
    for family, members in (kb.get("quantization_families") or {}).items():
        members = ["null" if m is None else str(m) for m in members]
        if quant in members or quant == family:
            names.add(family)
    return names


def known_versions():
    """The sglang versions that have a real flag schema (data/sglang/flags-<version>.json)."""
    return sglang_flags.list_versions()


def _schema_choices(version, option):
    action = sglang_flags.load_schema(version)["_options"].get(option) or {}
    return list(action.get("choices") or [])


def valid_backends(version):
    """``--moe-runner-backend`` choices of that sglang version, from its real flag schema.

    ``version`` None: the union over every version with a schema (rules then answer unknown).
    Raises ``FileNotFoundError`` naming the known versions for a version without a schema."""
    if version is None:
        out = []
        for known in known_versions():
            out.extend(b for b in _schema_choices(known, "--moe-runner-backend") if b not in out)
        return out
    return _schema_choices(version, "--moe-runner-backend")


def _truthy_env(env, name):
    return str(env.get(name, "")).strip().lower() in _TRUE


def _false_env(env, name):
    return str(env.get(name, "")).strip().lower() in _FALSE


def _flag_number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _matches(rule, ctx):
    """True / False, or None when a fact the rule needs is unknown."""
    unknown = False
    if "backend" in rule and ctx["backend"] not in rule["backend"]:
        return False
    if "backend_not_in" in rule and ctx["backend"] in rule["backend_not_in"]:
        return False
    if "flag" in rule:
        names = [rule["flag"]] + list(rule.get("also") or [])
        hit = [f for f in names if f in ctx["flags"]]
        if not hit:
            return False
        if "value" in rule and not any(str(ctx["flags"][f]) == str(rule["value"]) for f in hit):
            return False
        numbers = [_flag_number(ctx["flags"][f]) for f in hit]
        if "value_above" in rule and not any(n is not None and n > rule["value_above"] for n in numbers):
            return False
        if "value_at_most" in rule and not any(n is not None and n <= rule["value_at_most"] for n in numbers):
            return False
    if "flags_absent" in rule and any(ctx["flags"].get(f) not in (None, False) for f in rule["flags_absent"]):
        return False
    for name, values in (rule.get("flag_in") or {}).items():
        given = ctx["flags"].get(name)
        given = None if given is False else given
        if not any((v is None and given is None) or (v is not None and str(given) == str(v)) for v in values):
            return False
    if "env_not_false" in rule and _false_env(ctx["environment"], rule["env_not_false"]):
        return False
    if "env_false" in rule and not _false_env(ctx["environment"], rule["env_false"]):
        return False
    model = ctx.get("model") or {}
    if "model_dsa" in rule or "arch_in" in rule:
        if not model.get("architecture"):
            return False  # an optional fact: evaluate() warns when the rule would have applied (_unchecked)
        if "model_dsa" in rule and is_dsa(model, ctx["version"]) != bool(rule["model_dsa"]):
            return False
        if "arch_in" in rule and model["architecture"] not in rule["arch_in"]:
            return False
    if "driver_below" in rule:
        if ctx.get("driver") is None:
            return False  # optional fact, as above
        if not ctx["driver"] < parse_version(rule["driver_below"]):
            return False
    sm = ctx["sm"]
    for key in ("sm_in", "sm_not_in", "sm_below"):
        if key in rule and sm is None:
            unknown = True
    if sm is not None:
        if "sm_in" in rule and sm not in rule["sm_in"]:
            return False
        if "sm_not_in" in rule and sm in rule["sm_not_in"]:
            return False
        if "sm_below" in rule and not sm < rule["sm_below"]:
            return False
    if "quant_in" in rule and not (ctx["quant_names"] & set(rule["quant_in"])):
        return False
    if "quant_not_in" in rule and ctx["quant_names"] & set(rule["quant_not_in"]):
        return False
    if "sglang" in rule:
        r = _in_range(ctx["sglang"], rule["sglang"])
        if r is False:
            return False
        if r is None:
            unknown = True
    for key, want_below in (("cuda_below", True), ("cuda_at_least", False)):
        if key in rule:
            if ctx["cuda"] is None:
                unknown = True
            elif (ctx["cuda"] < parse_version(rule[key])) != want_below:
                return False
    if rule.get("toolkit") == "absent" and ctx["cuda"] is not None:
        return False
    env = ctx["environment"]
    if "env_unset" in rule and any(str(env.get(v, "")).strip() for v in rule["env_unset"]):
        return False
    if "env_true" in rule and not _truthy_env(env, rule["env_true"]):
        return False
    if "env_not_true" in rule and _truthy_env(env, rule["env_not_true"]):
        return False
    if "a2a_in" in rule and ctx["a2a"] not in rule["a2a_in"]:
        return False
    if "ep_size_above" in rule and not (ctx["ep_size"] or 1) > rule["ep_size_above"]:
        return False
    return None if unknown else True


def _fill(text, ctx):
    """A rule's reason/error with the point's values: {backend} {backend_enum} {quantization} {sm} {value}
    {architecture} (the model's; a point without a model leaves it out, with the space after it)."""
    if not text:
        return text
    architecture = (ctx.get("model") or {}).get("architecture")
    if not architecture:
        text = text.replace("{architecture} ", "")
    quant = ctx["quant"]
    values = {
        "backend": ctx["backend"],
        "backend_enum": "TRITON_KERNELS" if ctx["backend"] == "triton_kernel" else str(ctx["backend"]).upper(),
        "quantization": "None" if quant == "none" else quant,
        "sm": ctx["sm"] if ctx["sm"] is not None else "?",
        "value": ctx.get("flag_value", "?"),
        "driver_cuda": ctx.get("driver_cuda") or "<the driver's CUDA version, e.g. 12080 for R570>",
        "architecture": architecture or "",
    }
    return re.sub(r"\{(\w+)\}", lambda m: str(values.get(m.group(1), m.group(0))), text)


def _finding(rule, kind, kb, ctx):
    urls = [kb["sources"][key] for key in rule.get("cite") or [] if key in kb["sources"]]
    return {
        "rule": rule.get("id"),
        "kind": kind,
        "status": rule.get("status", "supported"),
        "stage": rule.get("stage"),
        "runs": rule.get("runs"),
        "reason": _fill(rule.get("reason"), ctx),
        "error": _fill(rule.get("error"), ctx),
        "citation": " ".join(urls) or None,
        "citations": urls,
    }


def _normalise_flags(flags):
    out = {}
    for key, value in (flags or {}).items():
        name = key if str(key).startswith("-") else "--" + str(key).replace("_", "-")
        out[name] = value
    return out


def _canonical_flags(flags, version):
    """The point's flags keyed by every option string of the option each name resolves to (argparse prefix
    matching included, as the version's real parser resolves it), so a rule naming ``--ep-size`` matches ``ep``
    and ``expert-parallel-size`` alike. Names the schema cannot resolve stay as given (the schema check refuses
    them separately)."""
    if version is None or str(version) not in sglang_flags.list_versions():
        return flags
    schema = sglang_flags.load_schema(str(version))
    out = dict(flags)
    for name, value in flags.items():
        try:
            found = sglang_flags.resolve_option(schema, name)
        except sglang_flags.SchemaError:
            continue
        if found:
            for option in found[0]["option_strings"]:
                out.setdefault(option, value)
    return out


# The architectures sglang gives DeepSeek Sparse Attention (DSA) handling, when the model's config.json also
# carries index_topk: 0.5.9 is_deepseek_nsa (srt/configs/model_config.py:54-67), 0.5.23 is_deepseek_dsa
# (srt/configs/model_config.py:191-211).
_DSA_059 = (
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "DeepseekV3ForCausalLMNextN",
    "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration",
    "GlmMoeDsaForCausalLM",
)
DSA_ARCHITECTURES = {
    "0.5.9": _DSA_059,
    "0.5.23": _DSA_059
    + (
        "GlmMoeDsaForCausalLMNextN",
        "Glm5NextForConditionalGenerationNextN",
        "Glm5NextForConditionalGeneration",
        "LongcatFlashForCausalLM",
        "LongcatFlashForCausalLMNextN",
        "Dots3NoteForCausalLM",
        "Dots3NoteForCausalLMNextN",
        "HYV4ForCausalLM",
        "HYV4ForCausalLMNextN",
    ),
}


def model_facts(model):
    """``{architecture, index_topk}`` (index_topk: whether the config has one) from a model description: a
    parsed config.json (``architectures``, ``index_topk``) or an already reduced ``{architecture, index_topk}``;
    ``{}`` when unknown."""
    if not isinstance(model, dict) or not model:
        return {}
    if "architecture" in model:
        return {"architecture": str(model["architecture"]), "index_topk": bool(model.get("index_topk"))}
    archs = model.get("architectures")
    if not isinstance(archs, list) or not archs or not archs[0]:
        return {}
    return {"architecture": str(archs[0]), "index_topk": model.get("index_topk") is not None}


def _point_model(kb, model):
    """A point's ``model``: a config.json dict, a reduced ``{architecture, index_topk}``, or a model id / path
    the models table knows."""
    if isinstance(model, str):
        known = known_model(kb, model)
        return model_facts(known) if known else {}
    return model_facts(model)


def is_dsa(model, version):
    """Whether sglang ``version`` runs the model with DSA (None: the model or the version is unknown)."""
    if not model.get("architecture") or str(version) not in DSA_ARCHITECTURES:
        return None
    return bool(model.get("index_topk")) and model["architecture"] in DSA_ARCHITECTURES[str(version)]


def _toolkit_release(point, facts):
    if point.get("cuda_version"):
        return point["cuda_version"]
    toolkit = facts.get("cuda_toolkit")
    return toolkit.get("release") if isinstance(toolkit, dict) else None


def _context(point, facts, kb, backend):
    facts = facts or {}
    quant = normalise_quantization(point.get("quantization"))
    flags = _canonical_flags(_normalise_flags(point.get("flags")), point.get("sglang_version"))
    if quant == "none" and flags.get("--quantization") not in (None, False):
        quant = normalise_quantization(flags["--quantization"])
    sm = point.get("sm") or facts.get("sm")
    try:
        ep_size = int(flags.get("--ep-size", flags.get("--ep", 1)) or 1)
    except (TypeError, ValueError):
        ep_size = 1
    env = point.get("environment") or {}
    return {
        "backend": backend,
        "quant": quant,
        "quant_names": quant_families(kb, quant),
        "flags": flags,
        "environment": env if isinstance(env, dict) else {},
        "sm": sm_number(sm),
        "sglang": parse_version(point.get("sglang_version")),
        "version": point.get("sglang_version"),
        "cuda": parse_version(_toolkit_release(point, facts)),
        "a2a": str(flags.get("--moe-a2a-backend", point.get("moe_a2a_backend") or "none")),
        "ep_size": ep_size,
        "model": _point_model(kb, point.get("model")),
        "driver": parse_version(point.get("driver_version") or facts.get("driver_version")),
        "driver_cuda": _cuda_int(facts.get("driver_cuda_version")),
    }


def _cuda_int(release):
    """``'12.8'`` -> ``'12080'``: how cudaDriverGetVersion reports it (torch prints that number)."""
    version = parse_version(release)
    if not version or len(version) < 2:
        return None
    return str(version[0] * 1000 + version[1] * 10)


def resolve_auto(kb, ctx):
    """The auto_resolution entry that applies (or None: the launch never resolves `auto`)."""
    for entry in kb.get("auto_resolution") or []:
        if _matches(entry, dict(ctx, backend="auto")):
            return entry
    return None


def _backend_findings(kb, ctx):
    findings = []
    for rule in kb.get("rules") or []:
        m = _matches(rule, ctx)
        if m:
            findings.append(_finding(rule, "backend", kb, ctx))
        elif m is None and rule.get("status") == "unsupported":
            f = _finding(rule, "backend", kb, ctx)
            f["status"] = "unknown"
            f["reason"] = "needs a fact that is missing (SM, sglang or CUDA version): " + (f["reason"] or "")
            findings.append(f)
    return findings


def _worst(findings):
    status = None
    for f in findings:
        if status is None or STATUS_ORDER[f["status"]] > STATUS_ORDER[status]:
            status = f["status"]
    return status


def _decisive(findings):
    """The unsupported finding the launch reaches first (earliest stage, then file order)."""
    failing = [f for f in findings if f["status"] == "unsupported"]
    if not failing:
        return None
    return min(
        failing,
        key=lambda f: (
            STAGES.index(f["stage"]) if f.get("stage") in STAGES else len(STAGES),
            # argparse refuses the command line before anything else runs; within a stage, what sglang's own
            # code raised is what the launch prints
            {"input": 0, "dryrun": 1}.get(f["kind"], 2),
        ),
    )


def _backend_status(kb, ctx):
    """(status, effective backend, findings) of the backend alone (no flags), following auto."""
    findings = []
    effective = ctx["backend"]
    if effective == "auto":
        entry = resolve_auto(kb, ctx)
        if entry:
            effective = entry["resolves_to"]
            f = _finding(entry, "auto", kb, ctx)
            f["status"] = "supported"
            f["reason"] = "auto resolves to %s%s" % (effective, ": " + f["reason"] if f["reason"] else "")
            findings.append(f)
    rules = _backend_findings(kb, dict(ctx, backend=effective))
    findings.extend(rules)
    decisive = _decisive(rules)
    runs = [f["runs"] for f in ([decisive] if decisive else rules) if f.get("runs")]
    if runs:
        effective = runs[0]
    status = _worst(findings)
    if not rules:
        status = "unknown"
        findings.append(
            {
                "rule": "not-audited",
                "kind": "backend",
                "status": "unknown",
                "stage": None,
                "runs": None,
                "reason": "no rule of the knowledge base decides %s with %s on %s for sglang %s"
                % (
                    effective,
                    ctx["quant"],
                    "sm%s" % ctx["sm"] if ctx["sm"] else "an unknown SM",
                    ".".join(map(str, ctx["sglang"])) if ctx["sglang"] else "(unknown version)",
                ),
                "error": None,
                "citation": None,
                "citations": [],
            }
        )
    return status, effective, findings


def advise(facts, kb):
    """Launch advice (env vars, flags) from host facts; returned, never applied."""
    facts = facts or {}
    out = {"env": {}, "flags": [], "notes": [], "citations": []}
    virt = (facts.get("virtualization") or {}).get("kind")
    inter = facts.get("interconnect") or ""
    for item in kb.get("advice") or []:
        if item.get("interconnect_prefix") and not inter.startswith(item["interconnect_prefix"]):
            continue
        if item.get("virtualization_kind") and virt not in item["virtualization_kind"]:
            continue
        if (facts.get("gpu_count") or 0) < item.get("gpu_count_min", 0):
            continue
        out["env"].update(item.get("env") or {})
        out["flags"].extend(f for f in item.get("flags") or [] if f not in out["flags"])
        out["notes"].append(item.get("reason"))
        out["citations"].extend(kb["sources"][c] for c in item.get("cite") or [] if c in kb.get("sources", {}))
    return out


def _input_finding(rule, reason, error=None, citation=None):
    return {
        "rule": rule,
        "kind": "input",
        "status": "unsupported",
        "stage": "server_args",
        "runs": None,
        "reason": reason,
        "error": error,
        "citation": citation,
        "citations": [citation] if citation else [],
    }


def _schema_findings(backend, quant, version):
    """Refusals the version's real CLI schema gives: the backend or quantization is not a choice."""
    out = []
    label = "data/sglang/flags-%s.json" % version
    choices = valid_backends(version)
    if backend not in choices:
        out.append(
            _input_finding(
                "backend-choice",
                "unknown --moe-runner-backend %r for sglang %s; valid choices: %s"
                % (backend, version, ", ".join(choices)),
                "argparse: invalid choice: %r (exit 2)" % backend,
                label,
            )
        )
    quants = _schema_choices(version, "--quantization")
    if quant != "none" and quants and quant not in quants:
        out.append(
            _input_finding(
                "quantization-choice",
                "unknown --quantization %r for sglang %s; valid choices: %s" % (quant, version, ", ".join(quants)),
                "argparse: invalid choice: %r (exit 2)" % quant,
                label,
            )
        )
    return out


# Where a scheduler process first selects its GPU, per audited version (what the dry run cites when it runs).
SET_DEVICE_LINES = {
    "0.5.9": ("sglang/srt/model_executor/model_runner.py", 734),
    "0.5.23": ("sglang/srt/distributed/bootstrap.py", 133),
}


def _flag_int(flags, names, default):
    for name in names:
        value = flags.get(name)
        if value not in (None, False):
            try:
                return int(value)
            except (TypeError, ValueError):
                return default
    return default


def gpu_layout_finding(ctx, facts):
    """The ranks' GPUs against the host's, from the launch's flags, where no dry run decided it: the node's scheduler
    processes take the GPUs ``sglang_dryrun._gpu_ids`` computes (sglang's own formula); one beyond what the process
    sees dies at its ``set_device`` with torch's "invalid device ordinal". None when it fits or the count is unknown."""
    count = (facts or {}).get("gpu_count")
    if not count:
        return None
    flags = ctx["flags"]
    layout = types.SimpleNamespace(
        tp_size=_flag_int(flags, ("--tp-size", "--tensor-parallel-size"), 1),
        pp_size=_flag_int(flags, ("--pp-size", "--pipeline-parallel-size"), 1),
        dp_size=_flag_int(flags, ("--dp-size", "--data-parallel-size"), 1),
        nnodes=_flag_int(flags, ("--nnodes",), 1), node_rank=_flag_int(flags, ("--node-rank",), 0),
        base_gpu_id=_flag_int(flags, ("--base-gpu-id",), 0), gpu_id_step=_flag_int(flags, ("--gpu-id-step",), 1),
        enable_dp_attention=flags.get("--enable-dp-attention") not in (None, False))
    ids = sglang_dryrun._gpu_ids(layout)
    seen = sglang_dryrun._visible(int(count), ctx["environment"])
    if not ids or max(ids) < seen:
        return None
    file_, line = SET_DEVICE_LINES.get(str(ctx.get("version")), (None, None))
    url = sglang_dryrun.error_url(ctx.get("version"), {"file": file_, "line": line}) if file_ else None
    return {
        "rule": "gpu-layout",
        "kind": "launch",
        "status": "unsupported",
        "stage": "scheduler_init",
        "runs": None,
        "reason": "the node's scheduler processes take GPUs %s (tp %d x pp %d x dp %d, from GPU %d in steps of %d); "
                  "the process sees %d%s: fit the parallel sizes to the GPUs" % (
                      ids, layout.tp_size, layout.pp_size, layout.dp_size if not layout.enable_dp_attention else 1,
                      layout.base_gpu_id, layout.gpu_id_step, seen,
                      " (CUDA_VISIBLE_DEVICES)" if ctx["environment"].get("CUDA_VISIBLE_DEVICES") is not None else ""),
        "error": "RuntimeError: " + sglang_dryrun.INVALID_DEVICE.splitlines()[0],
        "citation": url,
        "citations": [url] if url else [],
    }


def dry_run_summary(result):
    """What a verdict, a record and the report keep of a dry run (``module_utils/sglang_dryrun.py``): the
    verdict, where it stopped and sglang's own message with its line, the arguments sglang resolved, its notices."""
    if not result:
        return None
    err = result.get("error") or {}
    out = {
        "verdict": result.get("verdict"),
        "stage": result.get("stage"),
        "sglang_version": result.get("sglang_version"),
        "where": result.get("where"),
        "gpus": result.get("gpus"),
        "summary": sglang_dryrun.summary(result),
        "elapsed_s": result.get("elapsed_s"),
        "wall_s": result.get("wall_s"),
        "model_source": result.get("model_source"),
        "reason": result.get("reason"),
        "stages_run": result.get("stages_run") or [],
        "resolved": result.get("key_fields") or {},
        "notices": [n.get("message") for n in result.get("notices") or [] if n.get("message")][:12],
        "quantization_gate": result.get("quantization_gate"),
        "attention_gates": result.get("attention_gates"),
        "model_quantization": result.get("model_quantization"),
        "not_checked": [result["scheduler_init"]] if result.get("scheduler_init") else None,
        "assumptions": result.get("assumptions"),
    }
    if err:
        out["error"] = {k: err.get(k) for k in ("type", "message", "file", "line", "function", "detail") if k in err}
        out["error"]["url"] = sglang_dryrun.error_url(result.get("sglang_version"), err)
    return {k: v for k, v in out.items() if v is not None}


def _with_dry_run(findings, result):
    """The findings once sglang's own argument handling has spoken: its refusal is a finding (sglang's exception,
    the line it came from); a knowledge-base rule of a stage the dry run got through yields (the real code decided
    there), and a refusal among them is named as a rule that does not hold. An undecided dry run decides the stages
    it did get through, and says where it stopped. Returns (findings, warnings)."""
    result = result or {}
    verdict = result.get("verdict")
    version = result.get("sglang_version")
    notes = []
    passed = {DRY_RUN_STAGES[s] for s in result.get("stages_run") or [] if s in DRY_RUN_STAGES} & \
        set(DRY_RUN_DECIDES)
    if verdict == "accepted":
        passed = set(DRY_RUN_DECIDES)
    elif verdict != "refused":
        notes.append("sglang's own argument handling was not run to the end (%s): the knowledge base's rules decide "
                     "the stages it did not reach" % (result.get("reason") or "no answer"))
    if result.get("scheduler_init"):
        passed.discard("scheduler_init")
        notes.append("the dry run did not check the ranks' GPUs against the host's: %s" % result["scheduler_init"])
    stage = DRY_RUN_STAGES.get(result.get("stage") or "", "server_args")
    kept = []
    for f in findings:
        if f["kind"] != "input" and f.get("stage") in passed:
            if f["status"] == "unsupported":
                notes.append("knowledge base rule %s expected the launch to fail at %s; sglang %s's own argument "
                             "handling got past that stage, so the rule does not hold here (%s)"
                             % (f["rule"], f["stage"], version, f["reason"]))
            continue
        kept.append(f)
    if verdict == "refused":
        err = result.get("error") or {}
        url = sglang_dryrun.error_url(version, err)
        where = "%s:%s" % (err["file"], err["line"]) if err.get("file") and err.get("line") else err.get("file")
        message = (err.get("message") or "").strip()
        kept.append({
            "rule": "sglang-dry-run",
            "kind": "dryrun",
            "status": "unsupported",
            "stage": stage,
            "runs": None,
            "reason": "sglang %s's own argument handling refuses this launch at %s%s%s" % (
                version, result.get("stage"), " (%s)" % where if where else "",
                ": " + err["detail"] if err.get("detail") else ""),
            "error": ("%s: %s" % (err.get("type"), message) if err.get("type") not in (None, "SystemExit")
                      else message) or None,
            "citation": url,
            "citations": [url] if url else [],
        })
    return kept, notes


def evaluate(point, facts, kb, flag_errors=None, dry_run=None):
    """Verdict for one sweep point.

    point: {backend, quantization, sglang_version, cuda_version?, flags: {name: value}, environment?:
    {VAR: value} (the unit's environment), sm?, model?: the model's config.json (a dict), a reduced
    {architecture, index_topk} or a model id of the KB's `models`, driver_version?: e.g. "570.133.20"}
    facts: the gpu_facts dict (``ansible_facts.moesweep_gpu``) or {} (then ``point['sm']`` is used)
    flag_errors: errors from the version's flag schema (sglang_flags.validate_flags), if available.
    dry_run: the answer of the dry run of sglang's own argument handling on this launch (``sglang_dryrun``), if
    one ran: its refusal decides; the rules of the stages it got past yield to it (``_with_dry_run``); ``auto``
    takes the MoE runner it resolved to, where it resolved to one.
    Returns {status, backend, effective_backend, sm, quantization, sglang_version, error, stage, reasons,
    citations, alternatives, warnings, advice, decided_by}: ``error``/``stage`` are those of the failure the
    launch would reach first (None unless unsupported), ``decided_by`` its kind (``launch`` when the failure is
    not the MoE runner's, so no other backend is offered).
    """
    facts = facts or {}
    backend = point.get("backend")
    version = point.get("sglang_version")
    verdict = {
        "status": "supported",
        "backend": backend,
        "effective_backend": backend,
        "sm": None,
        "quantization": None,
        "sglang_version": version,
        "error": None,
        "stage": None,
        "reasons": [],
        "citations": [],
        "alternatives": [],
        "warnings": [],
        "advice": advise(facts, kb),
        "decided_by": None,
        "dry_run": dry_run_summary(dry_run),
    }

    def refuse(finding):
        verdict.update(status="unsupported", reasons=[finding], error=finding["error"], stage=finding["stage"])
        return verdict

    if isinstance(backend, (list, tuple, dict)) or not isinstance(backend, str) or not backend:
        return refuse(_input_finding("input", "backend must be one name (a string), got %r" % (backend,)))
    if version is not None and str(version) not in known_versions():
        return refuse(
            _input_finding(
                "sglang-version",
                "sglang %s has no flag schema (known versions: %s): its --moe-runner-backend choices and behaviour are "
                "unknown; use one of those versions, or extract the schema with scripts/extract_sglang_flags.py and "
                "audit it into data/compat.yml" % (version, ", ".join(known_versions()) or "none"),
            )
        )
    resolved = ((dry_run or {}).get("key_fields") or {}).get("moe_runner_backend")
    if dry_run and dry_run.get("verdict") == "accepted" and backend == "auto" and resolved not in (None, "auto"):
        backend = resolved  # ServerArgs resolved `auto` itself (a model-specific default): that runner runs
    model_quant = (dry_run or {}).get("model_quantization")
    if model_quant and normalise_quantization(point.get("quantization")) == "none" and \
            (point.get("flags") or {}).get("quantization") in (None, False):
        point = dict(point, quantization=model_quant)  # the model's config.json quantizes it: that method runs
    ctx = _context(point, facts, kb, backend)
    verdict["sm"] = "sm%d" % ctx["sm"] if ctx["sm"] is not None else None
    verdict["quantization"] = ctx["quant"]
    if facts.get("mixed_models"):
        verdict["warnings"].append(
            "mixed GPU models on this host (%s): the SM is not a single value"
            % ", ".join(facts.get("gpu_models") or [])
        )

    findings = _schema_findings(backend, ctx["quant"], version) if version is not None else []
    if version is not None and str(version) not in (kb.get("versions") or {}):
        findings.append(
            {
                "rule": "version-not-audited",
                "kind": "backend",
                "status": "unknown",
                "stage": None,
                "runs": None,
                "reason": "sglang %s has a flag schema but the knowledge base audits only %s: its backends' "
                "behaviour is unknown until its wheels are read into data/compat.yml"
                % (version, ", ".join(kb.get("versions") or {})),
                "error": None,
                "citation": None,
                "citations": [],
            }
        )
        status, effective = "unknown", backend
    elif findings:
        status, effective = "unsupported", backend
    else:
        status, effective, bfind = _backend_status(kb, ctx)
        findings.extend(bfind)
    verdict["effective_backend"] = effective

    flag_findings = []
    for rule in kb.get("flags") or []:
        m = _matches(rule, ctx)
        if m:
            hit = [f for f in [rule["flag"]] + list(rule.get("also") or []) if f in ctx["flags"]]
            f = _finding(rule, "flag", kb, dict(ctx, flag_value=ctx["flags"][hit[0]] if hit else "?"))
            if rule.get("replacement"):
                f["replacement"] = rule["replacement"]
            flag_findings.append(f)
    launch_findings = []
    for rule in kb.get("launch") or []:
        m = _matches(rule, dict(ctx, backend=effective))
        if m:
            launch_findings.append(_finding(rule, "launch", kb, ctx))
        elif m is None and rule.get("status") == "unsupported":
            f = _finding(rule, "launch", kb, ctx)
            f["status"] = "unknown"
            f["reason"] = "needs a fact that is missing (SM, sglang or CUDA version): " + (f["reason"] or "")
            launch_findings.append(f)
    layout = gpu_layout_finding(ctx, facts)
    if layout:
        launch_findings.append(layout)
    # Within one stage, in the order a launch meets them: what the flags set up before any forward (the
    # allreduce-fusion workspace at kernel warm-up), then a layer's dense GEMMs and attention, then its MoE.
    at = sum(1 for f in findings if f["kind"] == "input")
    findings[at:at] = flag_findings + launch_findings
    verdict["warnings"].extend(_unchecked(kb, dict(ctx, backend=effective)))
    for err in flag_errors or []:
        findings.append(
            _input_finding(
                "flag-schema",
                err,
                "rejected by the version's real argparse schema",
                "data/sglang/flags-%s.json" % version,
            )
        )

    if dry_run is not None:
        before = sum(1 for f in findings if f["kind"] in ("backend", "auto"))
        findings, notes = _with_dry_run(findings, dry_run)
        verdict["warnings"].extend(notes)
        left = [f for f in findings if f["kind"] in ("backend", "auto")]
        if len(left) < before:
            # a backend rule yielded to the real code: what is left of the backend's rules decides, and with none
            # left the later stages are not known
            status = _worst(left) if left else "unknown"
    worst = _worst(findings + [{"status": status}])
    verdict["status"] = worst
    decisive = _decisive(findings)
    if decisive:
        verdict["error"], verdict["stage"] = decisive["error"], decisive["stage"]
    reasons = [f for f in findings if f["status"] != "supported"]
    reasons.sort(key=lambda f: (f is not decisive, -STATUS_ORDER[f["status"]]))
    verdict["reasons"] = reasons
    for f in findings:
        for url in f.get("citations") or []:
            if url not in verdict["citations"]:
                verdict["citations"].append(url)
        if f["status"] == "caveat":
            verdict["warnings"].append("%s: %s" % (f["rule"], f["reason"]))
    verdict["decided_by"] = decisive["kind"] if decisive else None
    if worst in ("unsupported", "unknown") and verdict["decided_by"] != "launch":
        verdict["alternatives"] = alternatives(point, facts, kb, exclude=backend)
    return verdict


def _unchecked(kb, ctx):
    """Warnings for launch rules that need an optional fact the point lacks (the model, the driver) and would
    refuse or caveat the launch if that fact were as they name it."""
    out = []
    for rule in kb.get("launch") or []:
        missing = []
        probe = dict(ctx)
        if ("model_dsa" in rule or "arch_in" in rule) and not (ctx.get("model") or {}).get("architecture"):
            missing.append(
                "the model's architecture (--model-config FILE, a known --model id, or the model's "
                "config.json on the host)"
            )
            version = str(ctx.get("version"))
            arch = (rule.get("arch_in") or list(DSA_ARCHITECTURES.get(version) or ["?"]))[0]
            probe["model"] = {"architecture": arch, "index_topk": bool(rule.get("model_dsa", True))}
        if "driver_below" in rule and ctx.get("driver") is None:
            missing.append("the NVIDIA driver version (gpu_facts driver_version, --driver or an nvidia-smi output)")
            probe["driver"] = (0,)
        if missing and rule.get("status") in ("unsupported", "caveat") and _matches(rule, probe):
            out.append(
                "not checked, for lack of %s: %s (%s)"
                % (" and ".join(missing), rule["id"], _fill(rule.get("reason"), ctx))
            )
    return out


def alternatives(point, facts, kb, exclude=None):
    """Backends of the same sglang version that are supported (or only caveated) for this SM/quant and
    really run themselves (a choice whose path falls through to another is not offered; ``auto`` is, with
    what it resolves to)."""
    version = point.get("sglang_version")
    if version is not None and (str(version) not in known_versions() or str(version) not in kb.get("versions", {})):
        return []
    out = []
    for name in valid_backends(version):
        if name == exclude:
            continue
        ctx = _context(point, facts or {}, kb, name)
        status, effective, _ = _backend_status(kb, ctx)
        if status in ("supported", "caveat") and (name == "auto" or effective == name):
            out.append({"backend": name, "status": status, "resolves_to": effective if name == "auto" else None})
    out.sort(key=lambda a: (STATUS_ORDER[a["status"]], a["backend"] != "auto", a["backend"]))
    return out


def format_refusal(verdict):
    """One message naming backend, SM, reason, the error the launch hits first, citations and alternatives."""
    lines = [
        "sweep point refused: --moe-runner-backend %s%s on %s, quantization %s, sglang %s"
        % (
            verdict["backend"],
            "" if verdict["effective_backend"] == verdict["backend"] else " (runs %s)" % verdict["effective_backend"],
            verdict["sm"] or "unknown SM",
            verdict["quantization"],
            verdict["sglang_version"] or "unknown",
        )
    ]
    if verdict.get("error"):
        lines.append(
            "the launch would fail%s with: %s"
            % (" at %s" % verdict["stage"].replace("_", " ") if verdict.get("stage") else "", verdict["error"])
        )
    for r in verdict["reasons"]:
        if r["status"] not in ("unsupported", "unknown"):
            continue
        lines.append("- [%s] %s: %s" % (r["status"], r["rule"], r["reason"]))
        if r.get("error") and r["error"] != verdict.get("error"):
            lines.append("  also: %s" % r["error"])
        for url in r.get("citations") or ([r["citation"]] if r.get("citation") else []):
            lines.append("  source: %s" % url)
        if r.get("replacement"):
            lines.append("  use instead: %s" % ", ".join("%s -> %s" % kv for kv in r["replacement"].items()))
    alts = [
        a["backend"]
        + (" (-> %s)" % a["resolves_to"] if a.get("resolves_to") else "")
        + (" (caveat)" if a["status"] == "caveat" else "")
        for a in verdict["alternatives"]
    ]
    if verdict.get("decided_by") == "launch":
        lines.append(
            "compatible alternatives: another --moe-runner-backend does not avoid this failure (it is not the "
            "MoE runner's); apply the fix above"
        )
    else:
        lines.append("compatible alternatives: %s" % (", ".join(alts) if alts else "none known"))
    return "\n".join(lines)
