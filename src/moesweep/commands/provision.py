"""``moesweep provision``: run site.yml (the pinned CUDA toolkit and SGLang stack) through the Python API.

Exit status: 0 provisioned, 1 a host failed (the playbook's message names the fix), 2 could not run.
"""

from __future__ import annotations

import argparse
import sys

from moesweep.commands.sweep import BadInput, parse_extra


def register(sub) -> None:
    p = sub.add_parser("provision", help="install the pinned CUDA toolkit and SGLang stack on the hosts (site.yml)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-i", "--inventory", default=None, help="inventory (default: ansible.cfg's)")
    p.add_argument("--limit", default=None, help="host pattern")
    p.add_argument("-e", "--extra-var", action="append", default=[], metavar="KEY=VALUE",
                   help="extra variable, as ansible-playbook -e (repeatable)")
    p.set_defaults(func=run)


def run(args) -> int:
    from moesweep import api

    try:
        extra, files = parse_extra(args.extra_var)
        if files:
            raise BadInput("provision takes KEY=VALUE extra variables only")
        run = api.provision(args.inventory, limit=args.limit, **extra)
    except (BadInput, api.MoesweepError) as exc:
        print(f"moesweep provision: error: {exc}", file=sys.stderr)
        return 2
    print(f"site.yml: {run.status} (ansible rc {run.rc}) in {run.seconds:.0f} s")
    return 0 if run.rc == 0 else 1
