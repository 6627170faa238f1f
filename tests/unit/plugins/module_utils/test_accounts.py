"""account_commands: the groupadd / useradd / usermod calls that make the service account as asked, and nothing when
it already is."""

from __future__ import annotations

from ansible_collections.moesweep.sweep.plugins.module_utils.accounts import account_commands

WANT = {"user": "sglang", "group": "sglang", "groups": ["video"], "home": "/var/lib/sglang",
        "shell": "/usr/sbin/nologin"}
AS_ASKED = {"group": "sglang", "home": "/var/lib/sglang", "shell": "/usr/sbin/nologin"}


def argvs(result):
    error, commands = result
    assert error is None
    return [argv for argv, _what in commands]


def test_a_new_host_gets_a_system_group_then_a_system_user_in_video():
    assert argvs(account_commands(WANT, False, None, [], ["video"])) == [
        ["groupadd", "--system", "sglang"],
        ["useradd", "--system", "--gid", "sglang", "--home-dir", "/var/lib/sglang", "--no-create-home",
         "--shell", "/usr/sbin/nologin", "--groups", "video", "sglang"]]


def test_an_existing_group_is_not_made_again():
    assert [a[0] for a in argvs(account_commands(WANT, True, None, [], ["video"]))] == ["useradd"]


def test_an_account_as_asked_needs_nothing():
    assert account_commands(WANT, True, AS_ASKED, ["video", "render"], ["video"]) == (None, [])


def test_a_user_outside_video_joins_it_and_keeps_its_other_groups():
    error, commands = account_commands(WANT, True, AS_ASKED, ["render"], ["video"])
    assert error is None
    assert commands == [(["usermod", "--append", "--groups", "video", "sglang"], "user sglang: joined video")]


def test_a_user_changed_by_hand_gets_its_primary_group_home_and_shell_back():
    user = {"group": "users", "home": "/home/sglang", "shell": "/bin/bash"}
    error, commands = account_commands(WANT, True, user, ["video"], ["video"])
    assert error is None
    (argv, what), = commands
    assert argv == ["usermod", "--gid", "sglang", "--home", "/var/lib/sglang", "--shell", "/usr/sbin/nologin",
                    "sglang"]
    assert "primary group sglang (was users)" in what and "shell /usr/sbin/nologin (was /bin/bash)" in what


def test_the_primary_group_listed_among_the_groups_is_not_joined_again():
    want = dict(WANT, groups=["sglang", "video"])
    assert account_commands(want, True, AS_ASKED, ["video"], ["sglang", "video"]) == (None, [])


def test_a_supplementary_group_missing_on_the_host_is_an_error_and_nothing_runs():
    error, commands = account_commands(WANT, False, None, [], [])
    assert commands == [] and "video" in error and "do not exist" in error
