"""port_owner: who listens on a port, and with allowed_unit the refusal of a port held outside the server's unit
(the sweep point's check before the unit is written, and the check playbook's)."""

from __future__ import annotations

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.modules import port_owner

SQUATTER = {"pid": 901, "cmdline": "python3 -m http.server 8000 --bind 127.0.0.1", "unit": "squatter.service"}
OWN = {"pid": 4242, "cmdline": "python3 -m sglang.launch_server --port 8000", "unit": "sglang.service"}
FIX = "stop that process or choose another port in sglang_server_flags.port"


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_port_held_by_another_process_is_refused_naming_it(run_module, monkeypatch, check_mode):
    monkeypatch.setattr(port_owner.ports, "owners", lambda port: [dict(SQUATTER)] if port == 8000 else [])
    kind, res = run_module(port_owner, {"port": 8000, "allowed_unit": "sglang.service", "fix": FIX,
                                        "_ansible_check_mode": check_mode})
    assert kind == "fail"
    assert res["msg"] == ("port 8000 is already in use by PID 901 (python3 -m http.server 8000 --bind 127.0.0.1, "
                          "unit squatter.service); stop that process or choose another port in "
                          "sglang_server_flags.port")
    assert res["listeners"] == [SQUATTER] and res["in_use"]


def test_the_own_unit_on_its_port_or_a_free_port_goes_on(run_module, monkeypatch):
    held = {8000: [dict(OWN)]}
    monkeypatch.setattr(port_owner.ports, "owners", lambda port: held.get(port, []))
    kind, res = run_module(port_owner, {"port": 8000, "allowed_unit": "sglang.service", "fix": FIX})
    assert kind == "exit" and res["listeners"] == [OWN] and not res["changed"]
    kind, res = run_module(port_owner, {"port": 30000, "allowed_unit": "sglang.service", "fix": FIX})
    assert kind == "exit" and res["listeners"] == [] and not res["in_use"]
    kind, res = run_module(port_owner, {"port": 0, "allowed_unit": "sglang.service"})
    assert kind == "fail" and "port must be between 1 and 65535" in res["msg"]


def test_without_allowed_unit_any_listener_is_only_reported(run_module, monkeypatch):
    monkeypatch.setattr(port_owner.ports, "owners", lambda port: [dict(SQUATTER)])
    kind, res = run_module(port_owner, {"port": 8000})
    assert kind == "exit" and res["in_use"] and res["listeners"] == [SQUATTER]
