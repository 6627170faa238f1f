"""A small Hugging Face-compatible hub: model repositories served from a directory, through the endpoints the real
``huggingface_hub`` client calls, so that staging a model on a simulated host exercises the real client.

Sources (huggingface_hub 0.36.2, the test stack's pin; paths below ``huggingface_hub/``):

* ``hf_api.py`` ``HfApi.model_info`` / ``repo_info``: ``GET {endpoint}/api/models/{repo_id}`` and
  ``.../api/models/{repo_id}/revision/{revision}`` (revision URL-quoted), answered with the model's JSON;
  ``snapshot_download`` (``_snapshot_download.py``) reads its ``sha`` (asserted present) and ``siblings``
  (``rfilename`` each; with ``files_metadata`` also ``size``, ``blobId`` and, for LFS files, ``lfs`` = {``sha256``,
  ``size``, ``pointerSize``}).
* ``file_download.py`` ``get_hf_file_metadata``: ``HEAD {endpoint}/{repo_id}/resolve/{revision}/{filename}``
  with ``Accept-Encoding: identity``; reads ``X-Repo-Commit``, ``X-Linked-Etag`` (else ``ETag``, quotes
  stripped by ``_normalize_etag``), ``X-Linked-Size`` (else ``Content-Length``) and ``Location``; an ``X-Xet-Hash``
  header would switch it to Xet storage, so none is sent (plain HTTP). The hub answers an LFS file with the
  sha256 of its content as ``X-Linked-Etag`` and a git blob sha1 as ``ETag`` for a regular file
  (``constants.py`` ``HUGGINGFACE_HEADER_X_LINKED_ETAG``, ``HUGGINGFACE_HEADER_X_LINKED_SIZE``,
  ``HUGGINGFACE_HEADER_X_REPO_COMMIT``).
* ``file_download.py`` ``http_get``: ``GET`` the same URL, with ``Range: bytes=N-`` when an ``.incomplete``
  file of N bytes exists (a resumed download), expecting 206 and the rest of the file.
* ``utils/_http.py`` ``hf_raise_for_status``: a missing repository or revision is told by ``X-Error-Code``
  (``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``) with a JSON ``{"error": ...}`` body.

The real hub redirects an LFS ``resolve`` to its CDN; the client takes the metadata from that 302's headers and
then downloads from its ``Location``. Serving the file at the same URL is what the client does with a hub that does
not redirect (``location`` defaults to the request URL), so the redirect is not simulated.

Layout: ``ROOT/<org>/<name>/`` holds the files of the repository's only revision. Its commit hash (40 hex
digits, like a git commit) is the sha1 of the files' paths and blob ids, so it changes when a file changes. A file
is LFS when ``.gitattributes`` names its suffix with ``filter=lfs``, as the hub's default ``.gitattributes`` does
(``*.safetensors``, ``*.bin``, ...).

Fault knobs (environment of the server): ``MOESWEEP_SIM_HUB_CUT_AFTER=N`` ends the first GET of each LFS file
after N bytes (an interrupted download), ``MOESWEEP_SIM_HUB_CORRUPT=path`` serves that file with its last byte
flipped (a corrupted download: its sha256 no longer matches ``X-Linked-Etag``), ``MOESWEEP_SIM_HUB_RATE=B`` serves
the body of each LFS file at about B bytes per second (a download long enough to watch its progress),
``MOESWEEP_SIM_HUB_DOWN_AFTER_CUT=1`` makes the hub go away at that cut (it stops listening: every later request is
refused, as in a hub outage or a mirror that went down mid-download).
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import threading
import time
import urllib.parse
from pathlib import Path

_API_RE = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+?)(?:/revision/(?P<rev>[^/]+))?/?$")
_RESOLVE_RE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
_RANGE_RE = re.compile(r"^bytes=(\d+)-(\d*)$")


def git_blob_sha1(data: bytes) -> str:
    """What git (and the hub's ETag of a regular file) names a blob: sha1 of "blob <size>\\0" + content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_patterns(repo: Path) -> list[str]:
    try:
        lines = (repo / ".gitattributes").read_text().splitlines()
    except OSError:
        return []
    return [line.split()[0] for line in lines if "filter=lfs" in line and line.split()]


def _is_lfs(rel: str, patterns: list[str]) -> bool:
    import fnmatch

    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(os.path.basename(rel), p) for p in patterns)


