#!/usr/bin/env bash
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
#
# ansible-test sanity on the collection exactly as `ansible-galaxy collection build` ships it, with the ansible-core
# and the Python of the venv in BIN: ansible-test reads the exceptions from tests/sanity/ignore-<major.minor>.txt of
# that ansible-core (one file per tested release: 2.19, 2.20, 2.21), each line with its reason.
#
# ansible-test runs only from a directory ending in ansible_collections/<namespace>/<name>; the repository
# root is the collection but not at such a path (the committed collections/ shim is symlinks, which
# ansible-test does not follow). So the collection is built (galaxy.yml's build_ignore applies) and
# unpacked into a temporary ansible_collections/moesweep/sweep, and ansible-test runs there with the
# local Python (--local: no containers), offline except for PyPI: each sanity test gets a cached
# virtualenv of ansible-test's own pinned requirements, bootstrapped by tests/sanity/get_pip.py.
#
#   tests/sanity/run.sh                      # the gate `make lint` runs
#   tests/sanity/run.sh --test validate-modules -v
#
# Arguments replace the default selection (one run on the whole collection). Environment: BIN (the venv's bin, default .venv/bin),
# SANITY_PYTHON (the Python version the tests run on, default the venv's),
# MOESWEEP_SANITY_CACHE (ansible-test's home: its virtualenvs and the pip bootstrap; default
# ~/.cache/moesweep/ansible-test).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=$(cd "${BIN:-$repo/.venv/bin}" && pwd)
cache=${MOESWEEP_SANITY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/moesweep/ansible-test}

# Every sanity test of ansible-core runs on the whole collection, except:
#   pylint  - not a gate: ruff (pyproject.toml) is the collection's Python linter;
#   pep8    - on the Ansible plugins and these tests only: ruff with the collection's settings covers the Python
#             package, the simulator, the scripts and the other tests;
#   shebang - not on the trees that are not Ansible content (the controller package, the simulated host, the
#             benchmarks and scripts): their executables say python3 because they run on Debian's python3
#             (the simulated hosts have no `python`), where ansible-test wants `#!/usr/bin/env python`.
skip=(--skip-test pylint --skip-test pep8 --skip-test shebang)
pep8_targets=(plugins/ tests/sanity/ tests/unit/test_docs.py)
# The managed hosts' Python (Debian 12's python3): where the venv runs another (ansible-core 2.20 and later need 3.12+
# on the controller), compile and import run once more on it, on the target-side code (modules, module_utils).
target_python=3.11
not_ansible_content=(src simulator bench scripts)

for tool in ansible-galaxy ansible-test pip; do
  [ -x "$bin/$tool" ] || { echo "tests/sanity/run.sh: $bin/$tool not found: run make venv first" >&2; exit 2; }
done

# The venv's Python runs the sanity tests; its ansible-core names the ignore file, which must exist (without one
# ansible-test would report every exception as an error, with no word of the missing file).
read -r python_version core_version < <("$bin/python" -c 'import sys
from ansible.release import __version__
print("%d.%d" % sys.version_info[:2], ".".join(__version__.split(".")[:2]))')
ignore="tests/sanity/ignore-$core_version.txt"
if [ ! -f "$repo/$ignore" ]; then
  tested=()
  for file in "$repo"/tests/sanity/ignore-*.txt; do tested+=("$(basename "$file" .txt | sed 's/^ignore-//')"); done
  echo "tests/sanity/run.sh: ansible-core $core_version (in $bin) has no $ignore; the tested releases are" \
    "${tested[*]} (make venv installs one)" >&2
  exit 2
fi
echo "tests/sanity/run.sh: ansible-core $("$bin/python" -c 'from ansible.release import __version__; print(__version__)')" \
  "on Python $python_version, exceptions from $ignore"

# ansible-test bootstraps pip in each sanity virtualenv from ~/.ansible/test/cache/get_pip_<version>.py,
# downloading it from ci-files.testing.ansible.com when absent; put the offline stand-in there instead, with
# the wheel of the pip version ansible-test pins, from PyPI.
pip_version=$("$bin/python" -c 'from types import SimpleNamespace as P
from ansible_test._internal.python_requirements import get_venv_packages
print(get_venv_packages(P(version="'"$python_version"'"))["pip"])')
bootstrap="$cache/.ansible/test/cache"
mkdir -p "$bootstrap"
if [ ! -f "$bootstrap/pip-$pip_version-py3-none-any.whl" ]; then
  "$bin/pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$bootstrap" "pip==$pip_version"
fi
cp "$repo/tests/sanity/get_pip.py" "$bootstrap/get_pip_${pip_version//./_}.py"

work=$(mktemp -d "${TMPDIR:-/tmp}/moesweep-sanity.XXXXXX")
trap 'rm -rf "$work"' EXIT
read -r namespace name < <("$bin/python" -c 'import sys, yaml
g = yaml.safe_load(open(sys.argv[1]))
print(g["namespace"], g["name"])' "$repo/galaxy.yml")
"$bin/ansible-galaxy" collection build --output-path "$work" "$repo" >/dev/null
collection="$work/ansible_collections/$namespace/$name"
mkdir -p "$collection"
tar -xzf "$work/$namespace-$name-"*.tar.gz -C "$collection"

cd "$collection"
# ANSIBLE_CONFIG (exported by the Makefile) would point ansible-doc at the checkout instead of this copy.
sanity() { env -u ANSIBLE_CONFIG HOME="$cache" "$bin/ansible-test" sanity --local --python "${SANITY_PYTHON:-$python_version}" --color no "$@"; }
if [ $# -gt 0 ]; then
  sanity "$@"
else
  sanity "${skip[@]}"
  content=()
  for entry in * .[!.]*; do
    [ -e "$entry" ] || continue
    [[ " ${not_ansible_content[*]} " == *" $entry "* ]] && continue
    [ -d "$entry" ] && entry="$entry/"
    content+=("$entry")
  done
  sanity --test shebang "${content[@]}"
  sanity --test pep8 "${pep8_targets[@]}"
  if [ "$python_version" != "$target_python" ]; then
    SANITY_PYTHON=$target_python sanity --test compile --test import
  fi
fi
