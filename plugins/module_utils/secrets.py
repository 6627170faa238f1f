# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Which values are secret, and how they are kept out of everything moesweep prints or writes.

One owner for the idea: the server role splits its environment with these functions, the preflight keeps
secrets out of the launch plan, the artifact collector redacts the unit's environment file on the host,
and the results callback and the Python API redact records with ``redact``. Stdlib only (target and
controller).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

REDACTED = "<redacted>"
# Names that hold credentials: HF_TOKEN, HUGGING_FACE_HUB_TOKEN, OPENAI_API_KEY, AWS_SECRET_ACCESS_KEY,
# sglang_server_api_key, NGC_API_KEY, *_PASSWORD, ... (matched on the whole name, case-insensitively).
# "token" only as the last word (HF_TOKEN, GITHUB_TOKEN), so figures like joules_per_token_mean stay public.
_SECRET_NAME_RE = re.compile(
    r"(^|[_\-.])((secret|password|passwd|passphrase|api[_\-]?key|apikey|private[_\-]?key|credentials?|auth|"
    r"bearer|vault[_\-]?pass(word)?)($|[_\-.])|token$)",
    re.I,
)
# Values that are credentials whatever their name: Hugging Face tokens, OpenAI-style keys, bearer headers.
_SECRET_VALUE_RE = re.compile(r"\b(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_\-]{16,}|Bearer\s+[A-Za-z0-9._\-]{8,})")


def is_secret_name(name):
    return bool(_SECRET_NAME_RE.search(str(name)))


def secret_items(mapping):
    """The items of ``mapping`` whose name is secret."""
    return {k: v for k, v in (mapping or {}).items() if is_secret_name(k)}


def public_items(mapping):
    """The items of ``mapping`` whose name is not secret."""
    return {k: v for k, v in (mapping or {}).items() if not is_secret_name(k)}


def secret_keys(mapping):
    return sorted(k for k in (mapping or {}) if is_secret_name(k))


def redact(obj, known=()):
    """A copy of ``obj`` (dicts, lists, strings) with secret-named string values, the ``known`` secret strings
    and credential-looking substrings replaced by ``<redacted>`` (figures such as ``joules_per_token`` are
    numbers and stay)."""
    known = [k for k in known if isinstance(k, str) and len(k) >= 4]
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if is_secret_name(key) and isinstance(value, str) and value:
                out[key] = REDACTED
            else:
                out[key] = redact(value, known)
        return out
    if isinstance(obj, (list, tuple)):
        return [redact(v, known) for v in obj]
    if isinstance(obj, str):
        text = obj
        for secret in known:
            text = text.replace(secret, REDACTED)
        return _SECRET_VALUE_RE.sub(REDACTED, text)
    return obj


def redact_text(text, known=()):
    return redact(str(text), known)


def redact_env_file(text):
    """A systemd EnvironmentFile (``KEY=value`` lines, comments) with the values of secret names replaced."""
    out = []
    for line in (text or "").splitlines():
        key, sep, _value = line.partition("=")
        if sep and not line.lstrip().startswith("#") and is_secret_name(key.strip()):
            out.append("%s=%s" % (key, REDACTED))
        else:
            out.append(redact_text(line))
    return "\n".join(out) + ("\n" if text and text.endswith("\n") else "")
