# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Who listens on a TCP port, read from ``/proc/net/tcp{,6}`` and ``/proc/<pid>/fd``.

The parsing and the refusal are pure (``parse_proc_net_tcp``, ``foreign``, ``in_use_message``); ``listeners``
and ``unit_of`` do the small amount of I/O. Used by ``port_owner`` (with ``allowed_unit`` it refuses, before the
server's unit is written, a port already taken by *something else*, naming its process), a node group's
port check on the controller (``plugin_utils/nodes.py``), and the restart protocol (the old server's port must be
free before the new one starts).
"""

import os

TCP_LISTEN = "0A"


def parse_proc_net_tcp(text):
    """Return ``[{"local_port": int, "state": "0A", "inode": int}]`` from ``/proc/net/tcp`` text."""
    sockets = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 10 or ":" not in parts[1]:
            continue
        port_hex = parts[1].rsplit(":", 1)[1]
        try:
            sockets.append({"local_port": int(port_hex, 16), "state": parts[3], "inode": int(parts[9])})
        except ValueError:
            continue
    return sockets


def listening_inodes(port, proc_root="/proc"):
    inodes = set()
    for name in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc_root, "net", name)) as fh:
                text = fh.read()
        except OSError:
            continue
        for sock in parse_proc_net_tcp(text):
            if sock["local_port"] == port and sock["state"] == TCP_LISTEN:
                inodes.add(sock["inode"])
    return inodes


def _process_name(pid, proc_root):
    try:
        with open(os.path.join(proc_root, str(pid), "cmdline"), "rb") as fh:
            argv = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
        if argv:
            return " ".join(argv)[:200]
    except OSError:
        pass
    try:
        with open(os.path.join(proc_root, str(pid), "comm")) as fh:
            return fh.read().strip()
    except OSError:
        return "?"


def listeners(port, proc_root="/proc"):
    """Processes holding a listening socket on ``port``: ``[{"pid": int, "cmdline": str}]``.
    A listening socket whose owner cannot be found is reported with ``pid: None`` when it still listens after
    the scan: a server that exits while its processes are scanned (a sweep's previous point, stopped without
    waiting) closes its socket with its last descriptor, and is then gone, not a listener of unknown owner."""
    inodes = listening_inodes(port, proc_root)
    if not inodes:
        return []
    wanted = {"socket:[%d]" % i for i in inodes}
    found = []
    for entry in os.listdir(proc_root):
        if not entry.isdigit():
            continue
        fd_dir = os.path.join(proc_root, entry, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target in wanted:
                found.append({"pid": int(entry), "cmdline": _process_name(entry, proc_root)})
                break
    if found:
        return found
    still = listening_inodes(port, proc_root) & inodes
    return [{"pid": None, "cmdline": "unknown (socket inode %s)" % sorted(still)}] if still else []


def bad_port(port):
    """Why ``port`` is no TCP port (a message), or None."""
    return None if 1 <= port <= 65535 else "port must be between 1 and 65535 (got %d)" % port


def unit_of(pid, proc_root="/proc"):
    """The systemd unit a process runs in, from the last path element of its cgroup, or None."""
    if pid is None:
        return None
    try:
        with open(os.path.join(proc_root, str(pid), "cgroup")) as fh:
            text = fh.read()
    except OSError:
        return None
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        for part in reversed(path.split("/")):
            if part.endswith((".service", ".scope")):
                return part
    return None


def owners(port, proc_root="/proc"):
    """``listeners`` with each one's systemd unit: ``[{"pid", "cmdline", "unit"}]``."""
    found = listeners(port, proc_root)
    for entry in found:
        entry["unit"] = unit_of(entry["pid"], proc_root)
    return found


def foreign(found, unit):
    """The listeners that do not run in ``unit`` (the server's own unit may hold its port)."""
    return [item for item in (found or []) if item.get("unit") != unit]


def holders(found):
    """``PID 812 (python3 -m http.server 8000, unit foo.service); ...``: who holds a port, for a message."""
    parts = []
    for item in found:
        unit = ", unit " + item["unit"] if item.get("unit") else ""
        parts.append("PID %s (%s%s)" % (item.get("pid"), item.get("cmdline") or "?", unit))
    return "; ".join(parts)


def in_use_message(port, taken, fix):
    """The refusal of a port held by ``taken`` (``foreign`` listeners), ending with the ``fix``."""
    return "port %s is already in use by %s; %s" % (port, holders(taken), fix)
