# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""moesweep: keep the SGLang server's API keys out of its log, and so out of the journal.

sglang logs its whole ServerArgs at start - 0.5.9 ``logger.info(f"{server_args=}")`` (a dataclass repr,
``api_key='...'``), 0.5.23 ``server_args={...}`` (``'api_key': '...'``; python/sglang/srt/entrypoints/engine.py
in both) - and the unit's stderr goes to the journal, which the adm and systemd-journal groups read. The unit puts
this directory first on PYTHONPATH when the server has a key, so every interpreter of the server (its schedulers and
detokenizer too: they inherit the environment) loads this file at start, and every log record's message is given
with the keys' values replaced. Nothing else of the server changes.
"""

import logging
import re

_KEY = re.compile(r"""(\b(?:admin_)?api_key['"]?\s*[=:]\s*)(['"])(?:(?!\2)[^\n])+\2""")


def redact(text):
    """``text`` with the value of every ``api_key`` / ``admin_api_key`` field replaced by ``<redacted>``."""
    return _KEY.sub(lambda m: m.group(1) + m.group(2) + "<redacted>" + m.group(2), text)


_factory = logging.getLogRecordFactory()


def _record(*args, **kwargs):
    record = _factory(*args, **kwargs)
    message = record.getMessage()
    if "api_key" in message:
        record.msg, record.args = redact(message), None
    return record


logging.setLogRecordFactory(_record)
