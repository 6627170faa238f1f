"""Stage results and point records small enough to read in a test: what the tests of the records, a point's status
and the restore choice build their cases from."""

from __future__ import annotations

READY = {"state": "ready"}
OK_BENCH = {"state": "ok", "levels": [{"concurrency": 8, "ok": True, "figures": {"output_throughput": 200.0,
                                                                                  "p99_ttft_ms": 50.0}}]}


def point_record(point, status, tok=None, ttft=10.0, host="h", config="c"):
    """A point record with one level at concurrency 8: ok with ``tok`` output tok/s, failed without."""
    levels = [{"concurrency": 8, "ok": tok is not None, "figures": {"output_throughput": tok, "p99_ttft_ms": ttft}}]
    return {"kind": "point", "host": host, "point": point, "status": status, "config_hash": config,
            "benchmark": {"levels": levels}}
