# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The service account a unit runs as: how the host's account databases differ from what is asked.

Pure: the caller reads the databases with ``ansible.builtin.getent`` (``getent_passwd``: user -> [password, uid, gid,
gecos, home, shell]; ``getent_group``: group -> [password, gid, members "a,b"]), and runs ``ansible.builtin.group``
and ``ansible.builtin.user`` only where this says the host differs. Only what is asked is looked at: a user's other
groups, its UID and its password are left alone (the role's user task appends groups).
"""

from __future__ import annotations


def _members(entry):
    return [m for m in str((entry or ["", "", ""])[2] or "").split(",") if m]


def account_differences(want, getent_passwd, getent_group):
    """What must change on the host so that the account ``want`` exists as asked.

    want: ``user``, ``group`` (its primary group), ``groups`` (supplementary groups it must be in), ``home``,
    ``shell``.

    Returns {"missing_groups": the supplementary groups the host does not have (nothing may be made then),
    "group": whether the primary group must be made, "user": what differs of the user, [] when it is as asked}.
    """
    passwd, groups = getent_passwd or {}, getent_group or {}
    user, group = want["user"], want["group"]
    supplementary = [g for g in want.get("groups") or [] if g != group]
    out = {"missing_groups": [g for g in supplementary if g not in groups],
           "group": group not in groups, "user": []}
    entry = passwd.get(user)
    if entry is None:
        out["user"] = ["user %s created" % user]
        return out
    by_gid = dict((str(v[1]), name) for name, v in groups.items() if v)
    primary = by_gid.get(str(entry[2]), str(entry[2]))
    if primary != group:
        out["user"].append("primary group %s (was %s)" % (group, primary))
    join = [g for g in supplementary if user not in _members(groups.get(g))]
    if join:
        out["user"].append("joined %s" % ", ".join(join))
    if entry[4] != want["home"]:
        out["user"].append("home %s (was %s)" % (want["home"], entry[4]))
    if entry[5] != want["shell"]:
        out["user"].append("shell %s (was %s)" % (want["shell"], entry[5]))
    return out
