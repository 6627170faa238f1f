# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""NCCL's own account of a communicator: the transport it chose between every GPU pair, read from its INFO lines.

With ``NCCL_DEBUG=INFO`` NCCL prints, while a communicator connects, one line per channel and GPU pair naming the
transport, and the reasons it refused peer-to-peer. The forms read here, each from NCCL's source at tags v2.27.3-1,
v2.28.9-1 and v2.30.7-1 (https://github.com/NVIDIA/nccl, file:line at 2.27.3 / 2.28.9 / 2.30.7):

* prefix (src/debug.cc:352/366, 349/363, 330/354): ``HOST:PID:TID [CUDADEV] NCCL INFO MESSAGE``, a WARN as
  ``[CUDADEV] FILE:LINE NCCL WARN MESSAGE`` (2.30 may add ``(FUNC)`` before ``NCCL WARN``); a timestamp may come
  before it (NCCL_DEBUG_TIMESTAMP_LEVELS), and whatever collected the log (journald, a launcher, Ray) before that.
* ``NCCL version 2.27.3+cuda12.9`` (src/init.cc:538, 603, 694: VERSION_STRING).
* P2P (src/transport/p2p.cc:386/393/398/406, 386/393/398/406, 416/423/429/437):
  ``Channel %02d/%01d : RANK[DEV] -> RANK[DEV] via P2P/direct pointer`` (two GPUs of one process: a plain device
  pointer), ``via P2P/CUMEM`` (another process's buffer through cuMem handles; ``P2P/MNNVL`` across nodes of one
  NVLink domain), ``via P2P/IPC`` (legacy CUDA IPC handles: NCCL_CUMEM_ENABLE=0, which sglang sets for its own
  processes), ``via P2P/indirect/RANK[DEV]`` (through an intermediate GPU); ``/read`` and ``/CE`` may follow. All of
  them move data GPU to GPU over PCIe or NVLink, never through host memory.
* SHM (src/transport/shm.cc:128, 128, 116; 2.30.3 and 2.30.4 :130): ``Channel %02d : RANK[DEV] -> RANK[DEV] via
  SHM/direct/direct`` (``SHM/CE/...`` with copy engines); NCCL 2.30.7 prints ``via SHM/direct``. Every byte goes
  through a buffer in host memory (/dev/shm): the GPUs cannot reach each other directly.
* NET (src/transport/net.cc:218/222/264, 313/317/359, 324/328/377): ``Channel %02d/%d : RANK[DEV] -> RANK[DEV]
  [send] via NET/NAME/DEV...`` and ``[receive]``: through the network plugin (``Socket``: TCP sockets; ``IB``:
  InfiniBand / RoCE verbs; ``/GDRDMA``: the NIC reads GPU memory directly).
* The rings (src/graph/rings.cc:41, 47, 48; rank 0 only): ``Channel %02d/%02d :   0   1 ...``: channel number,
  channel count, the ring's ranks.
* The ranks (src/init.cc:1464/1469, 1593/1598, 1945): ``... comm 0x.. rank R nranks N cudaDev C nvmlDev D busId B
  ... - Init COMPLETE``; and (src/init.cc:998, 1170, 1422) ``comm 0x.. rank R nRanks N nNodes ... localRanks ...``.
* Refusals of P2P: ``P2P is disabled between connected GPUs A and B`` (src/graph/paths.cc:346, 359, 402-403: the
  pair is within NCCL's P2P level, but NVML's P2P read or write status between them is not OK, what
  ``nvidia-smi topo -p2p r|w`` prints); ``P2P is disabled between NVLINK connected GPUs`` (a WARN, and init fails);
  ``Could not enable P2P between dev A(=BUS) and dev B(=BUS)`` (src/transport/p2p.cc:194, 194, 204:
  cudaDeviceCanAccessPeer answers no: peer access not supported); ``peer query failed between dev ...`` (p2p.cc:166,
  166, 176); ``Legacy IPC not supported`` (p2p.cc:185, 185, 195).
* Settings NCCL read: ``NCCL_P2P_LEVEL set by environment to PHB`` / ``NCCL_P2P_DISABLE set by environment to 1``
  (src/graph/paths.cc:218/240, 225/247, 252/274) and every NCCL parameter's ``NAME set by environment to VALUE.``
  (src/misc/param.cc:87/100). NCCL's own default P2P level is PXB (src/graph/paths.cc:308, 319, 356: "By default
  don't use P2P across CPU Host Bridges and further apart"): a pair behind different CPU host bridges gets no P2P
  and no refusal line unless NCCL_P2P_LEVEL raises the level.
* The paths, with ``NCCL_DEBUG_SUBSYS`` holding GRAPH (src/graph/paths.cc printNodePaths:
  ``GPU/ID :GPU/ID (HOPS/BW/TYPE) ...``): the path type NCCL computed between two GPUs (LOC, NVL, NVB, PIX, PXB,
  PXN, P2C, PHB, SYS, ...).

A channel line names ``RANK[DEV]`` with the NVML device index (NCCL 2.19 and later) or the PCI bus id in hex (older).
Stdlib only; runs on the target (Python 3.9+) and on the controller.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

NCCL_SRC = "https://github.com/NVIDIA/nccl/blob/v2.27.3-1/"

# What each transport means, in the words the diagnosis uses, with NCCL's source (v2.27.3-1) of its line.
TRANSPORTS = {
    "P2P/direct pointer": ("GPU to GPU directly (one process: a plain device pointer)", "src/transport/p2p.cc:386"),
    "P2P/CUMEM": ("GPU to GPU directly (cuMem handles)", "src/transport/p2p.cc:393"),
    "P2P/MNNVL": ("GPU to GPU over the multi-node NVLink domain", "src/transport/p2p.cc:393"),
    "P2P/IPC": ("GPU to GPU directly (CUDA IPC handles)", "src/transport/p2p.cc:398"),
    "P2P/indirect": ("GPU to GPU through an intermediate GPU", "src/transport/p2p.cc:406"),
    "SHM": ("through host memory: every all-reduce goes through host memory", "src/transport/shm.cc:128"),
    "NET": ("through the network plugin", "src/transport/net.cc:218"),
}

# NCCL's path types (src/graph/topo.cc:24 topoPathTypeStr), nearest first; its default P2P level is PXB.
PATH_TYPES = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "P2C", "PHB", "SYS", "NET", "DIS")
DEFAULT_P2P_LEVEL = "PXB"

