# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Filters that split a mapping into its secret and public items (names like HF_TOKEN, *_API_KEY,
*_PASSWORD), so that roles keep secrets out of what they show, plan and record. The decision is
``module_utils.secrets``; these only expose it to Jinja."""

from ansible.errors import AnsibleFilterError
from ansible_collections.moesweep.sweep.plugins.module_utils import secrets


def _mapping(value, name):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AnsibleFilterError("%s expects a mapping, got %s" % (name, type(value).__name__))
    return value


def secret_items(value):
    """The items whose name is secret."""
    return secrets.secret_items(_mapping(value, "secret_items"))


def public_items(value):
    """The items whose name is not secret."""
    return secrets.public_items(_mapping(value, "public_items"))


class FilterModule:
    def filters(self):
        return {"secret_items": secret_items, "public_items": public_items}
