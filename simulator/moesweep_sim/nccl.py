"""SIMULATED NCCL INFO lines: what a real NCCL prints at communicator init with NCCL_DEBUG=INFO, for the simulated
all-reduce measurement (allreduce.py). Stdlib only; shares no code with plugins/ (written from NCCL's source).

Every line form is NCCL's, at the tags v2.27.3-1, v2.28.9-1 and v2.30.7-1 of https://github.com/NVIDIA/nccl
(file:line at each of the three):

* prefix ``HOST:PID:TID [DEV] NCCL INFO `` (src/debug.cc:352/366, 349/363, 330/354); NCCL writes to stdout unless
  NCCL_DEBUG_FILE names a file (src/debug.cc:32 ``ncclDebugFile = stdout``); a line is printed only when its
  subsystem is in NCCL_DEBUG_SUBSYS (default INIT,BOOTSTRAP,ENV: src/debug.cc:42, 48, 55), NCCL_ALL lines always.
* ``NCCL version 2.27.3+cuda12.9`` (src/init.cc:538-541, 603, 694-702: VERSION_STRING through INFO(NCCL_ALL)).
* ``NCCL_CUMEM_ENABLE set by environment to 0.`` (src/misc/param.cc:87/100, NCCL_ENV) for a numeric parameter set in
  the environment; ``NCCL_P2P_LEVEL set by environment to PHB`` / ``NCCL_P2P_DISABLE set by environment to 1``
  (src/graph/paths.cc:218/240, 225/247, 252/274, NCCL_ALL).
* ``comm 0x.. rank R nRanks N nNodes 1 localRanks N localRank R MNNVL 0`` (src/init.cc:998, 1170, 1422).
* GRAPH: ``GPU/0-BUS :GPU/0-BUS (0/5000.0/LOC) GPU/0-BUS (2/24.0/PHB) ...`` (src/graph/paths.cc printNodePaths,
  non-trace build: ``%s/%lx-%lx :`` then ``%s/%lx-%lx (%d/%.1f/%s) `` per node).
* rank 0's rings: ``Channel 00/02 : 0 1 2 ...`` (src/graph/rings.cc:41, 47, 48, dumpLine: `` %*d`` with the width of
  nranks-1).
* transports: ``Channel %02d/%01d : R[DEV] -> R[DEV] via P2P/IPC`` (NCCL_CUMEM_ENABLE=0) or ``via P2P/CUMEM``
  (src/transport/p2p.cc:398 / 393, 398 / 393, 429 / 423); ``Channel %02d : R[DEV] -> R[DEV] via SHM/direct/direct``
  (src/transport/shm.cc:128, 128) and ``via SHM/direct`` from 2.30.7 (src/transport/shm.cc:116); ring connections
  first, then ``Connected all rings, use ring PXN 0 GDR 0`` (src/transport/generic.cc:31, 37, 40), the tree's
  connections, ``Connected all trees`` (generic.cc:50 at 2.27.3).
* ``P2P is disabled between connected GPUs A and B. You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.``
  (src/graph/paths.cc:346, 359, 402-403): printed where the pair is within the P2P level (default PXB:
  paths.cc:308, 319, 356; NCCL_P2P_LEVEL raises it), its path is nearer than SYS, and NVML's P2P status is not OK.
* ``ncclCommInitRankConfig comm 0x.. rank R nranks N cudaDev R nvmlDev R busId BUS commId 0x.. - Init COMPLETE``
  (src/init.cc:1469, 1598, 1945).

Channel counts are ASSUMED from public logs: 2 channels between PCIe GPUs (NVIDIA/nccl#1817, 8x L20: channels 00-01),
16 between NVLink GPUs (NVIDIA/nccl#1538, 8 GPUs: ``Channel 01/16``). The path type between two GPUs follows the
all-reduce profile: ``vm_phb`` -> PHB (every GPU behind the VM's host bridge, `topo -m`), ``pix`` -> PIX (PCIe
switches), ``nvlink`` -> NVL.
"""

from __future__ import annotations

import os
import socket

PATHS = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "P2C", "PHB", "SYS", "NET", "DIS")
PROFILE_PATH = {"vm_phb": "PHB", "pix": "PIX", "nvlink": "NVL"}
PROFILE_BW = {"vm_phb": 24.0, "pix": 24.0, "nvlink": 40.0}  # NCCL's PCIe Gen4 x16 / NVLink per-link figures
CHANNELS = {"PHB": 2, "PIX": 2, "NVL": 16}
VERSIONS = ("2.27.3", "2.28.9", "2.30.7")
OLD_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")  # paths.cc levelsOldToNew


def _tuple(version: str) -> tuple:
    return tuple(int(x) for x in version.split(".")[:3] if x.isdigit())


def enabled(env: dict) -> bool:
    return str(env.get("NCCL_DEBUG", "")).strip().upper() in ("INFO", "TRACE")


def subsystems(env: dict) -> set:
    """The subsystems NCCL_DEBUG_SUBSYS selects (src/debug.cc: comma list, ^ inverts, default INIT,BOOTSTRAP,ENV)."""
    raw = env.get("NCCL_DEBUG_SUBSYS")
    if raw is None:
        return {"INIT", "BOOTSTRAP", "ENV"}
    allsub = {"INIT", "COLL", "P2P", "SHM", "NET", "GRAPH", "TUNING", "ENV", "ALLOC", "CALL", "PROXY", "NVLS",
              "BOOTSTRAP", "REG", "PROFILE", "RAS"}
    invert = raw.startswith("^")
    names = {x.strip().upper() for x in raw.lstrip("^").split(",") if x.strip()}
    if "ALL" in names:
        names = set(allsub)
    return (allsub - names) if invert else names


