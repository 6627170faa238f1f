# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Offline stand-in for the get-pip.py script that ansible-test bootstraps its sanity virtualenvs with.

ansible-test creates each sanity test's virtualenv without pip and then runs a cached
``~/.ansible/test/cache/get_pip_<version>.py``, downloading it from ci-files.testing.ansible.com when
absent (ansible_test/_util/target/setup/requirements.py, ``bootstrap``). That host is out of reach where
moesweep's CI runs (PyPI only), so ``tests/sanity/run.sh`` puts this file there instead, next to the
wheel of the same pip version downloaded from PyPI.

It does what get-pip.py does (https://github.com/pypa/get-pip/blob/main/templates/default.py): put a
copy of pip on ``sys.path`` - here the wheel, which pip supports running from - strip get-pip's own
``--no-setuptools`` / ``--no-wheel`` options and run ``pip install --upgrade --force-reinstall`` with
the remaining arguments (ansible-test passes ``pip==<version>``).
"""

import glob
import os
import sys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    wheels = sorted(glob.glob(os.path.join(here, "pip-*-py3-none-any.whl")))
    if not wheels:
        sys.exit(f"no pip wheel next to {__file__}: run tests/sanity/run.sh, which downloads it from PyPI")
    sys.path.insert(0, wheels[-1])
    from pip._internal.cli.main import main as pip_main

    args = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
    sys.exit(pip_main(["install", "--upgrade", "--force-reinstall"] + args))


if __name__ == "__main__":
    main()
