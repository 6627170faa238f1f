#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_ready
short_description: Wait until an SGLang server unit is ready, or say why it is not
description:
  - Runs on the target. Follows the unit's journal from a cursor taken before the start (never an older
    line), polls the HTTP health endpoint (refused, then 503, then 200) and watches the systemd unit.
  - Returns C(ready), C(crashed) with a cause, C(hang) (no log progress for O(stall_timeout) while
    starting), or C(timeout); always with the phase timeline and C(elapsed).
  - A slow JIT compile or CUDA graph capture that still prints progress (tqdm, compiler lines) is not a
    hang. Health-check access lines written by this module's own polling are not progress.
  - The log classifier is M(moesweep.sweep) module_utils C(sglang_log), the same one C(moesweep classify-log)
    runs on saved logs.
version_added: "0.1.0"
author: moesweep contributors
options:
  unit:
    description:
      - The systemd unit running SGLang, for example C(sglang.service). C(.service) is added when no
        unit type suffix is given. Only the characters systemd allows in unit names are accepted.
    type: str
    required: true
  cursor:
    description:
      - Journal cursor taken before the unit was started (C(journalctl --show-cursor -n 0)). Only
        entries after it are read, so a previous run's log can never decide this wait.
      - When omitted, only entries written after the module starts are read.
    type: str
  host:
    description: Address the server listens on, for the health probe.
    type: str
    default: 127.0.0.1
  port:
    description: Server port.
    type: int
    default: 30000
  health_path:
    description: HTTP path polled for readiness. SGLang returns 503 until warmup succeeds, then 200.
    type: str
    default: /health
  timeout:
    description: Seconds to wait in total before giving up with C(state=timeout). Must be greater than 0.
    type: float
    default: 900
  stall_timeout:
    description:
      - Seconds without any new log line while still starting before the server is declared hung
        (C(state=hang)). Must be greater than 0.
    type: float
    default: 300
  poll_interval:
    description: Seconds between health and unit polls; the journal is read as soon as it has data.
    type: float
    default: 0.1
  api_key:
    description: Bearer token sent with the health probe (SGLang C(--api-key)).
    type: str
  fail_on_error:
    description: Fail the task when the state is not C(ready). Set to V(false) to branch on C(state).
    type: bool
    default: true
notes:
  - Check mode is a no-op waiter: nothing is read, C(waited=false) is returned.
  - Not idempotent in the usual sense: it changes nothing and always reports C(changed=false).
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
seealso:
  - module: ansible.builtin.wait_for
"""

EXAMPLES = r"""
- name: Take the journal cursor before starting SGLang
  ansible.builtin.command: journalctl --show-cursor -n 0 -o cat
  register: __cursor
  changed_when: false

- name: Start the server
  ansible.builtin.systemd_service:
    name: sglang.service
    state: started

- name: Wait for SGLang (fails with cause and decisive line on a crash, hang or timeout)
  moesweep.sweep.sglang_ready:
    unit: sglang.service
    cursor: "{{ __cursor.stdout | regex_search('-- cursor: (.*)', '\\1') | first }}"
    port: 30000
    timeout: 1200
    stall_timeout: 300

- name: Branch on the outcome instead of failing
  moesweep.sweep.sglang_ready:
    unit: sglang.service
    fail_on_error: false
  register: __ready
"""

RETURN = r"""
state:
  description: C(ready), C(crashed), C(hang) or C(timeout). Null in check mode.
  returned: always
  type: str
  sample: crashed
cause:
  description: >-
    For C(crashed): unsupported_arch, oom, nccl, jit_compile, flag_error, port_in_use, warmup_failed,
    killed or other. Null otherwise.
  returned: always
  type: str
  sample: oom
phase:
  description: Phase reached (or died in) - init, load_weights, kv_cache, cuda_graph, http_up, warmup, ready, serving.
  returned: always
  type: str
  sample: cuda_graph
after_ready:
  description: Whether the crash happened after the server had been ready.
  returned: always
  type: bool
  sample: false
decisive_line:
  description: The log line that decided the verdict (the exception line for a crash).
  returned: always
  type: str
  sample: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
traceback:
  description: Excerpt of the first traceback (head and tail), or null.
  returned: always
  type: str
