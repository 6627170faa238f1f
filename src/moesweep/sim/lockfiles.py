"""One flock idiom for what several processes on this machine share, on a lock file that stays (empty and
harmless); the kernel drops a lock when its holder exits, so a crashed holder never leaves it held.

* ``held(entry)``: one builder at a time for a cache entry that several pytest workers (or a test and a bench
  script) may build at once, on ``<entry>.lock`` beside it: the caller checks for the finished entry and builds
  it inside (:mod:`.local_server`'s client venvs).
* ``try_hold(path)``: the open lock file when nobody else holds ``path``, else None; the caller keeps it open as
  long as it owns what the lock stands for (tests/conftest.py: a simulated cluster for one pytest session).
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def held(entry: Path) -> Iterator[None]:
    entry.parent.mkdir(parents=True, exist_ok=True)
    with open(entry.with_name(entry.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def try_hold(path: Path) -> IO[str] | None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = open(path, "w")  # noqa: SIM115 - held by the caller until it closes it
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    return lock