_PREFIX_RE = re.compile(
    r"(?:(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) )?\[(?P<dev>\d+)\] "
    r"(?:(?P<loc>[^\s:]+:\d+) (?:\([^)]*\) )?)?NCCL (?P<level>INFO|WARN) ?(?P<msg>.*)$")
_VERSION_RE = re.compile(r"NCCL version (?P<version>\d+\.\d+\.\d+)(?P<suffix>\S*)")
_CHANNEL_RE = re.compile(
    r"^Channel (?P<ch>\d+)(?:/(?P<conn>\d+))? : (?P<src>\d+)\[(?P<srcdev>[0-9a-fA-F]+)\] -> "
    r"(?P<dst>\d+)\[(?P<dstdev>[0-9a-fA-F]+)\] (?:\[(?P<dir>send|receive)\] )?via (?P<via>\S.*?)\s*$")
_RING_RE = re.compile(r"^Channel (?P<ch>\d+)/(?P<n>\d+) :(?P<ranks>(?:\s+\d+)+)\s*$")
_COMPLETE_RE = re.compile(
    r"comm (?P<comm>0x[0-9a-fA-F]+|\(nil\)) rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<cuda>\d+)"
    r"(?: nvmlDev (?P<nvml>\d+))? busId (?P<bus>[0-9a-fA-F]+).* - Init COMPLETE")
_COMM_RE = re.compile(
    r"comm (?:0x[0-9a-fA-F]+|\(nil\)) rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nodes>\d+)")
_ENV_RE = re.compile(r"^(?P<name>NCCL_[A-Z0-9_]+) set by environment to (?P<value>\S+?)\.?$")
_DISABLED_RE = re.compile(r"P2P is disabled between (?P<nvlink>NVLINK )?connected GPUs (?P<a>\d+) and (?P<b>\d+)")
_NOT_ENABLE_RE = re.compile(r"Could not enable P2P between dev (?P<a>\d+)\(=(?P<abus>[0-9a-fA-F]+)\) and dev "
                            r"(?P<b>\d+)\(=(?P<bbus>[0-9a-fA-F]+)\)")
_QUERY_FAILED_RE = re.compile(r"peer query failed between dev (?P<a>\d+)\(=[0-9a-fA-F]+\) and dev (?P<b>\d+)")
_PATHS_RE = re.compile(r"^GPU/(?P<id>[0-9a-fA-F-]+) :(?P<rest>.*)$")
_PATH_ENTRY_RE = re.compile(r"GPU/(?P<id>[0-9a-fA-F-]+) \((?P<hops>\d+)/(?P<bw>[\d.]+)/(?P<type>[A-Z0-9]+)\)")


