"""The state of the machine's simulated hosts, shared by every cluster and every process on the machine.

Layout under ``STATE_DIR`` (``/run/moesweep/sim``; gone at reboot, like the namespaces themselves)::

    .lock                       serialises every change (parallel test sessions, molecule, a user's shell)
    hosts.json                  every running host, all clusters
    hosts/<host>/               a host's console log and its read-only /etc/moesweep-sim
    payload/<cluster>/          the simulator tree the cluster's hosts bind-mount
    clusters/<cluster>/cluster.json   what `sim up` wrote outside the state directory (its inventories)

Everything removed from here goes through :func:`remove_tree` / :func:`remove_file`, which resolve the path and
refuse anything that is not strictly inside the state directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import shutil
import sys
from dataclasses import asdict, fields
from pathlib import Path

from moesweep.sim.model import Host, SimError, check_cluster_name, record_problem
from moesweep.util import atomic_write_text

STATE_DIR = Path(os.environ.get("MOESWEEP_SIM_STATE_DIR", "/run/moesweep/sim"))


def state_dir() -> Path:
    return STATE_DIR


def locked(fn):
    """Serialise state changes between processes: the state file, host indices and cgroup names are shared by
    every cluster on the machine."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        with open(STATE_DIR / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                return fn(*args, **kwargs)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    return wrapper


# ---------------------------------------------------------------- paths


def inside(path: Path, root_ok: bool = False) -> Path:
    """``path`` resolved, when it lies strictly inside the state directory (or is it, with ``root_ok``);
    a SimError otherwise."""
    root = STATE_DIR.resolve()
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(root) or (real == root and not root_ok):
        raise SimError(f"refusing to remove {path}: it resolves to {real}, outside the state directory {root}")
    return real


def remove_tree(path: Path) -> None:
    """Remove a directory of the state directory. A link is removed as a link, never followed."""
    if path.is_symlink():
        (inside(path.parent, root_ok=True) / path.name).unlink()
        return
    if not path.exists():
        return
    real = inside(path)
    shutil.rmtree(real, ignore_errors=True)


def remove_file(path: Path) -> None:
    if path.is_symlink():
        (inside(path.parent, root_ok=True) / path.name).unlink()
        return
    with contextlib.suppress(FileNotFoundError):
        inside(path).unlink()


def host_dir(h: Host) -> Path:
    return STATE_DIR / "hosts" / h.name


def payload_dir(cluster: str) -> Path:
    return STATE_DIR / "payload" / check_cluster_name(cluster)


def cluster_dir(cluster: str) -> Path:
    return STATE_DIR / "clusters" / check_cluster_name(cluster)


# ---------------------------------------------------------------- hosts.json


def _state_file() -> Path:
    return STATE_DIR / "hosts.json"


_FIELDS = {f.name for f in fields(Host)}


def load_hosts(warn=None) -> list[Host]:
    """Every host record of the state file that can be acted on; a record whose names would reach outside
    the state directory (or is not a record at all) is reported through ``warn`` and left out."""
    try:
        data = json.loads(_state_file().read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise SimError(f"cannot read the simulated hosts' state {_state_file()}: {exc}; "
                       "if no simulated host runs, remove that file") from exc
    warn = warn or (lambda m: print(m, file=sys.stderr))
    hosts = []
    for rec in data.get("hosts", []) if isinstance(data, dict) else []:
        try:
            h = Host(**{k: v for k, v in rec.items() if k in _FIELDS})
        except TypeError:
            warn(f"moesweep sim: ignoring a malformed host record in {_state_file()}: {rec!r}")
            continue
        problem = record_problem(h)
        if problem:
            warn(f"moesweep sim: ignoring a host record in {_state_file()}: {problem}")
            continue
        hosts.append(h)
    return hosts


def save_hosts(hosts: list[Host]) -> None:
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    atomic_write_text(_state_file(), json.dumps({"hosts": [asdict(h) for h in hosts]}, indent=2) + "\n")


def forget_all() -> None:
    """Nothing runs any more: drop the state file and the payload trees."""
    remove_file(_state_file())
    remove_tree(STATE_DIR / "payload")


# ---------------------------------------------------------------- cluster records


def _cluster_file(cluster: str) -> Path:
    return cluster_dir(cluster) / "cluster.json"


def inventories(cluster: str) -> list[Path]:
    """The inventory files `sim up` wrote for the cluster (also read: the single path an older version kept
    in clusters/<name>/inventory-path)."""
    paths: list[Path] = []
    with contextlib.suppress(FileNotFoundError, ValueError, OSError):
        paths += [Path(p) for p in json.loads(_cluster_file(cluster).read_text()).get("inventories", [])]
    with contextlib.suppress(FileNotFoundError, OSError):
        legacy = (cluster_dir(cluster) / "inventory-path").read_text().strip()
        if legacy:
            paths.append(Path(legacy))
    return list(dict.fromkeys(paths))


def record_inventory(cluster: str, path: Path) -> None:
    paths = inventories(cluster)
    if path not in paths:
        paths.append(path)
    d = cluster_dir(cluster)
    d.mkdir(parents=True, exist_ok=True)
    atomic_write_text(_cluster_file(cluster), json.dumps({"inventories": [str(p) for p in paths]}, indent=2) + "\n")


def forget_cluster(cluster: str) -> None:
    remove_tree(cluster_dir(cluster))
    remove_tree(payload_dir(cluster))
