"""Every plugin and role of the collection is documented, and its documentation is the code's.

``ansible-doc`` renders each module, role, callback and filter (its JSON parses and names every one found on
disk), so a new module, role, callback or filter cannot land undocumented. Each module's rendered options
(fragments merged) equal its argument spec: the one ``AnsibleModule`` is built with, or for an action-only
module the action plugin's module-level ``ARGUMENT_SPEC``. Each role's ``defaults/main.yml`` variables are
options of its ``main`` entry point with the same defaults, every option the callback reads is documented,
and every module's EXAMPLES use it by its FQCN.
"""

import ast
import importlib
import json
import os
import subprocess
import sys

import pytest
import yaml
from helpers.paths import REPO

COLLECTION = "moesweep.sweep"
PACKAGE = "ansible_collections.moesweep.sweep.plugins"
ANSIBLE_DOC = os.path.join(os.path.dirname(sys.executable), "ansible-doc")


def _python_plugins(kind):
    return sorted(p.stem for p in (REPO / "plugins" / kind).glob("*.py") if p.name != "__init__.py")


MODULES = _python_plugins("modules")
CALLBACKS = _python_plugins("callback")
ROLES = sorted(p.parent.parent.name for p in (REPO / "roles").glob("*/meta/argument_specs.yml"))
ALL_ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if p.is_dir())


def _filters():
    names = []
    for stem in _python_plugins("filter"):
        plugin = importlib.import_module(f"{PACKAGE}.filter.{stem}")
        names.extend(plugin.FilterModule().filters())
    return sorted(names)


FILTERS = _filters()


def _run_ansible_doc(kind, names):
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=str(REPO / "collections"), ANSIBLE_NOCOLOR="1")
    return subprocess.run([ANSIBLE_DOC, "-t", kind, "--json"] + [f"{COLLECTION}.{n}" for n in names],
                          capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300, check=False)


def _ansible_doc(kind, names):
    """name -> ansible-doc's JSON for it, or the error text ansible-doc gave for it. All plugins of a kind are
    rendered in one call; when that fails (ansible-doc then prints no JSON at all), each one on its own, so
    that only the broken plugin's test fails, with ansible-doc's message."""
    proc = _run_ansible_doc(kind, names)
    if proc.returncode == 0 and "ERROR" not in proc.stderr:
        docs = json.loads(proc.stdout)
        return {n: docs.get(f"{COLLECTION}.{n}") or f"ansible-doc printed nothing for it:\n{proc.stderr}"
                for n in names}
    out = {}
    for name in names:
        one = _run_ansible_doc(kind, [name])
        if one.returncode == 0 and "ERROR" not in one.stderr:
            out[name] = json.loads(one.stdout)[f"{COLLECTION}.{name}"]
        else:
            out[name] = f"ansible-doc -t {kind} {COLLECTION}.{name} failed (rc {one.returncode}):\n{one.stderr}"
    return out


def _rendered(docs, name):
    """The plugin's rendered documentation; fails the test with ansible-doc's error when it did not render."""
    entry = docs[name]
    if isinstance(entry, str):
        pytest.fail(entry, pytrace=False)
    return entry


@pytest.fixture(scope="module")
def module_docs():
    return _ansible_doc("module", MODULES)


@pytest.fixture(scope="module")
def role_docs():
    return _ansible_doc("role", ROLES)


@pytest.fixture(scope="module")
def callback_docs():
    return _ansible_doc("callback", CALLBACKS)


@pytest.fixture(scope="module")
def filter_docs():
    return _ansible_doc("filter", FILTERS)


