# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Decisions of model staging (the model_stage module): which of a hub repository's files a server loads, whether
they fit on the disk before any byte moves, whether what is on disk is what the hub lists (sizes, and the sha256
of LFS files), and the record of a verified stage. No I/O here.

The file list is what ``huggingface_hub``'s ``HfApi.model_info(..., files_metadata=True)`` returns for a revision
(its ``siblings``: ``rfilename``, ``size``, ``lfs.sha256``), reduced by the module to
``[{"name", "size", "sha256"}]`` (``sha256`` None for a file the hub does not store in LFS)."""

import fnmatch

# What sglang loads from a model directory: the config, generation config, tokenizer files, custom code and chat
# templates, and the weights - safetensors when the repository has them, else .bin / .pt (sglang 0.5.9
# python/sglang/srt/model_loader/loader.py:397 DefaultModelLoader._prepare_weights: allow_patterns
# ["*.safetensors", "*.bin"] for load format auto, the safetensors ones used when found).
CONFIG_PATTERNS = ("*.json", "*.model", "*.txt", "*.py", "*.jinja", "tokenizer*")
WEIGHT_PATTERNS = ("*.safetensors",)
FALLBACK_WEIGHT_PATTERNS = ("*.bin", "*.pt")
MARKER = ".moesweep-staged.json"


def _matches(name, patterns):
    return any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(name.rsplit("/", 1)[-1], p) for p in patterns)


def wanted(files):
    """The files of the list a server loads, in list order."""
    weights = WEIGHT_PATTERNS if any(_matches(f["name"], WEIGHT_PATTERNS) for f in files) \
        else FALLBACK_WEIGHT_PATTERNS
    return [f for f in files if _matches(f["name"], CONFIG_PATTERNS + weights)]


def allow_patterns(files):
    """The names to give snapshot_download's allow_patterns: exactly the wanted files."""
    return [f["name"] for f in wanted(files)]


def _size(n):
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return "%.1f %s" % (n / float(size), unit)
    return "%d B" % n


def space_problem(files, present, free_bytes, reserve_bytes, path):
    """None when the files still to download fit in ``free_bytes`` with ``reserve_bytes`` to spare, else the message
    naming the sizes. ``present``: {name: size on disk} (a partly downloaded file counts for what it has)."""
    missing = sum(max(0, f["size"] - present.get(f["name"], 0)) for f in files)
    if free_bytes is None or missing + reserve_bytes <= free_bytes:
        return None
    return ("%s to download (of %s in %d files) and %s kept free for the JIT caches need %s, but %s has %s free: "
            "free space there or stage the model on a larger disk (model_stage local_dir)"
            % (_size(missing), _size(sum(f["size"] for f in files)), len(files), _size(reserve_bytes),
               _size(missing + reserve_bytes), path, _size(free_bytes)))


def mismatches(files, seen):
    """Files whose copy on disk is not the hub's: ``seen`` {name: (size, sha256 or None)} -> [(name, why)]."""
    out = []
    for f in files:
        got = seen.get(f["name"])
        if got is None:
            out.append((f["name"], "missing"))
        elif got[0] != f["size"]:
            out.append((f["name"], "%d bytes, the hub lists %d" % (got[0], f["size"])))
        elif f.get("sha256") and got[1] != f["sha256"]:
            out.append((f["name"], "sha256 %s, the hub lists %s" % (got[1], f["sha256"])))
    return out


def record(repo_id, revision, local_dir, files, stats):
    """The marker of a verified stage: each file's hub size and sha256 with the size and mtime (ns) it had on the disk
    when it was verified - what vouches for it on the next stage without reading it again. ``stats``:
    {name: (size, mtime_ns)}."""
    return {"repo_id": repo_id, "revision": revision, "local_path": local_dir,
            "bytes": sum(f["size"] for f in files),
            "files": dict((f["name"], {"size": f["size"], "sha256": f.get("sha256"),
                                       "mtime_ns": (stats.get(f["name"]) or (None, None))[1]}) for f in files)}


def vouched(marker, repo_id, revision, files, stats):
    """The files an earlier stage's marker still vouches for: it names this revision and this set of files, and the
    file has the hub's size and the size and mtime it had when its sha256 was checked. Any write to a file (a byte
    flipped in place, a copy over it) moves its mtime, so it is read again; a marker written before mtimes were
    recorded vouches by size alone, as it did. ``stats``: {name: (size, mtime_ns)} of the files on the disk."""
    if not isinstance(marker, dict) or marker.get("repo_id") != repo_id or marker.get("revision") != revision:
        return set()
    recorded = marker.get("files") or {}
    if set(recorded) != set(f["name"] for f in files):
        return set()
    out = set()
    for f in files:
        entry, got = recorded.get(f["name"]) or {}, stats.get(f["name"])
        if got is None or got[0] != f["size"] or entry.get("size") != f["size"]:
            continue
        if "mtime_ns" in entry and entry["mtime_ns"] != got[1]:
            continue
        out.add(f["name"])
    return out