def transport_of(via):
    """The transport of a channel line's ``via`` text: ``P2P/IPC``, ``P2P/CUMEM``, ``P2P/direct pointer``,
    ``P2P/indirect``, ``P2P/MNNVL``, ``SHM``, ``NET/Socket``, ``NET/IB``, ... (None for anything else)."""
    via = via.strip()
    if via.startswith("P2P/"):
        for name in ("P2P/direct pointer", "P2P/CUMEM", "P2P/MNNVL", "P2P/IPC", "P2P/indirect"):
            if via.startswith(name):
                return name
        return via.split()[0].split("/read")[0]
    if via.startswith("SHM") or via.startswith("direct shared memory"):
        return "SHM"  # "via direct shared memory": NCCL 2.7 and older
    if via.startswith("NET/"):
        parts = via.split("/")
        return "NET/" + parts[1] if len(parts) > 1 and parts[1] else "NET"
    if via.startswith("COLLNET"):
        return "COLLNET"
    return None


def family(transport):
    """``P2P``, ``SHM``, ``NET`` or None: what a transport means for the data's path."""
    if not transport:
        return None
    return transport.split("/")[0] if transport.split("/")[0] in ("P2P", "SHM", "NET") else transport


def nccl_message(line):
    """``(fields, message)`` of one NCCL INFO / WARN line, whatever came before NCCL's prefix; None for other lines.
    ``fields``: host, pid, dev (the process's CUDA device), level, loc."""
    idx = line.find("NCCL INFO")
    if idx < 0:
        idx = line.find("NCCL WARN")
    if idx < 0:
        return None
    m = _PREFIX_RE.search(line)
    if m:
        fields = {"host": m.group("host"), "pid": int(m.group("pid")) if m.group("pid") else None,
                  "dev": int(m.group("dev")), "level": m.group("level"), "loc": m.group("loc")}
        return fields, m.group("msg").rstrip()
    # a line whose prefix was cut (an excerpt, a wrapped terminal): the message after the marker
    level = line[idx + 5:idx + 9]
    return {"host": None, "pid": None, "dev": None, "level": level, "loc": None}, line[idx + 10:].rstrip()


def _brackets(channels):
    """A channel line's brackets hold the NVML device index (NCCL 2.19 and later) or, in older NCCL, the PCI bus id in
    hex (``11[3e000]``): bus ids when any bracket of the log is not a small decimal number."""
    raw = [(c.pop("_src"), c.pop("_dst")) for c in channels]
    bus = any(len(t) > 3 or not t.isdigit() for pair in raw for t in pair)
    for c, (s, d) in zip(channels, raw):  # noqa: B905
        if bus:
            c["src_bus"], c["dst_bus"] = s.lower(), d.lower()
        else:
            c["src_dev"], c["dst_dev"] = int(s), int(d)


