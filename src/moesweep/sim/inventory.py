"""The Ansible inventory of a cluster of simulated hosts, and which files moesweep may write or remove.

`sim up` writes an inventory only where no file is, or over one it wrote itself (its header line) for a
cluster that does not run with it; `sim down` removes only the files recorded in the cluster's state that
still carry that header and name that cluster. A user's own inventory is never overwritten or deleted.
"""

from __future__ import annotations

import re
from pathlib import Path

from moesweep._collection import REPO_ROOT
from moesweep.sim import state
from moesweep.sim.model import Host, SimError
from moesweep.util import atomic_write_text

SIM_COMMAND = ["/opt/moesweep-sim/bin/sglang-sim"]
SIM_TOKENIZER = "/opt/moesweep-sim/tokenizer"
# The all-reduce measurement's stand-in and the model dimensions it is judged with (a simulated host downloads no model)
SIM_ALLREDUCE = ["/opt/moesweep-sim/bin/allreduce-perf-sim"]
SIM_MODEL_CONFIG = "/opt/moesweep-sim/models/glm-5-nvfp4/config.json"
SIM_STAGE_PYTHON = "/opt/moesweep/venvs/client/bin/python"
SIM_STAGE_RESERVE = 256 << 20
HEADER_LINE = "# Written by `moesweep sim up`: SIMULATED GPU hosts (systemd-nspawn, no GPU)."
_HEADER_START = "---\n# Written by `moesweep sim up`: SIMULATED GPU hosts"
_CLUSTER_LINE = re.compile(r"^# moesweep sim cluster: ([A-Za-z0-9_-]{1,20})$", re.M)


def default_inventory_path(cluster: str) -> Path:
    if cluster == "default":
        return REPO_ROOT / "inventory" / "sim.yml"
    return state.STATE_DIR / "clusters" / cluster / "inventory.yml"


def header(cluster: str) -> str:
    return (
        "---\n"
        f"{HEADER_LINE}\n"
        f"# moesweep sim cluster: {cluster}\n"
        "# Regenerated on every `sim up`; `moesweep sim down` removes it.\n"
    )


def written_by_moesweep(text: str) -> bool:
    """The file starts with the header `sim up` writes (this version's or an older one's)."""
    return text.startswith(_HEADER_START)


def written_for(text: str) -> str | None:
    """The cluster named in the header (None for an older `sim up`, which did not name it)."""
    head = "\n".join(text.splitlines()[:6])
    m = _CLUSTER_LINE.search(head)
    return m.group(1) if m else None


def inventory_data(hosts: list[Host], key: Path) -> dict:
    """The inventory of simulated hosts: group gpu_hosts, each host's simulated profile, and the role
    variables that differ from a real host (ExecStart runs the simulator; its sglang version is declared)."""
    members = {}
    for h in hosts:
        members[h.name] = {
            "ansible_host": h.address,
            "moesweep_sim_gpu_model": h.gpu_model,
            "moesweep_sim_gpu_count": h.gpu_count,
            "moesweep_sim_sglang_version": h.sglang_version,
            "moesweep_sim_cuda_toolkits": list(h.cuda_toolkits),
            "moesweep_sim_gateway": h.gateway,
            "sglang_server_sglang_version": h.sglang_version,
        }
        if h.extra.get("wheelhouse_url"):
            # the test stack from the wheelhouse `sim up` serves on this host's gateway (an air-gapped VM's mirror)
            members[h.name].update({
                "sglang_env_stack": "test-cpu-sglang-0.5.9",
                "sglang_env_index_url": h.extra["wheelhouse_url"] + "/simple/",
                "sglang_env_trusted_hosts": [h.gateway],
            })
        if h.extra.get("hub_url"):
            # the default model staged from the simulated hub on this host's gateway (an air-gapped VM's mirror),
            # with the benchmark client venv's huggingface_hub: the test stack's CPU server venv has none
            members[h.name].update({
                "model_hub_endpoint": h.extra["hub_url"],
                "model_stage_python": SIM_STAGE_PYTHON,
                # the simulated server compiles no kernels: no JIT caches to keep room for beside the model (the
                # default 10 GiB exceeds a simulated host's disk)
                "model_stage_reserve_bytes": SIM_STAGE_RESERVE,
            })
    return {"all": {"children": {"gpu_hosts": {
        "hosts": members,
        "vars": {
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(key),
            "ansible_python_interpreter": "/usr/bin/python3",
            "moesweep_simulated": True,
            "sglang_server_command": list(SIM_COMMAND),
            "sglang_bench_tokenizer": SIM_TOKENIZER,
            "sglang_server_interconnect_command": list(SIM_ALLREDUCE),
            "sglang_server_interconnect_model_config": SIM_MODEL_CONFIG,
        },
    }}}}


def render_inventory(hosts: list[Host], key: Path, cluster: str | None = None) -> str:
    import yaml

    cluster = cluster or (hosts[0].cluster if hosts else "default")
    return header(cluster) + yaml.safe_dump(inventory_data(hosts, key), sort_keys=False, default_flow_style=False)


def _read(path: Path) -> str | None:
    try:
        with open(path, errors="replace") as fh:
            return fh.read(4096)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise SimError(f"--inventory {path} is a directory: name a file, e.g. {path / 'sim.yml'}") from None
    except OSError as exc:
        raise SimError(f"cannot read --inventory {path}: {exc.strerror}: choose another --inventory") from exc


def check_target(path: Path, cluster: str, running: set[str]) -> None:
    """Refuse, before anything starts, to write the inventory over a file that is not moesweep's, or over the
    inventory of another cluster that runs (``running``: the clusters with live hosts)."""
    if path.is_dir():
        raise SimError(f"--inventory {path} is a directory: name a file, e.g. {path / 'sim.yml'}")
    text = _read(path)
    if text is None:
        return
    if not written_by_moesweep(text):
        raise SimError(
            f"refusing to overwrite {path}: it was not written by `moesweep sim up` (its first lines are not "
            "moesweep's header). Write the simulated hosts' inventory elsewhere with --inventory PATH, "
            "or move that file away first."
        )
    owner = written_for(text)
    if owner is not None and owner != cluster and owner in running and path in state.inventories(owner):
        raise SimError(
            f"{path} is the inventory of the running cluster {owner!r}: choose another --inventory PATH for "
            f"cluster {cluster!r}, or power {owner!r} off first with `moesweep sim down --cluster {owner}`"
        )


def write(path: Path, hosts: list[Host], key: Path) -> None:
    cluster = hosts[0].cluster
    path.parent.mkdir(parents=True, exist_ok=True)
    state.record_inventory(cluster, path)
    atomic_write_text(path, render_inventory(hosts, key, cluster))


def remove(cluster: str, log) -> None:
    """Remove the inventories recorded for ``cluster`` that are still the ones `sim up` wrote for it."""
    for path in state.inventories(cluster):
        try:
            text = _read(path)
        except SimError:
            text = ""
        if text is None:
            continue
        owner = written_for(text)
        if path.is_file() and not path.is_symlink() and written_by_moesweep(text) and owner in (cluster, None):
            path.unlink()
        else:
            why = ("another cluster's" if owner not in (cluster, None) and written_by_moesweep(text)
                   else "no longer the one `moesweep sim up` wrote")
            log(f"cluster {cluster!r}: left {path} in place: it is {why} (remove it yourself if it is not needed)")
