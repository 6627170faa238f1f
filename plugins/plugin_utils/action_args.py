# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The one way the collection's action plugins check their task's arguments: against the argument spec their
module documents, failing the task with every problem named after the action."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator


def validated(action, spec, args):
    """The task's ``args`` checked and completed with defaults by ``spec``; AnsibleActionFail otherwise."""
    result = ArgumentSpecValidator(spec).validate(args)
    if result.error_messages:
        raise AnsibleActionFail("%s: %s" % (action, "; ".join(result.error_messages)))
    return result.validated_parameters
