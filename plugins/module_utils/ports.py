# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Who listens on a TCP port, read from ``/proc/net/tcp{,6}`` and ``/proc/<pid>/fd``.

The parsing is pure (``parse_proc_net_tcp``); ``listeners`` does the small amount of I/O. Used by
the server role's preflight (a port already taken by *something else* is named, with its process)
and by the restart protocol (the old server's port must be free before the new one starts).
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