def repo_files(repo: Path) -> list[dict]:
    """Every file of the repository: path, size, blob id, and the sha256 of the LFS ones."""
    patterns = lfs_patterns(repo)
    out = []
    for path in sorted(p for p in repo.rglob("*") if p.is_file()):
        rel = path.relative_to(repo).as_posix()
        data = path.read_bytes()
        entry = {"rfilename": rel, "size": len(data), "blobId": git_blob_sha1(data)}
        if _is_lfs(rel, patterns):
            entry["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
        out.append(entry)
    return out


def commit_hash(files: list[dict]) -> str:
    digest = hashlib.sha1()
    for f in files:
        digest.update(f"{f['rfilename']}\0{f['blobId']}\n".encode())
    return digest.hexdigest()


class Hub(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path, address: tuple[str, int]):
        self.root = Path(root)
        self.cut_after = int(os.environ.get("MOESWEEP_SIM_HUB_CUT_AFTER") or 0)
        self.corrupt = os.environ.get("MOESWEEP_SIM_HUB_CORRUPT") or ""
        self.rate = int(os.environ.get("MOESWEEP_SIM_HUB_RATE") or 0)
        self.down_after_cut = os.environ.get("MOESWEEP_SIM_HUB_DOWN_AFTER_CUT") == "1"
        self.cut_done: set[str] = set()
        self.requests: list[tuple[str, str, str]] = []  # (method, path, Range header): what the client asked
        self.lock = threading.Lock()
        super().__init__(address, Handler)

    def repo(self, repo_id: str) -> Path | None:
        path = (self.root / repo_id).resolve()
        if self.root.resolve() not in path.parents or not path.is_dir():
            return None
        return path


class Handler(http.server.BaseHTTPRequestHandler):
    server: Hub
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: the client's requests are not the hub's news
        pass

    def _error(self, status: int, code: str, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _revision_ok(self, rev: str, files: list[dict]) -> bool:
        return rev in ("main", commit_hash(files))

    def do_GET(self):  # noqa: N802 - http.server's name
        self._serve()

    def do_HEAD(self):  # noqa: N802 - http.server's name
        self._serve()

    def _serve(self):
        with self.server.lock:
            self.server.requests.append((self.command, self.path, self.headers.get("Range") or ""))
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        m = _API_RE.match(path)
        if m:
            return self._api(m.group("repo"), m.group("rev") or "main")
        m = _RESOLVE_RE.match(path)
        if m:
            return self._resolve(m.group("repo"), m.group("rev"), m.group("path"))
        return self._error(404, "EntryNotFound", f"{path} is not a hub endpoint")

    def _api(self, repo_id: str, rev: str):
        repo = self.server.repo(repo_id)
        if repo is None:
            return self._error(404, "RepoNotFound", f"Repository Not Found for url: {self.path}.")
        files = repo_files(repo)
        if not self._revision_ok(rev, files):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        body = json.dumps({
            "_id": commit_hash(files)[:24], "id": repo_id, "modelId": repo_id, "sha": commit_hash(files),
            "private": False, "gated": False, "disabled": False, "downloads": 0, "likes": 0, "tags": [],
            "library_name": "transformers", "siblings": files,
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _resolve(self, repo_id: str, rev: str, rel: str):
        repo = self.server.repo(repo_id)
        if repo is None:
            return self._error(404, "RepoNotFound", f"Repository Not Found for url: {self.path}.")
        files = repo_files(repo)
        if not self._revision_ok(rev, files):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        entry = next((f for f in files if f["rfilename"] == rel), None)
        if entry is None:
            return self._error(404, "EntryNotFound", f"{rel} does not exist on {rev}")
        data = (repo / rel).read_bytes()
        if rel == self.server.corrupt and data:
            data = data[:-1] + bytes([data[-1] ^ 0xFF])
        start, status = 0, 200
        m = _RANGE_RE.match(self.headers.get("Range") or "")
        if m:
            start, status = int(m.group(1)), 206
        self.send_response(status)
        self.send_header("X-Repo-Commit", commit_hash(files))
        self.send_header("Accept-Ranges", "bytes")
        if "lfs" in entry:
            self.send_header("X-Linked-Etag", f'"{entry["lfs"]["sha256"]}"')
            self.send_header("X-Linked-Size", str(entry["size"]))
        self.send_header("ETag", f'"{entry["blobId"]}"')
        self.send_header("Content-Type", "application/octet-stream")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        if self.command == "HEAD":
            return
        body = data[start:]
        with self.server.lock:
            cut = ("lfs" in entry and self.server.cut_after and rel not in self.server.cut_done
                   and start == 0 and len(body) > self.server.cut_after)
            if cut:
                self.server.cut_done.add(rel)
        if cut:
            self.wfile.write(body[:self.server.cut_after])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            if self.server.down_after_cut:
                # from another thread: shutdown() waits for serve_forever, which this handler's thread is not
                threading.Thread(target=lambda: (self.server.shutdown(), self.server.server_close()),
                                 daemon=True).start()
            return
        if self.server.rate and "lfs" in entry:
            chunk = max(1, self.server.rate // 10)  # ten writes a second
            for at in range(0, len(body), chunk):
                self.wfile.write(body[at:at + chunk])
                self.wfile.flush()
                time.sleep(len(body[at:at + chunk]) / self.server.rate)
            return
        self.wfile.write(body)


def serve(root: Path, bind: str, port: int) -> Hub:
    """The hub on bind:port (0: any free port), serving in a daemon thread; ``hub.shutdown()`` ends it."""
    hub = Hub(root, (bind, port))
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    return hub


# The hub's default .gitattributes of a new model repository (its LFS lines for the weight formats).
GITATTRIBUTES = "".join(f"{p} filter=lfs diff=lfs merge=lfs -text\n" for p in (
    "*.bin", "*.h5", "*.msgpack", "*.onnx", "*.pt", "*.pth", "*.safetensors", "*tfevents*"))


TINY_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    "num_attention_heads": 4, "num_hidden_layers": 1, "num_key_value_heads": 4, "vocab_size": 1400,
    "max_position_embeddings": 2048, "torch_dtype": "float16"}


def write_tiny_model(dest: Path, tokenizer_dir: Path, weight_bytes: int = 1 << 20, config: dict | None = None) -> Path:
    """A tiny model repository: config (``config``, else a one-layer Llama's), the simulator's tokenizer, and one
    safetensors file of ``weight_bytes`` zero-filled float16 weights (a valid safetensors header: 8-byte
    little-endian length, then JSON)."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / ".gitattributes").write_text(GITATTRIBUTES)
    (dest / "config.json").write_text(json.dumps(config or TINY_CONFIG, indent=2) + "\n")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (dest / name).write_bytes((tokenizer_dir / name).read_bytes())
    count = weight_bytes // 2
    header = json.dumps({"model.embed.weight": {"dtype": "F16", "shape": [count], "data_offsets": [0, count * 2]}},
                        separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    with open(dest / "model.safetensors", "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header + bytes(count * 2))
    return dest


def main(argv: list[str] | None = None) -> int:
    """``serve --root ROOT --bind ADDR --port N``: the hub in the foreground (what `moesweep sim up` starts on each
    host's link); ``write-tiny DEST --tokenizer DIR [--config FILE] [--weight-bytes N]``: a tiny model repository."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m moesweep_sim.hfhub", description=main.__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--root", type=Path, required=True)
    s.add_argument("--bind", required=True)
    s.add_argument("--port", type=int, required=True)
    w = sub.add_parser("write-tiny")
    w.add_argument("dest", type=Path)
    w.add_argument("--tokenizer", type=Path, required=True)
    w.add_argument("--config", type=Path)
    w.add_argument("--weight-bytes", type=int, default=1 << 20)
    args = parser.parse_args(argv)
    if args.cmd == "write-tiny":
        config = json.loads(args.config.read_text()) if args.config else None
        print(write_tiny_model(args.dest, args.tokenizer, args.weight_bytes, config))
        return 0
    if args.bind in ("", "0.0.0.0", "::"):
        parser.error("bind to one address (the host's link), never all interfaces")
    hub = Hub(args.root, (args.bind, args.port))
    print(f"http://{args.bind}:{hub.server_address[1]}", flush=True)
    hub.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