def parse(text):
    """Every NCCL line of ``text`` NCCL's transport choice depends on.

    Returns ``{version, channels: [{channel, conn, src, dst, src_dev, dst_dev, src_bus, dst_bus, direction,
    transport, via, line}], rings: {channel: [ranks]}, ring_count, ranks: {rank: {cuda_dev, nvml_dev, bus_id}},
    nranks, nnodes, environment: {NAME: VALUE}, refusals: [{kind, a, b, line}], paths: {(id, id): type}, warns:
    [line], lines}`` (``lines``: the NCCL lines seen)."""
    out = {"version": None, "channels": [], "rings": {}, "ring_count": None, "ranks": {}, "nranks": None,
           "nnodes": None, "environment": {}, "refusals": [], "paths": {}, "warns": [], "lines": 0}
    for raw in (text or "").splitlines():
        line = raw.rstrip("\r")
        if "NCCL" not in line:
            continue
        found = nccl_message(line)
        if found is None:
            m = _VERSION_RE.search(line)
            if m and out["version"] is None:
                out["version"] = m.group("version")
            continue
        fields, msg = found
        out["lines"] += 1
        if fields["level"] == "WARN":
            out["warns"].append(line.strip())
        m = _VERSION_RE.search(msg)
        if m:
            out["version"] = out["version"] or m.group("version")
            continue
        m = _CHANNEL_RE.match(msg)
        if m:
            transport = transport_of(m.group("via"))
            if transport is None:
                continue
            out["channels"].append({
                "channel": int(m.group("ch")), "conn": int(m.group("conn")) if m.group("conn") else 0,
                "src": int(m.group("src")), "dst": int(m.group("dst")), "src_dev": None, "dst_dev": None,
                "src_bus": None, "dst_bus": None, "_src": m.group("srcdev"), "_dst": m.group("dstdev"),
                "direction": m.group("dir"), "transport": transport, "via": m.group("via"), "host": fields["host"],
                "line": line.strip()})
            continue
        m = _RING_RE.match(msg)
        if m:
            out["rings"][int(m.group("ch"))] = [int(x) for x in m.group("ranks").split()]
            out["ring_count"] = max(out["ring_count"] or 0, int(m.group("n")))
            continue
        m = _COMPLETE_RE.search(msg)
        if m:
            out["ranks"][int(m.group("rank"))] = {
                "cuda_dev": int(m.group("cuda")),
                "nvml_dev": int(m.group("nvml")) if m.group("nvml") is not None else None,
                "bus_id": m.group("bus").lower(), "host": fields["host"]}
            out["nranks"] = max(out["nranks"] or 0, int(m.group("nranks")))
            continue
        m = _COMM_RE.search(msg)
        if m:
            out["nranks"] = max(out["nranks"] or 0, int(m.group("nranks")))
            out["nnodes"] = max(out["nnodes"] or 0, int(m.group("nodes")))
            continue
        m = _ENV_RE.match(msg)
        if m:
            out["environment"][m.group("name")] = m.group("value")
            continue
        m = _DISABLED_RE.search(msg)
        if m:
            out["refusals"].append({"kind": "p2p_disabled_nvlink" if m.group("nvlink") else "p2p_disabled",
                                    "a": int(m.group("a")), "b": int(m.group("b")), "line": line.strip()})
            continue
        m = _NOT_ENABLE_RE.search(msg)
        if m:
            out["refusals"].append({"kind": "peer_access", "a": int(m.group("a")), "b": int(m.group("b")),
                                    "line": line.strip()})
            continue
        m = _QUERY_FAILED_RE.search(msg)
        if m:
            out["refusals"].append({"kind": "peer_query", "a": int(m.group("a")), "b": int(m.group("b")),
                                    "line": line.strip()})
            continue
        if msg.startswith("Legacy IPC not supported"):
            out["refusals"].append({"kind": "legacy_ipc", "a": None, "b": None, "line": line.strip()})
            continue
        m = _PATHS_RE.match(msg)
        if m:
            for e in _PATH_ENTRY_RE.finditer(m.group("rest")):
                out["paths"][(_bus_key(m.group("id")), _bus_key(e.group("id")))] = e.group("type")
    _brackets(out["channels"])
    return out


def _bus_key(topo_id):
    """A GPU's id in NCCL's topology dump (``0-1b000``: system id, then the PCI bus id; older: ``1b000``) as the
    bus id the Init COMPLETE line prints."""
    return topo_id.split("-")[-1].lower().lstrip("0") or "0"


REASONS = {
    "p2p_disabled": ("P2P is disabled between connected GPUs: NVML reports their P2P read / write status not OK "
                     "(what `nvidia-smi topo -p2p r` prints), so NCCL does not use P2P though its P2P level allows "
                     "it", "src/graph/paths.cc:346"),
    "p2p_disabled_nvlink": ("P2P is disabled between NVLink-connected GPUs: NCCL stops the init (a hardware or "
                            "driver fault)", "src/graph/paths.cc:343"),
    "peer_access": ("peer access not supported: CUDA says these GPUs cannot access each other's memory "
                    "(cudaDeviceCanAccessPeer)", "src/transport/p2p.cc:194"),
    "peer_query": ("the peer-access query failed (cudaDeviceCanAccessPeer returned an error)",
                   "src/transport/p2p.cc:166"),
    "legacy_ipc": ("legacy CUDA IPC is not supported (cudaIpcGetMemHandle failed) with NCCL_CUMEM_ENABLE=0",
                   "src/transport/p2p.cc:185"),
}


