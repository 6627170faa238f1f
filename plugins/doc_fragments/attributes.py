# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Attribute descriptions shared by the collection's modules (as ansible-core's ``action_common_attributes``
and community.general's ``attributes`` fragments): a module states only its support level and details.

Every module extends ``moesweep.sweep.attributes`` (check mode, diff mode, platform) and, as it applies,
``.ACTION`` (an action plugin does the work on the controller), ``.IDEMPOTENT``, ``.READ_ONLY`` (the support of a module
that changes nothing) and ``.FACTS``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Every module: check mode, diff mode and the platforms it runs against.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in C(check_mode) and return changed status prediction without modifying the target.
  diff_mode:
    description:
      - Will return details on what has changed (or possibly needs changing in C(check_mode)), when in diff mode.
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
"""

    # Modules whose work happens (partly or wholly) in an action plugin on the controller.
    ACTION = r"""
options: {}
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the work happen on the controller.
"""

    # Modules whose effect on the target is defined by a repeat run.
    IDEMPOTENT = r"""
options: {}
attributes:
  idempotent:
    description:
      - When run twice in a row outside check mode, with the same arguments, the second run indicates no change.
"""

    # Modules that change nothing on the host: what each attribute's support is (a module states only its details).
    # Listed before the base fragment: an earlier fragment's values win, and the base says platform support N/A.
    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: full
    details: It only reads.
  platform:
    support: full
    platforms: posix
"""

    # Modules that only gather facts.
    FACTS = r"""
options: {}
attributes:
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
"""
