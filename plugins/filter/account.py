# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The filter that compares the service account asked for with the host's getent databases. The decision is
``plugin_utils.account``; this only exposes it to Jinja."""

from ansible.errors import AnsibleFilterError
from ansible_collections.moesweep.sweep.plugins.plugin_utils.account import account_differences as _differences

_KEYS = ("user", "group", "home", "shell")


def account_differences(want, getent_passwd, getent_group):
    """How the host's account differs from ``want`` (see plugin_utils.account)."""
    if not isinstance(want, dict) or any(not want.get(k) for k in _KEYS):
        raise AnsibleFilterError("account_differences expects a mapping with %s, got %r" % (", ".join(_KEYS), want))
    for name, value in (("getent_passwd", getent_passwd), ("getent_group", getent_group)):
        if value is not None and not isinstance(value, dict):
            raise AnsibleFilterError("account_differences: %s must be ansible.builtin.getent's mapping, got %s"
                                     % (name, type(value).__name__))
    return _differences(want, getent_passwd, getent_group)


class FilterModule:
    def filters(self):
        return {"account_differences": account_differences}