def _raw_documentation(name):
    """The module's DOCUMENTATION as written (before ansible-doc merges its fragments)."""
    tree = ast.parse((REPO / "plugins" / "modules" / (name + ".py")).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "DOCUMENTATION":
            return yaml.safe_load(node.value.value)
    raise AssertionError(f"plugins/modules/{name}.py has no DOCUMENTATION")


# ---------------------------------------------------------------- the argument spec a module is built with

class _Built(Exception):
    def __init__(self, kwargs):
        super().__init__("AnsibleModule built")
        self.kwargs = kwargs


def _argument_spec(name, monkeypatch):
    """The spec of the module's AnsibleModule (its main() stopped at the constructor), else the action plugin's
    ARGUMENT_SPEC (action-only modules), else None."""
    from ansible.module_utils import basic

    def built(self, *args, **kwargs):
        if args:
            kwargs.setdefault("argument_spec", args[0])
        raise _Built(kwargs)

    source = (REPO / "plugins" / "modules" / (name + ".py")).read_text()
    if "AnsibleModule(" in source:
        monkeypatch.setattr(basic.AnsibleModule, "__init__", built)
        module = importlib.import_module(f"{PACKAGE}.modules.{name}")
        with pytest.raises(_Built) as info:
            module.main()
        return info.value.kwargs["argument_spec"]
    if (REPO / "plugins" / "action" / (name + ".py")).exists():
        action = importlib.import_module(f"{PACKAGE}.action.{name}")
        return getattr(action, "ARGUMENT_SPEC", None)
    return None


def _differences(doc_options, spec, where):
    """What differs between rendered options and an argument spec (names, type, elements, required, default,
    choices, aliases; suboptions recursively)."""
    doc_options = doc_options or {}
    spec = spec or {}
    out = [f"{where}{name}: in the argument spec, not documented" for name in sorted(set(spec) - set(doc_options))]
    out += [f"{where}{name}: documented, not in the argument spec" for name in sorted(set(doc_options) - set(spec))]
    for name in sorted(set(spec) & set(doc_options)):
        doc, arg = doc_options[name], spec[name]
        doc_type, arg_type = doc.get("type", "str"), arg.get("type", "str")
        if isinstance(arg_type, str) and doc_type != arg_type:
            out.append(f"{where}{name}: type {doc_type!r} documented, {arg_type!r} in the spec")
        for key, empty in (("elements", None), ("required", False), ("default", None), ("choices", None)):
            documented, specified = doc.get(key, empty), arg.get(key, empty)
            if documented != specified:
                out.append(f"{where}{name}: {key} {documented!r} documented, {specified!r} in the spec")
        documented, specified = sorted(doc.get("aliases") or []), sorted(arg.get("aliases") or [])
        if documented != specified:
            out.append(f"{where}{name}: aliases {documented!r} documented, {specified!r} in the spec")
        if doc.get("suboptions") or arg.get("options"):
            out.extend(_differences(doc.get("suboptions"), arg.get("options"), f"{where}{name}."))
    return out


# ---------------------------------------------------------------- modules

def test_the_collection_has_what_the_tests_loop_over():
    assert len(MODULES) >= 10 and CALLBACKS and FILTERS and ROLES
    assert ROLES == ALL_ROLES, f"roles without meta/argument_specs.yml: {sorted(set(ALL_ROLES) - set(ROLES))}"


@pytest.mark.parametrize("name", MODULES)
def test_module_renders(name, module_docs):
    entry = _rendered(module_docs, name)
    doc = entry["doc"]
    assert doc["module"] == name
    assert doc.get("short_description") and doc.get("description")
    assert doc.get("version_added") and doc.get("author")
    assert entry.get("examples"), f"{name} has no EXAMPLES"
    assert entry.get("return") is not None, f"{name} has no RETURN"
    fragments = _raw_documentation(name).get("extends_documentation_fragment") or []
    assert "moesweep.sweep.attributes" in fragments, (
        f"{name}: attributes come from the moesweep.sweep.attributes fragment")
    for attribute, value in (doc.get("attributes") or {}).items():
        assert value.get("description"), f"{name}: attribute {attribute} has no description (a fragment gives it)"
        assert value.get("support"), f"{name}: attribute {attribute} has no support level"


@pytest.mark.parametrize("name", MODULES)
def test_module_options_are_its_argument_spec(name, module_docs, monkeypatch):
    spec = _argument_spec(name, monkeypatch)
    assert spec is not None, (
        f"{name}: no argument spec found: neither an AnsibleModule in plugins/modules/{name}.py nor a module-level "
        f"ARGUMENT_SPEC in plugins/action/{name}.py")
    assert _differences(_rendered(module_docs, name)["doc"].get("options"), spec, "") == []


@pytest.mark.parametrize("name", MODULES)
def test_module_examples_use_it_by_fqcn(name, module_docs):
    tasks = yaml.safe_load(_rendered(module_docs, name)["examples"])
    assert isinstance(tasks, list) and tasks, f"{name}: EXAMPLES is not a list of tasks"
    used = [task for task in tasks if f"{COLLECTION}.{name}" in task
            or any(f"{COLLECTION}.{name}" in (t or {}) for t in task.get("block", []))]
    assert used, f"{name}: no example task calls {COLLECTION}.{name}"


def test_the_differences_are_found():
    """The comparison is not vacuous: a missing, an extra and a changed option are each reported."""
    spec = {"a": {"type": "int", "default": 1}, "b": {"type": "dict", "options": {"c": {"required": True}}}}
    doc = {"a": {"type": "int", "default": 2}, "b": {"type": "dict", "suboptions": {"c": {}}}, "z": {}}
    found = _differences(doc, spec, "")
    assert found == ["z: documented, not in the argument spec", "a: default 2 documented, 1 in the spec",
                     "b.c: required False documented, True in the spec"]


# ---------------------------------------------------------------- roles

@pytest.mark.parametrize("name", ROLES)
def test_role_renders_with_its_defaults(name, role_docs):
    entry_points = _rendered(role_docs, name)["entry_points"]
    assert "main" in entry_points, f"{name}: no main entry point in meta/argument_specs.yml"
    for entry, doc in entry_points.items():
        assert doc.get("short_description"), f"{name}/{entry} has no short_description"
        for option, value in (doc.get("options") or {}).items():
            assert value.get("description"), f"{name}/{entry}: option {option} has no description"
    options = entry_points["main"].get("options") or {}
    defaults = yaml.safe_load((REPO / "roles" / name / "defaults" / "main.yml").read_text()) or {}
    undocumented = sorted(set(defaults) - set(options))
    assert not undocumented, f"{name}: defaults/main.yml variables not in meta/argument_specs.yml: {undocumented}"
    # A default given in both places is the same (a large one, e.g. a dict of overlays, may live only in
    # defaults/main.yml; a templated one is evaluated at run time).
    differ = [f"{var}: default {value!r}, argument_specs says {options[var]['default']!r}"
              for var, value in sorted(defaults.items())
              if "default" in options[var] and not (isinstance(value, str) and "{{" in value)
              and value != options[var]["default"]]
    assert differ == [], name


# ---------------------------------------------------------------- callback and filters

@pytest.mark.parametrize("name", CALLBACKS)
def test_callback_renders_with_every_option_it_reads(name, callback_docs):
    doc = _rendered(callback_docs, name)["doc"]
    assert doc["name"] == name and doc.get("short_description") and doc.get("type")
    tree = ast.parse((REPO / "plugins" / "callback" / (name + ".py")).read_text())
    read = {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get_option"
            and node.args and isinstance(node.args[0], ast.Constant)}
    documented = set(doc.get("options") or {})
    assert read <= documented, f"{name} reads undocumented options {sorted(read - documented)}"


@pytest.mark.parametrize("name", FILTERS)
def test_filter_renders(name, filter_docs):
    entry = _rendered(filter_docs, name)
    doc = entry["doc"]
    assert doc["name"] == name and doc.get("short_description") and doc.get("description")
    assert (doc.get("options") or {}).get("_input"), f"{name}: the filter's input is not documented"
    assert entry.get("examples"), f"{name} has no EXAMPLES"
    assert entry.get("return", {}).get("_value"), f"{name}: its result is not documented"
