"""The one harness for module unit tests: ``run_module(module, args)`` runs ``module.main()`` with the
arguments through ansible-core's ``patch_module_args``, ``exit_json`` / ``fail_json`` raising, and returns
``(kind, result)`` with kind ``"exit"`` or ``"fail"`` (after community.internal_test_tools'
``tests/unit/plugins/modules/utils.py``). Patch ``run_command`` / ``get_bin_path`` / clocks with monkeypatch."""

from __future__ import annotations

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class ModuleExit(Exception):
    def __init__(self, kind, result):
        super().__init__(kind)
        self.kind = kind
        self.result = result


@pytest.fixture
def run_module(monkeypatch):
    def _exit(self, **kw):
        raise ModuleExit("exit", kw)

    def _fail(self, msg, **kw):
        kw["msg"] = msg
        raise ModuleExit("fail", kw)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail)

    def call(module, args):
        with patch_module_args(args), pytest.raises(ModuleExit) as info:
            module.main()
        return info.value.kind, info.value.result

    return call
