"""account_differences: how the host's getent databases differ from the service account asked for, so that the
server role's install phase runs ansible.builtin.group / user only where they do. The databases are shaped as
ansible.builtin.getent returns them (recorded on Debian 12)."""

from __future__ import annotations

from ansible_collections.moesweep.sweep.plugins.plugin_utils.account import account_differences

WANT = {"user": "sglang", "group": "sglang", "groups": ["video"], "home": "/var/lib/sglang",
        "shell": "/usr/sbin/nologin"}
# ansible.builtin.getent on Debian 12: passwd -> [password, uid, gid, gecos, home, shell]; group -> [password, gid,
# members]
BASE_GROUPS = {"root": ["x", "0", ""], "video": ["x", "44", ""], "render": ["x", "105", ""]}
PASSWD = {"root": ["x", "0", "0", "root", "/root", "/bin/bash"]}
SGLANG = ["x", "998", "998", "", "/var/lib/sglang", "/usr/sbin/nologin"]


def groups(**extra):
    out = dict(BASE_GROUPS, sglang=["x", "998", ""])
    out.update(extra)
    return out


def test_a_new_host_needs_the_group_then_the_user():
    assert account_differences(WANT, PASSWD, BASE_GROUPS) == {
        "missing_groups": [], "group": True, "user": ["user sglang created"]}


def test_an_existing_group_is_not_made_again():
    out = account_differences(WANT, PASSWD, groups())
    assert out["group"] is False and out["user"] == ["user sglang created"]


def test_an_account_as_asked_needs_nothing():
    passwd = dict(PASSWD, sglang=SGLANG)
    assert account_differences(WANT, passwd, groups(video=["x", "44", "sglang"], render=["x", "105", "sglang"])) == {
        "missing_groups": [], "group": False, "user": []}


def test_a_user_outside_video_joins_it_and_its_other_groups_are_not_looked_at():
    passwd = dict(PASSWD, sglang=SGLANG)
    out = account_differences(WANT, passwd, groups(render=["x", "105", "sglang"]))
    assert out == {"missing_groups": [], "group": False, "user": ["joined video"]}


def test_a_user_changed_by_hand_gets_its_primary_group_home_and_shell_back():
    passwd = dict(PASSWD, sglang=["x", "998", "100", "", "/home/sglang", "/bin/bash"])
    out = account_differences(WANT, passwd, groups(users=["x", "100", ""], video=["x", "44", "sglang"]))
    assert out["user"] == ["primary group sglang (was users)", "home /var/lib/sglang (was /home/sglang)",
                           "shell /usr/sbin/nologin (was /bin/bash)"]


def test_the_primary_group_listed_among_the_groups_is_not_joined_again():
    passwd = dict(PASSWD, sglang=SGLANG)
    want = dict(WANT, groups=["sglang", "video"])
    assert account_differences(want, passwd, groups(video=["x", "44", "sglang"]))["user"] == []


def test_a_supplementary_group_missing_on_the_host_is_named():
    out = account_differences(WANT, PASSWD, {"root": ["x", "0", ""]})
    assert out["missing_groups"] == ["video"]


def test_members_listed_among_others_count():
    passwd = dict(PASSWD, sglang=SGLANG)
    out = account_differences(WANT, passwd, groups(video=["x", "44", "alice,sglang,bob"]))
    assert out["user"] == []
    out = account_differences(WANT, passwd, groups(video=["x", "44", "sglang2"]))
    assert out["user"] == ["joined video"]
