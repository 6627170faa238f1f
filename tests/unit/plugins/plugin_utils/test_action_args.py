"""plugin_utils.action_args: the action plugins' one argument check."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleActionFail
from ansible_collections.moesweep.sweep.plugins.plugin_utils import action_args

SPEC = {"state": {"type": "str", "choices": ["start", "stop"], "default": "start"},
        "point": {"type": "str", "required": True}}


def test_defaults_are_filled_in():
    assert action_args.validated("x", SPEC, {"point": "triton"}) == {"state": "start", "point": "triton"}


def test_every_problem_is_named_after_the_action():
    with pytest.raises(AnsibleActionFail) as err:
        action_args.validated("sweep_record", SPEC, {"state": "pause"})
    text = str(err.value)
    assert text.startswith("sweep_record: ") and "point" in text and "pause" in text
