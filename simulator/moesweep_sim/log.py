"""The simulated server's log output, in the formats sglang installs.

* sglang: ``logging.basicConfig(format="[%(asctime)s{prefix}] %(message)s", datefmt="%Y-%m-%d %H:%M:%S")``
  on stderr, prefix `` TPn`` in scheduler processes (``configure_logger``, sglang/srt/utils/common.py, both
  versions);
* uvicorn, as ``set_uvicorn_logging_configs`` (same file) configures it: ``[%(asctime)s] %(levelprefix)s
  %(message)s`` on stderr, the access log ``... %(client_addr)s - "%(request_line)s" %(status_code)s`` on stdout;
* before ``configure_logger`` runs, a ``logger.warning`` goes to logging's last-resort handler: the bare message
  on stderr (``bare``).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from http import HTTPStatus

from . import templates as T


class Log:
    lock = threading.Lock()

    @staticmethod
    def ts() -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S")

    @classmethod
    def write(cls, text: str, stream=None):
        stream = stream or sys.stderr
        with cls.lock:
            stream.write(text)
            stream.flush()

    @staticmethod
    def logged(msg: str) -> str:
        """The message as a logging handler writes it: sglang's lines are logging records (configure_logger), so a
        record factory the interpreter installs (a sitecustomize on PYTHONPATH, as the server role's log filter is)
        has its say, as it would in the real server."""
        record = logging.getLogRecordFactory()("sglang", logging.INFO, __file__, 0, msg, None, None)
        return record.getMessage()

    @classmethod
    def line(cls, msg: str, prefix: str = ""):
        cls.write(f"[{cls.ts()}{prefix}] {cls.logged(msg)}\n")

    @classmethod
    def bare(cls, msg: str):
        cls.write(cls.logged(msg) + "\n")

    @classmethod
    def uvicorn(cls, msg: str, level: str = "INFO"):
        levelprefix = (level + ":").ljust(9)  # uvicorn ColourizedFormatter: levelname + ":" padded
        cls.write(T.render(T.UVICORN_DEFAULT_FMT, asctime=cls.ts(), levelprefix=levelprefix, message=msg) + "\n")

    @classmethod
    def access(cls, client: str, request_line: str, status: int):
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = ""
        cls.write(T.render(T.UVICORN_ACCESS_FMT, asctime=cls.ts(), levelprefix="INFO:    ", client_addr=client,
                           request_line=request_line, status_code=f"{status} {phrase}") + "\n", sys.stdout)
