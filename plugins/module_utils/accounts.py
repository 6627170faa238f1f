# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The service account a unit runs as: what must change on the host so that it exists as asked.

Pure: the caller reads the host's account databases (``pwd``, ``grp``) and runs the commands returned
(shadow-utils' ``groupadd``, ``useradd``, ``usermod``, as ``ansible.builtin.group`` and ``ansible.builtin.user``
run them on Linux). Only what is asked is checked: a user's other groups, its UID and its password are left alone.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def account_commands(want, group_exists, user, user_groups, existing_groups):
    """The commands that give the host the account ``want`` asks for, in order, and what each does.

    want: ``user``, ``group`` (its primary group), ``groups`` (supplementary groups it must be in, appended to the
    ones it has), ``home``, ``shell``; the user and group are system accounts when created.
    group_exists: whether the primary group exists now.
    user: None when the user does not exist, else its ``group`` (the primary group's name), ``home`` and ``shell``.
    user_groups: the supplementary groups the user is in now (empty when it does not exist).
    existing_groups: which of ``want['groups']`` exist on the host.

    Returns (error, [(argv, description)]): error names a supplementary group that does not exist (nothing is
    created then); the list is empty when the account is as asked.
    """
    missing = [g for g in want["groups"] if g not in existing_groups and g != want["group"]]
    if missing:
        return ("the service user %s must join the group(s) %s, which do not exist on the host: create them "
                "(the video group comes with the GPU driver's packages) or leave them out of the account's groups"
                % (want["user"], ", ".join(missing))), []
    commands = []
    if not group_exists:
        commands.append((["groupadd", "--system", want["group"]], "group %s created" % want["group"]))
    if user is None:
        argv = ["useradd", "--system", "--gid", want["group"], "--home-dir", want["home"], "--no-create-home",
                "--shell", want["shell"]]
        if want["groups"]:
            argv += ["--groups", ",".join(want["groups"])]
        commands.append((argv + [want["user"]], "user %s created" % want["user"]))
        return None, commands
    argv, what = [], []
    if user["group"] != want["group"]:
        argv += ["--gid", want["group"]]
        what.append("primary group %s (was %s)" % (want["group"], user["group"]))
    join = [g for g in want["groups"] if g not in user_groups and g not in (user["group"], want["group"])]
    if join:
        argv += ["--append", "--groups", ",".join(join)]
        what.append("joined %s" % ", ".join(join))
    if user["home"] != want["home"]:
        argv += ["--home", want["home"]]
        what.append("home %s (was %s)" % (want["home"], user["home"]))
    if user["shell"] != want["shell"]:
        argv += ["--shell", want["shell"]]
        what.append("shell %s (was %s)" % (want["shell"], user["shell"]))
    if argv:
        commands.append((["usermod"] + argv + [want["user"]], "user %s: %s" % (want["user"], "; ".join(what))))
    return None, commands