def summarise(parsed):
    """The transport per GPU pair from ``parse``'s result.

    Returns ``{nccl_version, nranks, nnodes, channels (the ring count), pairs: [{src, dst, src_dev, dst_dev,
    transport, family, channels, via, line}], transports: {transport: pairs}, refusals: [{kind, gpus, reason,
    source, line}], environment, p2p_level, paths: [{src, dst, type}], warns, found, single_rank}``; ``found`` is
    false when no channel line was read, ``single_rank`` true for a communicator of one rank (nothing to connect)."""
    pairs = {}
    for c in parsed["channels"]:
        if c["direction"] == "receive":
            continue  # the [send] line of the same connection names it
        key = (c["host"] or "", c["src"], c["dst"], c["transport"])
        pair = pairs.get(key)
        if pair is None:
            pair = pairs[key] = {"src": c["src"], "dst": c["dst"], "src_dev": c["src_dev"], "dst_dev": c["dst_dev"],
                                 "transport": c["transport"], "family": family(c["transport"]), "via": c["via"],
                                 "host": c["host"], "_channels": set(), "line": c["line"]}
        pair["_channels"].add(c["channel"])
    out_pairs = []
    for pair in sorted(pairs.values(), key=lambda p: (p["host"] or "", p["src"], p["dst"], p["transport"])):
        pair["channels"] = len(pair.pop("_channels"))
        pair.pop("host")
        out_pairs.append(pair)
    transports = {}
    for p in out_pairs:
        transports[p["transport"]] = transports.get(p["transport"], 0) + 1
    refusals = []
    seen = set()
    for r in parsed["refusals"]:
        gpus = sorted(x for x in (r["a"], r["b"]) if x is not None)
        key = (r["kind"], tuple(gpus))
        if key in seen:
            continue
        seen.add(key)
        reason, where = REASONS[r["kind"]]
        refusals.append({"kind": r["kind"], "gpus": gpus, "reason": reason, "source": NCCL_SRC + where,
                         "line": r["line"]})
    env = dict(parsed["environment"])
    level = None
    if env.get("NCCL_P2P_DISABLE") in ("1",):
        level = "LOC"
    elif env.get("NCCL_P2P_LEVEL"):
        level = env["NCCL_P2P_LEVEL"]
    bus_to_rank = {}
    for rank, info in parsed["ranks"].items():
        bus_to_rank[info["bus_id"].lstrip("0") or "0"] = rank
    paths = []
    for (a, b), kind in sorted(parsed["paths"].items()):
        if a in bus_to_rank and b in bus_to_rank and a != b:
            paths.append({"src": bus_to_rank[a], "dst": bus_to_rank[b], "type": kind})
    return {"nccl_version": parsed["version"], "nranks": parsed["nranks"], "nnodes": parsed["nnodes"],
            "channels": parsed["ring_count"] or (max(p["channels"] for p in out_pairs) if out_pairs else None),
            "pairs": out_pairs, "transports": transports, "refusals": refusals, "environment": env,
            "p2p_level": level, "paths": paths, "warns": parsed["warns"][:10], "found": bool(out_pairs),
            # a communicator of one rank connects no pair: no channel line is what NCCL prints, not a missing log
            "single_rank": parsed["nranks"] == 1}


def read(text):
    """``summarise(parse(text))``: what a pasted or recorded NCCL log says of its transports."""
    return summarise(parse(text))


def _gpu(rank, dev):
    return "GPU%d" % (dev if dev is not None else rank)


def pair_text(pair):
    """``GPU0 -> GPU1 via SHM (2 channels): through host memory: every all-reduce goes through host memory``."""
    meaning = TRANSPORTS.get(pair["transport"]) or TRANSPORTS.get(pair["family"]) or ("", "")
    n = pair.get("channels") or 0
    return "%s -> %s via %s (%d channel%s)%s" % (
        _gpu(pair["src"], pair.get("src_dev")), _gpu(pair["dst"], pair.get("dst_dev")), pair["transport"], n,
        "" if n == 1 else "s", (": " + meaning[0]) if meaning[0] else "")


def evidence(summary, limit=4):
    """Lines for a diagnosis: the transports NCCL chose (one line per transport, its first pair and NCCL's line),
    then its refusals of P2P with their reason."""
    if not summary or not summary.get("found"):
        return []
    out = []
    by = {}
    for p in summary["pairs"]:
        by.setdefault(p["transport"], []).append(p)
    total = len(summary["pairs"])
    for _transport, pairs in sorted(by.items(), key=lambda kv: -len(kv[1])):
        first = pairs[0]
        out.append("NCCL %s: %s%s; NCCL's line: %s" % (
            summary.get("nccl_version") or "", pair_text(first),
            "" if len(pairs) == 1 else " (and %d more of the %d GPU pairs NCCL connected)" % (len(pairs) - 1, total),
            first["line"]))
    for r in summary.get("refusals", [])[:limit]:
        out.append("NCCL refused P2P%s: %s; NCCL's line: %s" % (
            " between GPU%s" % " and GPU".join(str(g) for g in r["gpus"]) if r["gpus"] else "", r["reason"],
            r["line"]))
    return out


