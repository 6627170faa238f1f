"""One builder at a time for a cache entry that several pytest workers (or a test and a bench script) may build at
once: an exclusive ``flock`` on ``<entry>.lock`` beside the entry, held while the caller checks for the finished
entry and builds it. The lock file stays (it is empty and harmless); the kernel drops the lock when its holder
exits, so a crashed builder never leaves it held."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def held(entry: Path) -> Iterator[None]:
    entry.parent.mkdir(parents=True, exist_ok=True)
    with open(entry.with_name(entry.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
