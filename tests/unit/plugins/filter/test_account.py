"""The account_differences filter: plugin_utils.account exposed to Jinja, refusing what getent cannot have given."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

# isort: split
from ansible_collections.moesweep.sweep.plugins.filter.account import FilterModule

WANT = {"user": "sglang", "group": "sglang", "groups": ["video"], "home": "/var/lib/sglang",
        "shell": "/usr/sbin/nologin"}


def test_the_filter_is_the_decision():
    f = FilterModule().filters()["account_differences"]
    assert f(WANT, {}, {"video": ["x", "44", ""]}) == {"missing_groups": [], "group": True,
                                                      "user": ["user sglang created"]}


@pytest.mark.parametrize("want, passwd", [(dict(WANT, user=""), {}), ("sglang", {}), (WANT, ["sglang"])])
def test_bad_input_is_an_error_that_names_it(want, passwd):
    f = FilterModule().filters()["account_differences"]
    with pytest.raises(AnsibleFilterError, match="account_differences"):
        f(want, passwd, {})