def what_would_change(summary):
    """What would give the pairs that do not run P2P a direct path, naming the setting NCCL itself reported."""
    if not summary or not summary.get("found"):
        return []
    slow = [p for p in summary["pairs"] if p["family"] in ("SHM", "NET")]
    if not slow:
        return []
    out = []
    env = summary.get("environment") or {}
    kinds = set(r["kind"] for r in summary.get("refusals") or [])
    if env.get("NCCL_P2P_DISABLE") == "1":
        out.append("NCCL reported NCCL_P2P_DISABLE set by environment to 1: unset it so NCCL may use P2P (%s)"
                   % (NCCL_SRC + "src/graph/paths.cc:218"))
    elif env.get("NCCL_P2P_LEVEL"):
        out.append("NCCL reported NCCL_P2P_LEVEL set by environment to %s: pairs whose path is farther than %s get "
                   "no P2P (%s)" % (env["NCCL_P2P_LEVEL"], env["NCCL_P2P_LEVEL"], NCCL_SRC + "src/graph/paths.cc:240"))
    if "p2p_disabled" in kinds:
        out.append("NCCL reported 'P2P is disabled between connected GPUs': the GPUs' own P2P status is not OK "
                   "(nvidia-smi topo -p2p r): in a VM the hypervisor must pass the GPUs through with P2P (ACS off on "
                   "the host's PCIe bridges, IOMMU in passthrough, iommu=pt), on bare metal disable ACS on the "
                   "bridges between the GPUs (%s)" % (NCCL_SRC + "src/graph/paths.cc:346"))
    if "peer_access" in kinds or "peer_query" in kinds:
        out.append("NCCL reported that CUDA denies peer access between the GPUs (cudaDeviceCanAccessPeer): the "
                   "IOMMU translating DMA or ACS redirecting peer requests blocks it; boot with iommu=pt and disable "
                   "ACS on the bridges (%s)" % (NCCL_SRC + "src/transport/p2p.cc:194"))
    if "legacy_ipc" in kinds:
        out.append("NCCL reported 'Legacy IPC not supported': CUDA IPC handles fail here (NCCL_CUMEM_ENABLE=0); "
                   "NCCL_CUMEM_ENABLE=1 uses cuMem handles instead (%s)" % (NCCL_SRC + "src/transport/p2p.cc:185"))
    if not out and any(p["family"] == "SHM" for p in slow):
        farther = [p for p in summary.get("paths") or []
                   if p["type"] in PATH_TYPES and PATH_TYPES.index(p["type"]) > PATH_TYPES.index(DEFAULT_P2P_LEVEL)]
        if farther:
            why = ("the GPUs are farther apart than its default P2P level %s (no P2P across a CPU host bridge; "
                   "NCCL's path between GPU%d and GPU%d: %s)" % (DEFAULT_P2P_LEVEL, farther[0]["src"],
                                                                 farther[0]["dst"], farther[0]["type"]))
        else:
            why = ("so it did not try P2P: its topology put the GPUs beyond its P2P level (default %s: no P2P across "
                   "a CPU host bridge; NCCL_DEBUG_SUBSYS with GRAPH prints the path it computed)" % DEFAULT_P2P_LEVEL)
        out.append("NCCL printed no refusal of P2P: %s; NCCL_P2P_LEVEL=SYS lets it try P2P, which works only where the "
                   "GPUs' P2P status is OK (nvidia-smi topo -p2p r) (%s)" % (why, NCCL_SRC + "src/graph/paths.cc:308"))
    if any(p["family"] == "NET" for p in slow) and (summary.get("nnodes") or 1) <= 1:
        out.append("GPUs of one host connected through the network: NCCL's SHM transport needs the processes to "
                   "share /dev/shm (containers: the same IPC namespace), and NCCL_SHM_DISABLE unset (%s)"
                   % (NCCL_SRC + "src/transport/shm.cc"))
    return out


def record(summary, max_pairs=64):
    """What a record keeps of a summary (the pairs capped at ``max_pairs``)."""
    if not summary:
        return {}
    out = dict(summary)
    out["pairs"] = list(summary.get("pairs") or [])[:max_pairs]
    out["pairs_total"] = len(summary.get("pairs") or [])
    return out