timeline:
  description: Phase to C(at) (seconds after the first log line) and C(duration) (seconds), plus C(events).
  returned: always
  type: dict
  sample: {"load_weights": {"at": 5.0, "duration": 40.0}, "ready": {"at": 72.0, "duration": null}}
elapsed:
  description: Seconds this module waited.
  returned: always
  type: float
  sample: 73.4
health_sequence:
  description: Observed health results in order, repeats compressed.
  returned: always
  type: list
  elements: dict
  sample: [{"code": "refused", "count": 600}, {"code": 503, "count": 12}, {"code": 200, "count": 1}]
unit_state:
  description: Last C(systemctl show) properties of the unit.
  returned: always
  type: dict
  sample: {"ActiveState": "failed", "SubState": "failed", "ExecMainCode": "2", "ExecMainStatus": "9",
           "NRestarts": "0", "MainPID": "0"}
waited:
  description: False in check mode, true otherwise.
  returned: always
  type: bool
lines_read:
  description: Journal lines read.
  returned: always
  type: int
verdict_at:
  description:
    - Wall-clock time (seconds since the epoch, this host's clock) when the verdict was reached. Compared
      with the journal timestamp of the decisive line it gives the detection delay (C(bench/readiness_latency.py)).
  returned: when the module waited
  type: float
  sample: 1764451200.123456
msg:
  description: One-line summary.
  returned: always
  type: str
"""

import errno
import json
import os
import re
import select
import socket
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.six.moves.urllib.request import Request, urlopen
from ansible_collections.moesweep.sweep.plugins.module_utils.sglang_log import SglangLogClassifier

# systemd.unit(5): names are [A-Za-z0-9:_.\\-] plus one "@" for templates; at most 255 characters.
UNIT_RE = re.compile(r"^[A-Za-z0-9:_.\\-]+(@[A-Za-z0-9:_.\\-]*)?$")
UNIT_SUFFIXES = (".service", ".scope")
SHOW_PROPS = ("ActiveState", "SubState", "ExecMainCode", "ExecMainStatus", "NRestarts", "MainPID")
CRASH_GRACE = 0.5  # seconds to keep reading after a crash marker, to collect the traceback and cause


def validate_unit(unit):
    """Return (normalised unit, error message or None)."""
    if not unit or len(unit) > 255 or not UNIT_RE.match(unit) or unit.startswith("-"):
        return unit, "unit %r is not a valid systemd unit name" % (unit,)
    if not unit.endswith(UNIT_SUFFIXES):
        if "." in unit.rsplit("@", 1)[-1] and not unit.endswith("@"):
            return unit, "unit %r: only .service units can run SGLang" % (unit,)
        unit += ".service"
    return unit, None


def compress(seq):
    out = []
    for code in seq:
        if out and out[-1]["code"] == code:
            out[-1]["count"] += 1
        else:
            out.append({"code": code, "count": 1})
    return out


def parse_show(text):
    props = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


class JournalFollower:
    """``journalctl -u UNIT --after-cursor C -o json --follow`` as a child, read without blocking."""

    def __init__(self, journalctl, unit, cursor):
        cmd = [journalctl, "-u", unit, "-o", "json", "--follow", "--no-pager", "--output-fields=MESSAGE"]
        if cursor:
            cmd += ["--after-cursor", cursor]
        else:
            cmd += ["--lines=0"]
        env = dict(os.environ, LC_ALL="C", SYSTEMD_PAGER="")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.fd = self.proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self._buf = b""

    def wait_readable(self, timeout):
        try:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        except (OSError, ValueError):
            return False
        return bool(ready)

    def read_messages(self):
        """Every complete entry available now, as text messages."""
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    break
                raise
            if not chunk:
                break
            self._buf += chunk
        lines = self._buf.split(b"\n")
        self._buf = lines.pop()
        out = []
        for raw in lines:
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw.decode("utf-8", "replace"))
            except ValueError:
                continue
            msg = entry.get("MESSAGE")
            if isinstance(msg, list):  # journald stores non-UTF-8 messages as a byte array
                msg = bytes(b & 0xFF for b in msg).decode("utf-8", "replace")
            if msg is not None:
                out.append(str(msg))
        return out

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def probe_health(url, api_key, timeout):
    """200 / 503 / other HTTP code, or 'refused' / 'timeout' / 'error'."""
    headers = {"Authorization": "Bearer %s" % api_key} if api_key else {}
    try:
        resp = urlopen(Request(url, headers=headers), timeout=timeout)
        code = resp.getcode()
        resp.close()
        return code
    except HTTPError as exc:
        return exc.code
    except URLError as exc:
        reason = getattr(exc, "reason", None)
        if isinstance(reason, ConnectionRefusedError) or "refused" in str(reason).lower():
            return "refused"
        if isinstance(reason, socket.timeout):
            return "timeout"
        return "error"
    except ConnectionRefusedError:
        return "refused"
    except (socket.timeout, TimeoutError):
        return "timeout"
    except (OSError, ValueError):
        return "error"


class Waiter:
    """Readiness as pure predicates over what was observed, on a monotonic clock (model: kubernetes.core
    waiter). Sources are injected so the loop can be driven by recorded logs in tests."""

    def __init__(self, journal, health, unit_state, clock=time.monotonic, timeout=900.0, stall_timeout=300.0,
                 poll_interval=0.1):
        self.journal = journal
        self.health = health
        self.unit_state = unit_state
        self.clock = clock
        self.timeout = timeout
        self.stall_timeout = stall_timeout
        self.poll_interval = poll_interval
        self.classifier = SglangLogClassifier()
        self.health_seen = []
        self.last_unit = {}
        self.lines = 0

    def _drain(self, now):
        for msg in self.journal.read_messages():
            self.lines += 1
            self.classifier.feed(msg, t=now)

    @staticmethod
    def _unit_gone(props):
        return props.get("ActiveState") in ("failed", "inactive") or (
            props.get("ActiveState") == "deactivating"
        )

    def _stalled(self, offset):
        # No line at all since the start counts from the start.
        if self.classifier.last_progress is None:
            return offset >= self.stall_timeout
        return self.classifier.stalled(offset, self.stall_timeout)

    def run(self):
        start = self.clock()
        last_poll = None
        crash_seen_at = None
        while True:
            now = self.clock()
            self._drain(now - start)
            c = self.classifier
            if c.state == "crashed":
                if crash_seen_at is None:
                    crash_seen_at = now
                if c.crash_settled or now - crash_seen_at >= CRASH_GRACE:
                    return "crashed", now - start
            elif c.state == "ready" and c.ready_seen:
                return "ready", now - start
            if last_poll is None or now - last_poll >= self.poll_interval * 0.999:
                last_poll = now
                code = self.health()
                self.health_seen.append(code)
                if code == 200 and c.state != "crashed":
                    self._drain(self.clock() - start)
                    if self.classifier.state != "crashed":
                        return "ready", self.clock() - start
                props = self.unit_state()
                if props:
                    self.last_unit = props
                if props and self._unit_gone(props):
                    # The process is gone: read what it wrote last, then decide from the log and systemd.
                    settle = self.clock()
                    while self.clock() - settle < CRASH_GRACE:
                        if self.journal.wait_readable(0.05):
                            self._drain(self.clock() - start)
                        elif c.crash_settled:
                            break
                    self.classifier.finish()
                    return "crashed", self.clock() - start
            if c.state == "starting" and self._stalled(now - start):
                return "hang", now - start
            if now - start >= self.timeout:
                return "timeout", now - start
            wait = self.poll_interval - (self.clock() - last_poll)
            self.journal.wait_readable(min(max(wait, 0.001), self.poll_interval))

    def result(self, state, elapsed):
        r = self.classifier.result()
        out = {
            "state": state,
            "cause": r["cause"],
            "phase": r["phase"],
            "after_ready": r["after_ready"],
            "decisive_line": r["decisive_line"],
            "traceback": r["traceback"],
            "timeline": r["timeline"],
            "elapsed": round(elapsed, 3),
            "health_sequence": compress(self.health_seen),
            "unit_state": self.last_unit,
            "lines_read": self.lines,
        }
        if state == "ready":
            out.update(cause=None, after_ready=False, traceback=None)
            if not r["decisive_line"]:
                out["decisive_line"] = "health endpoint answered 200"
        elif state == "crashed" and r["state"] != "crashed":
            # systemd says the process is gone but the log had no crash marker: killed or plain exit.
            code = str(self.last_unit.get("ExecMainCode", ""))
            status = str(self.last_unit.get("ExecMainStatus", ""))
            out["cause"] = "killed" if code in ("2", "3") else "other"
            out["after_ready"] = r["state"] == "ready"
            out["decisive_line"] = "unit %s: ExecMainCode=%s ExecMainStatus=%s" % (
                self.last_unit.get("ActiveState", "?"), code, status)
        elif state in ("hang", "timeout"):
            out.update(cause=None, after_ready=False)
        return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type="str", required=True),
            cursor=dict(type="str"),
            host=dict(type="str", default="127.0.0.1"),
            port=dict(type="int", default=30000),
            health_path=dict(type="str", default="/health"),
            timeout=dict(type="float", default=900.0),
            stall_timeout=dict(type="float", default=300.0),
            poll_interval=dict(type="float", default=0.1),
            api_key=dict(type="str", no_log=True),
            fail_on_error=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    empty = dict(state=None, cause=None, phase=None, after_ready=False, decisive_line=None, traceback=None,
                 timeline={}, elapsed=0.0, health_sequence=[], unit_state={}, lines_read=0)
    unit, err = validate_unit(p["unit"])
    if err:
        module.fail_json(msg=err, waited=False, **empty)
    for name in ("timeout", "stall_timeout", "poll_interval"):
        if p[name] is None or p[name] <= 0:
            module.fail_json(msg="%s must be greater than 0, got %s" % (name, p[name]), waited=False, **empty)
    if not 0 < p["port"] < 65536:
        module.fail_json(msg="port must be 1-65535, got %s" % p["port"], waited=False, **empty)
    if p["cursor"] is not None and ("\n" in p["cursor"] or not p["cursor"].strip()):
        module.fail_json(msg="cursor must be one journal cursor string", waited=False, **empty)
    path = p["health_path"] if p["health_path"].startswith("/") else "/" + p["health_path"]

    if module.check_mode:
        module.exit_json(changed=False, waited=False, msg="check mode: did not wait for %s" % unit, **empty)

    journalctl = module.get_bin_path("journalctl", required=True)
    systemctl = module.get_bin_path("systemctl", required=True)
    host = p["host"]
    if ":" in host and not host.startswith("["):
        host = "[%s]" % host
    url = "http://%s:%d%s" % (host, p["port"], path)
    probe_timeout = min(1.0, max(0.2, p["poll_interval"] * 5))

    def unit_state():
        rc, out, _err = module.run_command(
            [systemctl, "show", unit, "-p", ",".join(SHOW_PROPS)], environ_update={"LC_ALL": "C"}
        )
        return parse_show(out) if rc == 0 else {}

    started = time.monotonic()
    journal = JournalFollower(journalctl, unit, p["cursor"])
    try:
        waiter = Waiter(
            journal,
            lambda: probe_health(url, p["api_key"], probe_timeout),
            unit_state,
            timeout=p["timeout"],
            stall_timeout=p["stall_timeout"],
            poll_interval=p["poll_interval"],
        )
        state, _elapsed = waiter.run()
        verdict_at = time.time()
        result = waiter.result(state, time.monotonic() - started)
        result["verdict_at"] = round(verdict_at, 6)
    finally:
        journal.close()

    result["waited"] = True
    if state == "ready":
        msg = "%s is ready after %.1f s" % (unit, result["elapsed"])
    elif state == "crashed":
        msg = "%s crashed (%s) %s after %.1f s: %s" % (
            unit, result["cause"], "after ready" if result["after_ready"] else "during " + str(result["phase"]),
            result["elapsed"], result["decisive_line"])
    elif state == "hang":
        msg = "%s hung in %s: no log line for %s s" % (unit, result["phase"], p["stall_timeout"])
    else:
        msg = "%s not ready after %s s (phase %s)" % (unit, p["timeout"], result["phase"])
    if state != "ready" and p["fail_on_error"]:
        module.fail_json(msg=msg, changed=False, **result)
    module.exit_json(msg=msg, changed=False, **result)


if __name__ == "__main__":
    main()
