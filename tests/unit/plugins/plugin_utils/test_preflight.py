"""The preflight's caveats about reaching the server: a public bind without a key is warned about; a key is no
caveat of its own, since it reaches sglang in a 0600 --config file, never on the command line."""

from __future__ import annotations

from ansible_collections.moesweep.sweep.plugins.plugin_utils import preflight

FLAGS = {"model-path": "m", "host": "0.0.0.0", "port": 8000}


def test_public_bind_without_a_key_is_a_warning():
    assert "without --api-key" in preflight.public_bind_warning("0.0.0.0", 8000, False)
    assert preflight.public_bind_warning("0.0.0.0", 8000, True) is None
    assert preflight.public_bind_warning("127.0.0.1", 8000, False) is None
    result, failed = preflight.run_preflight({"backend": "triton", "sglang_version": "0.5.9", "flags": FLAGS})
    assert not failed and any("all interfaces" in w for w in result["preflight_warnings"])


def test_a_key_is_passed_in_its_file_and_warned_about_nowhere():
    result, failed = preflight.run_preflight({"backend": "triton", "sglang_version": "0.5.9", "flags": FLAGS,
                                              "api_key_set": True,
                                              "secret_config_path": "/etc/moesweep/sglang.secrets.yaml"})
    assert not failed, result.get("msg")
    assert result["launch"]["argv"][-2:] == ["--config", "/etc/moesweep/sglang.secrets.yaml"]
    warnings = " ".join(result["preflight_warnings"])
    assert "command line" not in warnings and "cmdline" not in warnings and "all interfaces" not in warnings
    assert not hasattr(preflight, "api_key_argv_caveat")


def test_a_config_flag_is_a_refusal_naming_the_fix():
    result, failed = preflight.run_preflight({"backend": "triton", "sglang_version": "0.5.9",
                                              "flags": dict(FLAGS, config="/etc/mine.yaml")})
    assert failed and result["verdict"] == "unsupported"
    assert "sweep point triton" in result["msg"] and "--config" in result["msg"], result["msg"]