def p2p_level(env: dict) -> tuple[str, list[str]]:
    """NCCL's P2P level and the ENV lines it prints (paths.cc ncclGetLevel)."""
    notes = []
    disable = env.get("NCCL_P2P_DISABLE")
    if disable is not None:
        try:
            if int(disable, 0) == 1:
                notes.append(f"NCCL_P2P_DISABLE set by environment to {int(disable, 0)}")
                return "LOC", notes
        except ValueError:
            pass
    level = env.get("NCCL_P2P_LEVEL")
    if level:
        found = level if level in PATHS[:10] else None
        if found is None and level[:1].isdigit():
            found = OLD_LEVELS[min(int(level[0]), len(OLD_LEVELS) - 1)]
        if found:
            notes.append(f"NCCL_P2P_LEVEL set by environment to {found}")
            return found, notes
    return "PXB", notes


def render(profile_name: str, ranks: int, bus_ids: list[str], p2p_ok: bool, env: dict, version: str = "2.27.3",
           cuda: str = "12.9") -> list[str]:
    """The INFO lines of one single-node communicator of ``ranks`` processes (one GPU each), in init order."""
    if not enabled(env) or ranks < 1:
        return []
    subs = subsystems(env)
    host = socket.gethostname().split(".")[0]
    base = os.getpid()
    path = PROFILE_PATH.get(profile_name, "PHB")
    level, level_notes = p2p_level(env)
    within = PATHS.index(path) <= PATHS.index(level)
    # paths.cc: P2P when the path is within the level and NVML's status is OK; the refusal line only when the path is
    # within the level, NVML says no and the path is nearer than SYS
    use_p2p = within and p2p_ok and ranks > 1
    refuse = within and not p2p_ok and PATHS.index(path) < PATHS.index("SYS")
    cumem = env.get("NCCL_CUMEM_ENABLE", "-2").strip() not in ("0",)
    channels = CHANNELS.get(path, 2)
    buses = [b.split(":", 1)[-1].replace(":", "").replace(".", "").lstrip("0").lower() or "0" for b in bus_ids]
    comm_id = "0x%016x" % (hash((host, base)) & 0xFFFFFFFFFFFFFFFF)
    out = []

    def line(rank, sub, text):
        if sub is None or sub in subs:
            out.append(f"{host}:{base + rank}:{base + rank + 100} [{rank}] NCCL INFO {text}")

    for r in range(ranks):
        line(r, None, f"NCCL version {version}+cuda{cuda}")
    for r in range(ranks):
        for name in ("NCCL_CUMEM_ENABLE", "NCCL_NVLS_ENABLE", "NCCL_IB_DISABLE", "NCCL_SHM_DISABLE"):
            value = env.get(name)
            if value not in (None, ""):
                try:
                    line(r, "ENV", f"{name} set by environment to {int(value, 0)}.")
                except ValueError:
                    line(r, None, f"Invalid value {value} for {name}, using default.")
        line(r, "INIT", f"comm 0x{0x55d0c0000000 + r * 0x1000:x} rank {r} nRanks {ranks} nNodes 1 localRanks {ranks} "
                        f"localRank {r} MNNVL 0")
        if "GRAPH" in subs:
            bw = PROFILE_BW.get(profile_name, 24.0)
            entries = "".join(
                f"GPU/0-{buses[g]} ({0 if g == r else (1 if path == 'NVL' else 2)}/"
                f"{5000.0 if g == r else bw:.1f}/{'LOC' if g == r else path}) " for g in range(ranks))
            line(r, "GRAPH", f"GPU/0-{buses[r]} :{entries}CPU/0-0 (1/{bw:.1f}/PHB) ")
        for note in level_notes:
            line(r, None, note)
        if refuse:
            for peer in range(ranks):
                if peer != r:
                    line(r, "INIT", f"P2P is disabled between connected GPUs {r} and {peer}. You can repress this "
                                    "message with NCCL_IGNORE_DISABLED_P2P=1.")
    width = len(str(ranks - 1))
    for c in range(channels):
        line(0, "INIT", f"Channel {c:02d}/{channels:02d} :" + "".join(f" {x:{width}d}" for x in range(ranks)))

    def connect(r, peer, c):
        if use_p2p:
            kind = "CUMEM" if cumem else "IPC"
            line(r, "INIT", f"Channel {c:02d}/0 : {r}[{r}] -> {peer}[{peer}] via P2P/{kind}")
        else:
            shm = "SHM/direct" if _tuple(version) >= (2, 30, 7) else "SHM/direct/direct"
            line(r, "INIT", f"Channel {c:02d} : {r}[{r}] -> {peer}[{peer}] via {shm}")

    if ranks > 1:
        for c in range(channels):
            for r in range(ranks):
                connect(r, (r + 1) % ranks, c)
        for r in range(ranks):
            line(r, "INIT", "Connected all rings, use ring PXN 0 GDR 0")
        for c in range(channels):
            for r in range(1, ranks):
                connect(r, r - 1, c)
        for r in range(ranks):
            line(r, "INIT", "Connected all trees")
    for r in range(ranks):
        line(r, "INIT", f"ncclCommInitRankConfig comm 0x{0x55d0c0000000 + r * 0x1000:x} rank {r} nranks {ranks} "
                        f"cudaDev {r} nvmlDev {r} busId {buses[r]} commId {comm_id} - Init COMPLETE")
    return out
