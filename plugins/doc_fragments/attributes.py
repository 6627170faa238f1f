# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see galaxy.yml)
"""Attribute descriptions shared by the collection's modules (as community.general's ``attributes`` fragment)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Every module: check mode and diff mode support.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in C(check_mode) and return changed status prediction without modifying the target.
  diff_mode:
    description:
      - Will return details on what has changed (or possibly needs changing in C(check_mode)), when in diff mode.
"""

    # Modules whose effect on the target is defined by a repeat run.
    IDEMPOTENT = r"""
options: {}
attributes:
  idempotent:
    description:
      - When run twice in a row outside check mode, with the same arguments, the second run indicates no change.
"""

    # Modules that only gather facts.
    FACTS = r"""
options: {}
attributes:
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
"""
