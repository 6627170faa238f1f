# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""sglang's own argument handling, run on one launch line before anything restarts: the dry run.

This file is two things:

* a library (stdlib only, importable by modules and the controller): ``request`` builds what the dry run is asked,
  ``parse_output`` reads its answer, ``error_url`` cites a failing line;
* a program, run by an interpreter that can import sglang (the host's server venv, or the controller's sandbox of
  the pinned wheel, ``plugin_utils/sglang_sandbox.py``): ``python - < request.json`` with this file's source as the
  script (``program_source()``). It prints one line, ``MOESWEEP_DRYRUN {json}``, on its standard output.

What the program runs, in the order the real launch runs it (sglang v0.5.9 ``python/sglang/launch_server.py`` ->
``srt/server_args.py`` ``prepare_server_args`` -> ``ServerArgs.__post_init__``; ``srt/entrypoints/engine.py``
``_launch_subprocesses`` -> ``check_server_args``, ``_launch_scheduler_processes``; the scheduler's
``ModelRunner`` -> ``torch.cuda.set_device(gpu_id)``; ``srt/model_loader/loader.py`` ``_get_quantization_config``,
the quantization method's capability gate):

1. ``arguments``: the real parser (``--config`` files merged as sglang merges them); argparse's exit 2 is a refusal;
2. ``server_args``: ``ServerArgs.__post_init__`` (defaults resolved for the model and the GPUs, the model's
   config.json read through sglang's own ``get_config``) and ``check_server_args``;
3. ``scheduler_init``: every GPU the node's scheduler processes would take (the ranks' ``gpu_id`` as
   ``_launch_scheduler_processes`` / the data-parallel controller compute them) against the GPUs the process sees;
4. ``model_init`` (partly): the model's quantization config and the loader's capability gate;
5. ``attention_init`` (where the GPU answers are the facts'): the gates of the attention backends the model runner
   would create (``srt/layers/attention/attention_registry.py``: FlashAttention 3 on SM80/SM90 only, TRT-LLM MLA on
   MLA models only, ...), each factory called with a stand-in runner that holds the real model config and arguments
   on the ``meta`` device; only an exception its own gate raises counts (what comes after the gate needs the real
   runner). Not on a real GPU, where constructing a backend could allocate memory or build kernels.

Nothing binds a port, loads a weight or allocates GPU memory: the GPUs are only counted and asked their
capability (a real host: through torch, which opens no context for that). What runs after these stages (the MoE
method's construction, the kernels' JIT builds, autotune, CUDA graph capture) is the knowledge base's to judge
(``data/compat.yml``).

GPU answers: on a host whose torch sees its GPUs, torch answers (``gpus: real``). Where it cannot (the controller's
sandbox, or a simulated host whose torch is a CPU build), the request carries the GPUs (count, SM, name, memory)
and the program answers torch's CUDA queries and sglang's ``nvidia-smi --query-gpu`` calls from them
(``gpus: facts``); the answer says which.

Imports: on a real host every import is real; one that fails is a failed launch like any other. In a sandbox
(``stub_missing: true``) an import that sglang's own modules make of a package the sandbox lacks (torch, triton,
sgl_kernel, zmq, ...) is answered by a permissive stub module and listed in ``stubbed``; imports made by real
third-party packages fail as they would (so transformers' optional backends stay optional).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import sys

MARKER = "MOESWEEP_DRYRUN "
VERDICTS = ("accepted", "refused", "undecided")
STAGES = ("arguments", "server_args", "scheduler_init", "model_init", "attention_init")
SOURCE_URL = "https://github.com/sgl-project/sglang/blob/v%s/python/%s#L%d"


def request(argv, environment=None, gpus=None, stub_missing=False, sys_path=None, sglang_version=None,
            offline=False, torch_version=None, stub_names=None, gpus_fallback=False, import_is_launch=True):
    """What the program is asked: the server's argv (the words after ``python -m sglang.launch_server``), the
    unit's environment (applied over the program's own), the GPUs to answer from (None: torch's own answers),
    whether missing imports of sglang's are stubbed, the import path to put first, and whether the model hub is
    off (``HF_HUB_OFFLINE=1``, the sandbox: it never downloads); ``torch_version``: what a sandbox's torch
    stand-in says it is (the stack's pin); ``stub_names``: with ``stub_missing``, the top-level import names that may
    be stubs (the packages the stack installs on a host but the sandbox lacks), whoever imports them; None: any
    package sglang's own modules import; ``gpus_fallback``: the GPUs given answer only where torch itself sees
    none (a host's CPU build of torch, as on a simulated host); ``import_is_launch``: whether the launch itself
    imports this interpreter's sglang (then an import that fails is the launch's failure, a refusal; else the dry
    run is undecided)."""
    return {
        "argv": [str(a) for a in argv],
        "environment": dict((str(k), "" if v is None else str(v)) for k, v in (environment or {}).items()),
        "gpus": gpus,
        "stub_missing": bool(stub_missing),
        "sys_path": list(sys_path or []),
        "sglang_version": sglang_version,
        "offline": bool(offline),
        "torch_version": torch_version,
        "stub_names": None if stub_names is None else sorted(set(stub_names)),
        "gpus_fallback": bool(gpus_fallback),
        "import_is_launch": bool(import_is_launch),
    }


def gpus_from_facts(facts, cuda_version=None):
    """The GPUs a dry run answers from, out of ``gpu_facts`` (``ansible_facts.moesweep_gpu``): None without an SM
    (then a sandbox cannot answer torch's queries: the dry run says so). Without a GPU count, ``count`` is None:
    every device index answers, and the check of the ranks' GPUs against the host's is not made."""
    facts = facts or {}
    count = facts.get("gpu_count") or facts.get("count")
    sm = facts.get("sm_int") or facts.get("sm")
    if isinstance(sm, str):
        digits = re.sub(r"[^0-9]", "", sm)
        sm = int(digits) if digits else None
    if not sm:
        return None
    memory = facts.get("memory_total_mib")
    if not memory:
        gpus = facts.get("gpus") or []
        totals = [g.get("memory_total_mib") for g in gpus if isinstance(g, dict) and g.get("memory_total_mib")]
        memory = min(totals) if totals else None
    names = facts.get("gpu_models") or [facts.get("gpu_model") or facts.get("name") or "NVIDIA GPU"]
    return {
        "count": int(count) if count else None,
        "capability": [int(sm) // 10, int(sm) % 10],
        "name": str(names[0]),
        "memory_total_mib": int(memory) if memory else None,
        "cuda_version": str(cuda_version) if cuda_version else None,
    }


def parse_output(stdout):
    """The program's answer from its standard output (the last marker line), or None."""
    found = None
    for line in (stdout or "").splitlines():
        if line.startswith(MARKER):
            found = line[len(MARKER):]
    if found is None:
        return None
    try:
        return json.loads(found)
    except ValueError:
        return None


def error_url(version, error):
    """The public URL of the sglang line a refusal came from, or None."""
    if not version or not error or not error.get("file") or not error.get("line"):
        return None
    return SOURCE_URL % (version, error["file"], int(error["line"]))


def summary(result):
    """One line for a person: the verdict, the stage and sglang's own message."""
    if not result:
        return "the dry run gave no answer"
    verdict = result.get("verdict")
    if verdict == "refused":
        err = result.get("error") or {}
        where = " (%s:%s)" % (err["file"], err["line"]) if err.get("file") else ""
        return "sglang %s refuses this launch at %s%s: %s" % (
            result.get("sglang_version") or "?", result.get("stage"), where, err.get("message") or "")
    if verdict == "accepted":
        return "sglang %s accepts this launch through %s (%.1f s)" % (
            result.get("sglang_version") or "?", ", ".join(result.get("stages_run") or []),
            result.get("elapsed_s") or 0.0)
    return "the dry run could not decide: %s" % (result.get("reason") or "no reason given")


def program_source():
    """This file's text, the program an sglang interpreter runs."""
    loader = globals().get("__loader__")
    if loader is not None and hasattr(loader, "get_source"):
        try:
            text = loader.get_source(__name__)
            if text:
                return text
        except (ImportError, OSError):
            pass
    with open(__file__, "rb") as handle:
        return handle.read().decode("utf-8")


# ---------------------------------------------------------------------------------------------------------------
# The program. Everything below runs only in the sglang interpreter (``main``).
# ---------------------------------------------------------------------------------------------------------------

# Fields of the resolved ServerArgs a record shows first (every field is returned in ``resolved``).
KEY_FIELDS = (
    "model_path", "tp_size", "pp_size", "dp_size", "ep_size", "enable_dp_attention", "quantization", "dtype",
    "kv_cache_dtype", "page_size", "attention_backend", "prefill_attention_backend", "decode_attention_backend",
    "sampling_backend", "moe_runner_backend", "moe_a2a_backend", "fp8_gemm_runner_backend",
    "nsa_prefill_backend", "nsa_decode_backend", "dsa_prefill_backend", "dsa_decode_backend",
    "speculative_algorithm", "mem_fraction_static", "chunked_prefill_size", "max_running_requests",
    "cuda_graph_max_bs", "disable_cuda_graph", "enable_flashinfer_allreduce_fusion",
    "flashinfer_allreduce_fusion_backend",
)

# The dtypes a sandbox's torch stand-in offers (names as torch spells them); str() gives "torch.<name>".
_DTYPES = {
    "float32": 4, "float": 4, "float64": 8, "double": 8, "float16": 2, "half": 2, "bfloat16": 2,
    "float8_e4m3fn": 1, "float8_e4m3fnuz": 1, "float8_e5m2": 1, "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1,
    "float4_e2m1fn_x2": 1, "int8": 1, "uint8": 1, "int16": 2, "int32": 4, "int": 4, "int64": 8, "long": 8,
    "bool": 1, "complex64": 8, "uint32": 4, "uint64": 8,
}
_ABSENT_DEVICES = frozenset(("npu", "hpu", "xpu", "musa", "mlu", "gcu", "sdaa", "xla", "dipu", "maca", "mps"))
_DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "int": "int32", "long": "int64"}

# torch's text for a device index a process cannot see (c10/cuda/CUDAException.h C10_CUDA_CHECK of
# cudaErrorInvalidDevice, as torch.cuda.set_device raises it).
# What a sandbox's torch answers for the device count when the facts give none: more than any launch asks for
# (the ranks' GPUs are then not checked against it; the answer says so).
UNKNOWN_COUNT = 1024
INVALID_DEVICE = ("CUDA error: invalid device ordinal\nCUDA kernel errors might be asynchronously reported at some "
                  "other API call, so the stacktrace below might be incorrect.\nFor debugging consider passing "
                  "CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")

# Failures that say nothing about the launch but about where the dry run ran: a model hub it may not reach, a
# config.json it does not have. On a real host they are refusals (the server meets them too); in a sandbox,
# undecided.
_ENVIRONMENTAL = re.compile(
    r"(LocalEntryNotFoundError|OfflineModeIsEnabled|We couldn't connect to|Can't load the configuration|"
    r"does not appear to have a file named config\.json|Cannot find the requested files in the local cache|"
    r"outgoing traffic has been disabled|HF_HUB_OFFLINE)")


def _json_safe(value, depth=0):
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else repr(value)
    if depth < 5 and isinstance(value, (list, tuple, set, frozenset)):
        items = [_json_safe(v, depth + 1) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if depth < 5 and isinstance(value, dict):
        return dict((str(k), _json_safe(v, depth + 1)) for k, v in value.items())
    if hasattr(value, "value") and hasattr(value, "name") and type(value).__module__ != "builtins":
        return _json_safe(value.value, depth + 1)
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + "..."


def _sglang_frame(tb, root):
    """(relative file, line, function) of the innermost traceback frame inside the sglang package."""
    found = None
    while tb is not None:
        path = os.path.realpath(tb.tb_frame.f_code.co_filename)
        if root and path.startswith(root + os.sep):
            found = (os.path.relpath(path, os.path.dirname(root)).replace(os.sep, "/"), tb.tb_lineno,
                     tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    return found


def _error(exc, root, captured=""):
    import traceback

    text = str(exc)
    where = _sglang_frame(exc.__traceback__, root)
    tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).splitlines()[-12:]
    err = {"type": type(exc).__name__, "message": text.strip()[:2000], "traceback_tail": tail}
    if where:
        err.update(file=where[0], line=where[1], function=where[2])
    if captured:
        err["stderr_tail"] = captured.splitlines()[-6:]
    return err


class _Tee(object):
    """sys.stderr while the launch runs: kept for argparse's messages, and passed on."""

    def __init__(self, inner):
        self.inner = inner
        self.parts = []

    def write(self, text):
        self.parts.append(text)
        return self.inner.write(text)

    def flush(self):
        self.inner.flush()

    def text(self):
        return "".join(self.parts)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _visible(count, environment):
    """The device indices a process sees under CUDA_VISIBLE_DEVICES (a list of indices or UUIDs; the list ends
    at the first entry that names no device, as the CUDA runtime reads it)."""
    value = environment.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return count
    seen = 0
    for item in value.split(","):
        item = item.strip()
        if not item:
            break
        if item.isdigit() and int(item) < count:
            seen += 1
        elif item.startswith(("GPU-", "MIG-")):
            seen += 1
        else:
            break
    return seen


def _fake_nvidia_smi(gpus, directory):
    """An ``nvidia-smi`` on PATH that answers the queries sglang makes (``--query-gpu=FIELDS --format=csv...``,
    ``-L`` / ``--list-gpus``) from the request's GPUs, in nvidia-smi's own formats."""
    path = os.path.join(directory, "nvidia-smi")
    rows = {
        "memory.total": "%d MiB" % (gpus.get("memory_total_mib") or 0),
        "compute_cap": "%d.%d" % tuple(gpus["capability"]),
        "name": gpus.get("name") or "NVIDIA GPU",
    }
    script = (
        "#!%s\nimport sys\nROWS = %r\nCOUNT = %d\nNAME = %r\n"
        "args = sys.argv[1:]\n"
        "if '-L' in args or '--list-gpus' in args:\n"
        "    for i in range(COUNT):\n"
        "        print('GPU %%d: %%s (UUID: GPU-00000000-0000-0000-0000-%%012d)' %% (i, NAME, i))\n"
        "    sys.exit(0)\n"
        "query = [a.split('=', 1)[1] for a in args if a.startswith('--query-gpu=')]\n"
        "fmt = [a.split('=', 1)[1] for a in args if a.startswith('--format=')]\n"
        "if not query:\n"
        "    sys.stderr.write('moesweep dry run: this nvidia-smi answers only --query-gpu and -L\\n')\n"
        "    sys.exit(2)\n"
        "fields = [f.strip() for f in query[0].split(',')]\n"
        "opts = fmt[0].split(',') if fmt else ['csv']\n"
        "if 'noheader' not in opts:\n"
        "    print(', '.join(f + (' [MiB]' if f == 'memory.total' else '') for f in fields))\n"
        "for i in range(COUNT):\n"
        "    cells = []\n"
        "    for f in fields:\n"
        "        v = str(i) if f == 'index' else ROWS.get(f, '[N/A]')\n"
        "        if 'nounits' in opts and v.endswith(' MiB'):\n"
        "            v = v[:-4]\n"
        "        cells.append(v)\n"
        "    print(', '.join(cells))\n"
    ) % (sys.executable, rows, int(gpus.get("count") or 1), rows["name"])
    with open(path, "w") as handle:
        handle.write(script)
    os.chmod(path, 0o755)
    return path


class _Dtype(object):
    is_floating_point = True

    def __init__(self, name, itemsize):
        self.name = name
        self.itemsize = itemsize
        self.is_floating_point = name.startswith(("float", "bfloat", "half", "double"))

    def __repr__(self):
        return "torch." + self.name

    __str__ = __repr__

    def __reduce__(self):
        return (str, (repr(self),))


def _cuda_available(torch):
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken CUDA is no answer
        return False


def _answer_cuda(torch, gpus, environment):
    """Make ``torch.cuda`` answer from the request's GPUs (a sandbox's stand-in, or a CPU build of torch)."""
    count = _visible(int(gpus["count"]), environment) if gpus.get("count") else UNKNOWN_COUNT
    major, minor = int(gpus["capability"][0]), int(gpus["capability"][1])
    total = int(gpus.get("memory_total_mib") or 0) * 1024 * 1024
    name = gpus.get("name") or "NVIDIA GPU"
    cuda = torch.cuda

    class _Props(object):
        def __init__(self):
            self.name = name
            self.major, self.minor = major, minor
            self.total_memory = total
            self.multi_processor_count = 0
            self.is_integrated = False

    def _check(index):
        index = 0 if index is None else getattr(index, "index", index)
        try:
            index = int(index or 0)
        except (TypeError, ValueError):
            index = 0
        if index < 0 or index >= count:
            raise RuntimeError(INVALID_DEVICE)
        return index

    state = {"device": 0}

    def set_device(index):
        state["device"] = _check(index)

    answers = {
        "is_available": lambda: count > 0,
        "device_count": lambda: count,
        "current_device": lambda: state["device"],
        "set_device": set_device,
        "get_device_capability": lambda device=None: (_check(device), (major, minor))[1],
        "get_device_name": lambda device=None: (_check(device), name)[1],
        "get_device_properties": lambda device=None: (_check(device), _Props())[1],
        "mem_get_info": lambda device=None: (_check(device), (total, total))[1],
        "is_initialized": lambda: True,
        "init": lambda: None,
        "synchronize": lambda device=None: None,
        "empty_cache": lambda: None,
    }
    for key, value in answers.items():
        setattr(cuda, key, value)
    version = getattr(torch, "version", None)
    cuda_version = gpus.get("cuda_version")
    if version is not None and cuda_version:
        try:
            version.cuda = cuda_version
            version.hip = None
        except (AttributeError, TypeError):
            pass
    return count


def _sandbox_torch(stub_module_type, version):
    """The torch stand-in of a sandbox: a stub module whose dtypes are real values (sglang and transformers map
    config.json's ``torch_dtype`` through them) and whose ``version`` is a plain namespace."""
    import importlib.machinery
    import types

    class _Torch(stub_module_type):
        # hasattr(torch, "npu") and the like answer as a CUDA build does: sglang's is_npu / is_xpu / is_hpu probe
        # them (v0.5.9 srt/utils/common.py is_npu: an attribute that exists means "torch_npu detected")
        def __getattr__(self, name):
            if name in _ABSENT_DEVICES:
                raise AttributeError(name)
            return stub_module_type.__getattr__(self, name)

    torch = _Torch("torch")
    torch.__path__ = []
    torch.__spec__ = importlib.machinery.ModuleSpec("torch", None, is_package=True)
    torch.__version__ = version or "0.0.0"
    torch.dtype = _Dtype
    for name, size in _DTYPES.items():
        setattr(torch, name, _Dtype(_DTYPE_ALIASES.get(name, name), size))
    torch.version = types.SimpleNamespace(cuda=None, hip=None, git_version="moesweep-sandbox",
                                          __version__=torch.__version__)
    cuda = stub_module_type("torch.cuda")
    cuda.__path__ = []
    cuda.__spec__ = importlib.machinery.ModuleSpec("torch.cuda", None, is_package=True)
    torch.cuda = cuda
    sys.modules["torch"] = torch
    sys.modules["torch.cuda"] = cuda
    sys.modules["torch.version"] = torch.version
    return torch


def _install_stubs(names=None, always=()):
    """Answer an import of a missing package with a permissive stub module: a package of ``names`` (what the host's
    stack installs; None: any package sglang's own modules ask for) or of ``always``. Any other missing package is
    an ImportError, as on a host without it. Returns (the set the stubbed top-level names are added to, the stub
    module type)."""
    import abc
    import importlib.abc
    import importlib.machinery
    import types

    def _is_function(obj):
        return isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                                staticmethod, classmethod, property))

    def _false(*_a, **_k):
        return False

    def _self(self, *_a, **_k):
        return self

    class _StubMeta(abc.ABCMeta):
        def __getattr__(cls, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            child = _new_stub_class(name, "%s.%s" % (cls.__qualname__, name), cls.__module__)
            type.__setattr__(cls, name, child)
            return child

        def __call__(cls, *args, **kwargs):
            if cls.__dict__.get("_pure_stub") and len(args) == 1 and not kwargs and _is_function(args[0]):
                return args[0]
            return super(_StubMeta, cls).__call__(*args, **kwargs)

        def register(cls, *args, **kwargs):
            if cls.__dict__.get("_pure_stub"):
                return args[-1] if args else None
            return super(_StubMeta, cls).register(*args, **kwargs)

        def __getitem__(cls, _item):
            return cls

        def __contains__(cls, _item):
            return False

        def __bool__(cls):
            return not cls.__dict__.get("_pure_stub", False)

        def __iter__(cls):
            return iter(())

        def __len__(cls):
            return 0

        __lt__ = __le__ = __gt__ = __ge__ = _false
        __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __floordiv__ = _self

        def __int__(cls):
            return 0

        __index__ = __int__

        def __float__(cls):
            return 0.0

        def __repr__(cls):
            return "<stub %s>" % cls.__qualname__

        def __str__(cls):
            return ""

    class _StubBase(str):
        def __new__(cls, *_a, **_k):
            return str.__new__(cls, "")

        def __init__(self, *_a, **_k):
            pass

        def __init_subclass__(cls, **_kwargs):
            super(_StubBase, cls).__init_subclass__()

        def __getattr__(self, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            return _new_stub_class(name, name, "stub")()

        def __call__(self, *args, **kwargs):
            if len(args) == 1 and not kwargs and _is_function(args[0]):
                return args[0]
            return type(self)()

        def __getitem__(self, _item):
            return type(self)()

        def __setitem__(self, _key, _value):
            pass

        def __bool__(self):
            return False

        def __iter__(self):
            return iter(())

        def __len__(self):
            return 0

        def __int__(self):
            return 0

        __index__ = __int__

        def __float__(self):
            return 0.0

        def __enter__(self):
            return self

        def __exit__(self, *_a):
            return False

        __lt__ = __le__ = __gt__ = __ge__ = _false
        __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __floordiv__ = _self
        __or__ = __ror__ = __and__ = __rand__ = __neg__ = __pow__ = __mod__ = _self

        def __contains__(self, _item):
            return False

        def __hash__(self):
            return id(self)

        def __eq__(self, other):
            return self is other

        def __str__(self):
            return ""

        def __repr__(self):
            return "<stub %s instance>" % type(self).__qualname__

    def _new_stub_class(name, qualname, module):
        cls = _StubMeta(name, (_StubBase,), {"_pure_stub": True, "__module__": module})
        cls.__qualname__ = qualname
        return cls

    class _StubModule(types.ModuleType):
        __version__ = "99.0.0"  # "new enough": version gates take the modern path

        def __getattr__(self, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            child = _new_stub_class(name, "%s.%s" % (self.__name__, name), self.__name__)
            setattr(self, name, child)
            return child

    class _StubLoader(importlib.abc.Loader):
        def create_module(self, spec):
            mod = _StubModule(spec.name)
            mod.__path__ = []
            return mod

        def exec_module(self, module):
            return None

    stubbed = set()

    def _importer():
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_globals.get("__name__", "")
            if not name.startswith(("importlib", "_frozen_importlib")) and \
                    not frame.f_code.co_filename.startswith("<frozen"):
                return name
            frame = frame.f_back
        return ""

    class _StubFinder(importlib.abc.MetaPathFinder):
        """Last on sys.meta_path: a package the real finders did not find, imported by sglang, is a stub."""

        def find_spec(self, fullname, path=None, target=None):
            top = fullname.partition(".")[0]
            if top in sys.builtin_module_names or top in getattr(sys, "stdlib_module_names", ()):
                return None
            parent = sys.modules.get(top)
            if parent is not None and not isinstance(parent, _StubModule):
                return None  # a submodule a real package lacks stays an ImportError
            if names is not None:
                wanted = top in names
            else:
                importer = _importer()
                wanted = importer.startswith("sglang") or importer == "__main__"
            if wanted or top in always or isinstance(parent, _StubModule):
                stubbed.add(top)
                return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)
            return None

    sys.meta_path.append(_StubFinder())
    return stubbed, _StubModule


def _gpu_ids(sa):
    """The GPU index of every scheduler process this node starts (sglang v0.5.9 srt/entrypoints/engine.py
    ``_launch_scheduler_processes`` and srt/managers/data_parallel_controller.py ``launch_dp_schedulers`` /
    ``launch_tensor_parallel_group``: the same formula in 0.5.23's engine)."""
    def get(name, default):
        value = getattr(sa, name, None)
        return default if value is None else value

    tp, pp, nnodes, node_rank = int(get("tp_size", 1)), int(get("pp_size", 1)), int(get("nnodes", 1)), \
        int(get("node_rank", 0))
    dp, step, base = int(get("dp_size", 1)), int(get("gpu_id_step", 1)), int(get("base_gpu_id", 0))
    pp_per_node = max(pp // nnodes, 1)
    nnodes_per_pp_rank = max(nnodes // pp, 1)
    tp_per_node = tp // nnodes_per_pp_rank
    pp_ranks = range(pp_per_node * (node_rank // nnodes_per_pp_rank),
                     pp_per_node * (node_rank // nnodes_per_pp_rank + 1))
    tp_ranks = range(tp_per_node * (node_rank % nnodes_per_pp_rank),
                     tp_per_node * (node_rank % nnodes_per_pp_rank + 1))
    groups = dp if dp > 1 and not getattr(sa, "enable_dp_attention", False) else 1
    ids = []
    for group in range(groups):
        group_base = group * tp * pp * step
        for pp_rank in pp_ranks:
            for tp_rank in tp_ranks:
                ids.append(base + group_base + (pp_rank % pp_per_node) * tp_per_node + (tp_rank % tp_per_node) * step)
    return ids


def _set_device_line(root):
    """Where a scheduler process first selects its GPU (file, line), found in the installed sglang: 0.5.23's
    parallel bootstrap (srt/distributed/bootstrap.py), else the model runner (0.5.9 srt/model_executor/
    model_runner.py ``init_torch_distributed``)."""
    for rel in ("srt/distributed/bootstrap.py", "srt/model_executor/model_runner.py"):
        path = os.path.join(root, rel)
        try:
            with open(path) as handle:
                for no, text in enumerate(handle, 1):
                    if re.search(r"\.set_device\((self\.gpu_id|gpu_id|get_device\(\)\.gpu_id)\)", text):
                        return "sglang/" + rel, no
        except (IOError, OSError):
            continue
    return None, None


def _run(req, out):
    import logging
    import tempfile
    import time

    started = time.time()
    env = req.get("environment") or {}
    for key, value in env.items():
        os.environ[key] = value
    if req.get("offline"):
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
    sys.path[:0] = [p for p in req.get("sys_path") or [] if p not in sys.path]
    gpus = req.get("gpus")
    out["gpus"] = "facts" if gpus else "real"
    workdir = tempfile.mkdtemp(prefix="moesweep-dryrun-")
    if gpus:
        _fake_nvidia_smi(gpus, workdir)
        os.environ["PATH"] = workdir + os.pathsep + os.environ.get("PATH", "")

    notices = []

    class _Collect(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.INFO and len(notices) < 60:
                try:
                    notices.append({"level": record.levelname, "logger": record.name,
                                    "message": record.getMessage()[:600]})
                except Exception:  # noqa: BLE001 - a bad log format must not end the dry run
                    pass

    logging.getLogger().addHandler(_Collect())
    logging.getLogger().setLevel(logging.INFO)
    out["notices"] = notices

    stubbed = set()
    import importlib.util

    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        out.update(verdict="undecided", reason="sglang is not importable by %s" % sys.executable)
        return
    root = os.path.realpath(list(spec.submodule_search_locations)[0])
    if req.get("stub_missing"):
        has_torch = importlib.util.find_spec("torch") is not None
        names = req.get("stub_names")
        stubbed, stub_type = _install_stubs(None if names is None else frozenset(names),
                                            always=() if has_torch else ("torch",))
        if not has_torch:
            _sandbox_torch(stub_type, req.get("torch_version"))
            stubbed.add("torch")
    out["stubbed"] = stubbed
    torch_sees_gpus = False
    if gpus:
        try:
            import torch
        except ImportError as exc:
            out.update(verdict="undecided", reason="torch cannot be imported: %s" % exc)
            return
        torch_sees_gpus = bool(req.get("gpus_fallback")) and _cuda_available(torch)
        if torch_sees_gpus:
            out["gpus"] = "real"  # torch has CUDA and GPUs here: its answers, not the facts'
        else:
            _answer_cuda(torch, gpus, env)

    tee = _Tee(sys.stderr)
    sys.stderr = tee
    stage = "arguments"
    try:
        try:
            from sglang.srt import server_args as sa_module
        except Exception as exc:  # noqa: BLE001 - an import that fails here fails the real launch the same way
            decided = req.get("import_is_launch", True) and not req.get("stub_missing")
            out.update(verdict="refused" if decided else "undecided", stage="import", error=_error(exc, root),
                       reason="sglang.srt.server_args could not be imported")
            return
        version = req.get("sglang_version")
        if not version:
            try:
                from importlib.metadata import version as _dist_version

                version = _dist_version("sglang")
            except Exception:  # noqa: BLE001
                version = None
        out["sglang_version"] = version
        stages = []
        out["stages_run"] = stages
        # the program name argparse prints is launch_server.py's, as under `python -m sglang.launch_server`
        sys.argv = [os.path.join(root, "launch_server.py")] + list(req.get("argv") or [])
        stage = "server_args"  # prepare_server_args parses (SystemExit on a bad line), then runs __post_init__
        try:
            server_args = sa_module.prepare_server_args(list(req.get("argv") or []))
        except SystemExit as exc:
            if exc.code in (0, None):
                out.update(verdict="undecided", reason="the arguments asked sglang only to print (--help?)")
                return
            lines = [line for line in tee.text().splitlines() if line.strip()]
            message = lines[-1] if lines else "argparse exited %s" % exc.code
            out.update(verdict="refused", stage="arguments", exit_status=exc.code,
                       error={"type": "SystemExit", "message": message, "usage_error": True,
                              "file": "sglang/srt/server_args.py"})
            return
        stages.append("arguments")
        # 0.5.9 resolves in __post_init__; 0.5.23's launcher calls resolve_once() before check_server_args
        # (v0.5.23 srt/entrypoints/engine.py _launch_subprocesses, python/sglang/launch_server.py)
        resolve = getattr(server_args, "resolve_once", None)
        if resolve is not None:
            resolve()
        server_args.check_server_args()
        stages.append("server_args")
        fields = server_args.resolved_dict() if hasattr(server_args, "resolved_dict") else vars(server_args)
        out["resolved"] = dict((k, _json_safe(v)) for k, v in sorted(fields.items())
                               if not k.startswith("_") and k != "model_config")
        out["key_fields"] = dict((k, out["resolved"][k]) for k in KEY_FIELDS if k in out["resolved"])

        stage = "scheduler_init"
        import torch

        ids = _gpu_ids(server_args)
        out["gpu_ids"] = ids
        seen = torch.cuda.device_count()
        out["device_count"] = seen
        if gpus and not gpus.get("count") and not torch_sees_gpus:
            out["scheduler_init"] = "not checked: the GPU count is not known (the launch takes GPUs %s)" % ids
            out["device_count"] = None
        elif ids and max(ids) >= seen:
            file_, line = _set_device_line(root)
            try:
                torch.cuda.set_device(max(ids))
                message = INVALID_DEVICE
            except Exception as exc:  # noqa: BLE001 - torch's own text
                message = str(exc)
            out.update(verdict="refused", stage=stage,
                       error={"type": "RuntimeError", "message": message.strip(), "file": file_, "line": line,
                              "function": "init_torch_distributed",
                              "detail": "the node's scheduler processes take GPUs %s; the process sees %d"
                                        % (ids, seen)})
            return
        stages.append(stage)

        stage = "model_init"
        _quantization_gate(server_args, out)
        stages.append(stage)
        stage = "attention_init"
        if gpus and not torch_sees_gpus:
            _attention_gates(server_args, out)
            stages.append(stage)
        else:
            out["attention_gates"] = "not checked on a real GPU (a backend's constructor may allocate or build there)"
        out.update(verdict="accepted", stage=None)
    except BaseException as exc:  # noqa: BLE001 - sglang's exception is the answer
        message = str(exc)
        env_failure = bool(_ENVIRONMENTAL.search("%s %s" % (type(exc).__name__, message)))
        if req.get("stub_missing") and "are not supported for now" in message:
            # the model registry of a sandbox: a model module whose imports are stubs may not register its class
            out.update(verdict="undecided", stage=stage, error=_error(exc, root),
                       reason="the sandbox could not build this model's class (%s): the host's own dry run decides"
                              % message.strip().splitlines()[0][:160])
        elif req.get("offline") and env_failure:
            out.update(verdict="undecided", stage=stage, error=_error(exc, root),
                       reason="the model's config.json is not available to the dry run (%s): give it with "
                              "--model-config, or stage the model" % message.strip().splitlines()[0][:200])
        else:
            out.update(verdict="refused", stage=stage, error=_error(exc, root, tee.text()))
    finally:
        sys.stderr = tee.inner
        out["elapsed_s"] = round(time.time() - started, 3)


def _model_config(server_args):
    """The model's ModelConfig as the scheduler builds it (``ModelConfig.from_server_args``; 0.5.9's ServerArgs
    keeps the one it built while resolving). Its exceptions are the launch's."""
    model_config = getattr(server_args, "model_config", None)
    if model_config is None and callable(getattr(server_args, "get_model_config", None)):
        model_config = server_args.get_model_config()
    if model_config is None:
        try:
            from sglang.srt.configs.model_config import ModelConfig
        except ImportError:
            return None
        build = getattr(ModelConfig, "from_server_args", None)
        model_config = build(server_args) if build is not None else None
    return model_config


def _quantization_gate(server_args, out):
    """The loader's quantization config and its capability gate (v0.5.9 srt/model_loader/loader.py
    ``_get_quantization_config``: 'The quantization method X is not supported for the current GPU. Minimum
    capability: ... Current capability: ...'), for a quantized model; skipped (said so) where this version's loader
    has no such function."""
    model_config = _model_config(server_args)
    if model_config is None:
        out["quantization_gate"] = "not checked: this version builds no ModelConfig from its arguments here"
        return
    if model_config is not None:
        # the quantization the model's own config names, which the launch runs with even where --quantization is
        # not given (ModelConfig._verify_quantization)
        out["model_quantization"] = _json_safe(getattr(model_config, "quantization", None))
    if model_config is None or getattr(model_config, "quantization", None) is None:
        out["quantization_gate"] = "not quantized"
        return
    try:
        from sglang.srt.configs.load_config import LoadConfig
        from sglang.srt.model_loader import loader
    except ImportError as exc:
        out["quantization_gate"] = "not checked: %s" % exc
        return
    gate = getattr(loader, "_get_quantization_config", None)
    try:
        import inspect

        has_gate = gate is not None and "get_min_capability" in inspect.getsource(gate)
    except (OSError, TypeError):
        has_gate = False
    if not has_gate:
        # 0.5.23's loader checks no capability here (its quantization methods do, when the model is built)
        out["quantization_gate"] = "not checked: this version's loader has no capability gate"
        return
    load_config = LoadConfig(load_format=getattr(server_args, "load_format", "auto"),
                             download_dir=getattr(server_args, "download_dir", None))
    quant_config = gate(model_config, load_config)
    out["quantization_gate"] = "passed (%s)" % type(quant_config).__name__ if quant_config is not None else \
        "passed"


class _StandInRunner(object):
    """What an attention backend's factory reads of its model runner, before its gate: the real model config and
    arguments; the ``meta`` device, so that nothing a constructor makes after the gate is real."""

    device = "meta"
    gpu_id = 0
    is_draft_worker = False
    init_new_workspace = False

    def __init__(self, server_args, model_config, use_mla_backend):
        self.server_args = server_args
        self.model_config = model_config
        self.use_mla_backend = use_mla_backend
        self.page_size = getattr(server_args, "page_size", 1)
        self.tp_size = getattr(server_args, "tp_size", 1)


def _attention_gates(server_args, out):
    """Call the factory of each attention backend the model runner would create (v0.5.9 srt/model_executor/
    model_runner.py ``_get_attention_backend``: ``server_args.get_attention_backends()``, each name through
    ``ATTENTION_BACKENDS``); an AssertionError or ValueError raised by the factory itself is the launch's failure."""
    import inspect

    model_config = _model_config(server_args)
    try:
        from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS
    except Exception as exc:  # noqa: BLE001 - a registry that does not import is not checked, and said so
        out["attention_gates"] = "not checked: %s: %s" % (type(exc).__name__, exc)
        return
    get = getattr(server_args, "get_attention_backends", None)
    if get is not None:
        names = [n for n in get() if n]
    else:  # 0.5.23: the resolved record's prefill / decode backends, else its attention backend
        resolved = out.get("resolved") or {}
        names = [resolved.get("prefill_attention_backend") or resolved.get("attention_backend"),
                 resolved.get("decode_attention_backend") or resolved.get("attention_backend")]
    arch = getattr(model_config, "attention_arch", None)
    runner = _StandInRunner(server_args, model_config, getattr(arch, "name", str(arch)) == "MLA")
    checked = []
    for name in [n for i, n in enumerate(names) if n and n not in names[:i]]:
        factory = ATTENTION_BACKENDS.get(name)
        if factory is None:
            raise ValueError("Invalid attention backend: %s" % name)  # model_runner._get_attention_backend_from_str
        own = os.path.realpath(inspect.getsourcefile(factory) or "")
        try:
            factory(runner)
        except (AssertionError, ValueError) as exc:
            tb = exc.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            if os.path.realpath(tb.tb_frame.f_code.co_filename) == own and tb.tb_frame.f_code.co_name == \
                    factory.__name__:
                raise
        except Exception:  # noqa: BLE001 - past the gate: the constructor needs the real runner
            pass
        checked.append(name)
    out["attention_gates"] = "passed (%s)" % ", ".join(checked)


def main():
    raw = sys.stdin.read()
    out = {"verdict": "undecided", "python": sys.version.split()[0]}
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # sglang's own prints must not mix with the answer
    try:
        req = json.loads(raw)
        _run(req, out)
    except Exception as exc:  # noqa: BLE001 - the harness itself failed: say so, never guess
        out.update(verdict="undecided", reason="the dry run failed: %s: %s" % (type(exc).__name__, exc))
    finally:
        sys.stdout = real_stdout
    if isinstance(out.get("stubbed"), set):
        out["stubbed"] = sorted(out["stubbed"])
    real_stdout.write(MARKER + json.dumps(out, default=repr) + "\n")
    real_stdout.flush()
    # sglang may leave non-daemon threads behind (its log and watchdog helpers): the answer is written
    os._exit(0)


if __name__ == "__main__":
    main()
