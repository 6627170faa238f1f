# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The progress of a model's staging while it downloads: the plan ``model_stage`` (run as an Ansible async job)
writes into the local directory before the first byte moves, what is on the disk measured against it, and the
rate, the time left and the line a reader shows, computed from two samples.

What is on the disk is the finished files at their place plus the files huggingface_hub is still receiving: for a
download into a local directory it writes each file to ``<local_dir>/.cache/huggingface/download/<name>``'s
directory as ``<hash>.<etag>.incomplete`` and moves it to ``<local_dir>/<name>`` when complete (huggingface_hub
v0.36.2 ``src/huggingface_hub/_local_folder.py``: ``get_local_download_paths``, ``LocalDownloadFilePaths.
incomplete_path``; ``src/huggingface_hub/file_download.py``: ``_hf_hub_download_to_local_dir`` passes
``paths.incomplete_path(etag)`` to ``_download_to_tmp_and_move``; https://github.com/huggingface/huggingface_hub).
Earlier releases named the file ``<name>.<etag>.incomplete`` in the same directory, so every ``*.incomplete`` file
below that directory is counted.

Pure functions (no I/O) except the plan's writer and reader and ``measure``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

PLAN_FILE = ".moesweep-stage-plan.json"
DOWNLOAD_DIR = (".cache", "huggingface", "download")
INCOMPLETE_SUFFIX = ".incomplete"
# A window shorter than this gives a rate that is mostly noise; the rate since the plan is used instead.
MIN_WINDOW_S = 1.0


def plan(repo_id, revision, files, present, started, pid):
    """The plan of one download: the wanted files {name: size} (``files``: model_stage's list), the bytes of them
    already on the disk when it started (``present``: a resumed download's), when and by which process."""
    return {"repo_id": repo_id, "revision": revision, "started": started, "pid": pid,
            "bytes_total": sum(f["size"] for f in files), "bytes_present": present,
            "files": dict((f["name"], f["size"]) for f in files)}


def write_plan(local_dir, doc):
    """Write atomically (a reader never sees a partial plan)."""
    path = os.path.join(local_dir, PLAN_FILE)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as fh:
        json.dump(doc, fh, sort_keys=True)
    os.replace(tmp, path)


def read_plan(local_dir):
    try:
        with open(os.path.join(local_dir, PLAN_FILE)) as fh:
            doc = json.load(fh)
    except (IOError, OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), dict):
        return None
    return doc


def of_job(doc, job_started):
    """Whether the plan was written by the job whose async results file was first written at ``job_started`` (a
    plan an earlier, interrupted stage left in the directory is not)."""
    if doc is None:
        return False
    try:
        return float(doc.get("started")) >= float(job_started) - 0.1
    except (TypeError, ValueError):
        return False


def done_bytes(files, sizes, incomplete):
    """The bytes of the wanted files on the disk: ``files`` {name: size}, ``sizes`` {name: size of the file at its
    place}, ``incomplete`` the bytes of the client's ``.incomplete`` files; never more than the total (a stale copy
    still in place while its replacement arrives counts once)."""
    total = sum(files.values())
    finished = sum(min(sizes.get(name, 0), size) for name, size in files.items())
    return min(total, finished + incomplete)


def measure(local_dir, files):
    """``done_bytes`` of what is on the disk now."""
    sizes = {}
    for name in files:
        try:
            sizes[name] = os.path.getsize(os.path.join(local_dir, name))
        except OSError:
            pass
    incomplete = 0
    for root, _dirs, names in os.walk(os.path.join(local_dir, *DOWNLOAD_DIR)):
        for name in names:
            if name.endswith(INCOMPLETE_SUFFIX):
                try:
                    incomplete += os.path.getsize(os.path.join(root, name))
                except OSError:
                    pass  # moved into place between the listing and the stat: counted as finished next time
    return done_bytes(files, sizes, incomplete)


def rate_eta(earlier, later, total):
    """(bytes per second, seconds left) from two samples ``(time, bytes done)``; None for either when it cannot be
    told (no time passed, nothing moved)."""
    dt = later[0] - earlier[0]
    if dt <= 0:
        return None, None
    rate = max(0.0, (later[1] - earlier[1]) / float(dt))
    if rate <= 0:
        return rate, None
    return rate, max(0.0, (total - later[1]) / rate)


def choose_window(window, since_start):
    """The two samples to take the rate from: the call's own window (the rate now) when it is long enough, else the
    plan's start and now (the mean rate since the download began)."""
    if window and window[1][0] - window[0][0] >= MIN_WINDOW_S:
        return window
    return since_start


def _decimal(n, units):
    for unit, size in units:
        if n >= size:
            return n / float(size), unit
    return float(n), units[-1][0]


SIZES = (("TB", 10 ** 12), ("GB", 10 ** 9), ("MB", 10 ** 6), ("kB", 10 ** 3), ("B", 1))


def size_of(n, unit=None):
    """``n`` bytes in decimal units (the hub's own), in ``unit`` when given."""
    if unit is None:
        value, unit = _decimal(n, SIZES)
    else:
        value = n / float(dict(SIZES)[unit])
    return "%.1f %s" % (value, unit)


def eta_text(eta_s):
    if eta_s is None:
        return "time left not known yet"
    eta_s = int(round(eta_s))
    if eta_s < 90:
        return "about %d s left" % eta_s
    if eta_s < 90 * 60:
        return "about %d min left" % int(round(eta_s / 60.0))
    return "about %d h %02d min left" % (eta_s // 3600, (eta_s % 3600) // 60)


def message(repo_id, done, total, rate, eta_s, finished_download=False):
    """The one line a poll shows, e.g. ``lukealonso/GLM-5-NVFP4: 120.3 of 453.0 GB, 210.0 MB/s, about 26 min
    left``."""
    unit = _decimal(total, SIZES)[1]
    head = "%s: %s of %s" % (repo_id, size_of(done, unit).split(" ")[0], size_of(total, unit))
    if finished_download:
        return head + ", verifying the files against the hub's sizes and sha256s"
    speed = "rate not known yet" if rate is None else size_of(rate) + "/s"
    return "%s, %s, %s" % (head, speed, eta_text(eta_s))


def progress(doc, window, now_bytes, now):
    """A poll's progress from the job's plan ``doc``, the call's two samples ``window`` ((t, bytes), (t, bytes)) or
    None, and the bytes on the disk ``now_bytes`` at ``now``: bytes_done, bytes_total, rate_bytes_s, eta_s, msg."""
    total = int(doc.get("bytes_total") or 0)
    start = (float(doc.get("started") or now), int(doc.get("bytes_present") or 0))
    earlier, later = choose_window(window, (start, (now, now_bytes)))
    rate, eta_s = rate_eta(earlier, later, total)
    if now_bytes >= total:
        rate, eta_s = None, None
    return {"bytes_done": now_bytes, "bytes_total": total,
            "rate_bytes_s": None if rate is None else round(rate, 1),
            "eta_s": None if eta_s is None else round(eta_s, 1),
            "msg": message(doc.get("repo_id") or "the model", now_bytes, total, rate, eta_s,
                           finished_download=now_bytes >= total)}


def planning():
    """A poll's progress before the job planned its download (it asks the hub for the file list first)."""
    return {"bytes_done": None, "bytes_total": None, "rate_bytes_s": None, "eta_s": None,
            "msg": "the staging job asks the hub for the revision's files"}
