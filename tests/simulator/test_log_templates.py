"""Every line the simulated SGLang server can print must exist in the real program that prints it.

For each template in simulator/moesweep_sim/templates.py, every literal fragment between
placeholders must occur, in order, inside ONE string literal / f-string (adjacent literals joined,
as the compiler does) of the cited file in the real wheel: sglang 0.5.9 / 0.5.23, uvicorn, tqdm (the progress
bar of CUDA graph capture) and flashinfer 0.6.3 / 0.7.2 (the versions sglang 0.5.9 / 0.5.23 pin).  Traceback
frames, and the raising frame of every launch failure of failure_model.py, are checked line by line against the
wheel of the version they belong to.
Wheels are cached in ~/.cache/moesweep/wheels (pip download --no-deps); without network and
cache the test skips.
"""

from __future__ import annotations

import ast
import re
import string

import pytest
from moesweep_sim import failure_model, gpus
from moesweep_sim import templates as T
from simulator.real_wheels import WHEELS, source


def _string_nodes(src: str) -> list[str]:
    """All string literals and f-strings of a module, FormattedValues as \\x00."""
    out = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.JoinedStr):
            out.append("".join(v.value if isinstance(v, ast.Constant) else "\x00" for v in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
    return out


def _fragments(part: str) -> list[str]:
    return [lit for lit, _f, _s, _c in string.Formatter().parse(part) if lit]


def _in_order(text: str, frags: list[str]) -> bool:
    pos = 0
    for f in frags:
        i = text.find(f, pos)
        if i < 0:
            return False
        pos = i + len(f)
    return True


def _templates():
    for name in dir(T):
        v = getattr(T, name)
        if isinstance(v, T.Tpl):
            yield name, v


CHECKED = ("sglang", "uvicorn", "flashinfer", "tqdm")


@pytest.mark.parametrize("name,tpl", list(_templates()), ids=[n for n, _ in _templates()])
def test_template_occurs_in_realsource(name, tpl):
    if tpl.origin not in CHECKED:
        # torch (C++ allocator text), python (asyncio), flashinfer C++ sources: cited in templates.py
        assert tpl.source, name
        pytest.skip(f"{tpl.origin} text, cited as {tpl.source}")
    versions = tpl.versions if tpl.origin in ("sglang", "flashinfer") else (None,)
    for ver in versions:
        req = WHEELS[(tpl.origin, ver)]
        src = source(req, tpl.source)
        nodes = _string_nodes(src)
        for part in tpl.parts:
            if "{asctime}" in part:  # uvicorn logging format strings: {x} stands for %(x)s
                fmt = part
                for key in ("asctime", "levelprefix", "message", "client_addr", "request_line", "status_code"):
                    fmt = fmt.replace("{" + key + "}", f"%({key})s")
                assert any(fmt in n for n in nodes), f"{name}: {fmt!r} not in {req}:{tpl.source}"
                continue
            frags = _fragments(part)
            assert frags, name
            ok = any(_in_order(n, frags) for n in nodes)
            assert ok, f"{name}: {frags!r} not found in one string of {req}:{tpl.source}"


def _frame_req(path: str, version: str) -> str | None:
    if path.startswith("sglang/"):
        return WHEELS[("sglang", version)]
    if path.startswith("flashinfer/"):
        return WHEELS[("flashinfer", version)]
    return None  # torch frames: third-party evidence, see templates.py


def _failure_frames():
    """The raising frame of every launch failure of failure_model.py over the agreement matrix."""
    frames = {}
    for version in ("0.5.9", "0.5.23"):
        for backend in sorted(failure_model.ENUM_NAMES):
            for quant in ("modelopt_fp4", "fp8", None):
                for sm, gpu in ((90, "h200"), (100, "b200"), (120, "rtx-pro-6000")):
                    for env in ({}, {"SGLANG_ENABLE_JIT_DEEPGEMM": "0"}):
                        f = failure_model.launch_failure(version, {"moe_runner_backend": backend, "quantization": quant,
                                                                   "tp_size": 8}, sm, "GlmMoeDsaForCausalLM", env,
                                                         gpu_mem_mib=gpus.MODELS[gpu]["memory_total_mib"])
                        if f is not None and f.frame:
                            frames[(version, f.frame)] = f.exc
    return frames


def test_failure_model_raises_where_the_wheel_raises():
    """Each raising frame is the wheel's line, inside the named function, and raises the failure's exception
    type (a `raise X(`, an `assert`, an attribute read or an import)."""
    frames = _failure_frames()
    assert len(frames) >= 15
    for (version, frame), exc in frames.items():
        check_frames(version, [frame])
        code, exc_type = frame[3], exc.split(":")[0].rsplit(".", 1)[-1]
        assert (f"raise {exc_type}(" in code or (exc_type == "AssertionError" and code.startswith("assert"))
                or (exc_type == "AttributeError" and "." in code) or (exc_type == "ModuleNotFoundError"
                                                                      and code.startswith("import "))), (frame, exc)


@pytest.mark.parametrize("key", list(T.TRACEBACKS), ids=[f"{v}-{k}" for v, k in T.TRACEBACKS])
def test_traceback_frames_match_wheel(key):
    check_frames(key[0], T.TRACEBACKS[key])


def check_frames(version, frames):
    for path, line, func, code, carets, _deco in frames:
        req = _frame_req(path, version)
        if req is None:
            continue
        lines = source(req, path).splitlines()
        assert lines[line - 1].strip() == code, f"{path}:{line}: {lines[line - 1].strip()!r} != {code!r}"
        # the function named in the frame encloses that line
        tree = ast.parse("\n".join(lines))
        enclosing = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and n.lineno <= line <= n.end_lineno]
        assert func in [n.name for n in enclosing], f"{path}:{line} not inside {func}"
        # decorated=True <=> torch's decorate_context frame: the function is wrapped by a grad-mode decorator
        fn = max((n for n in enclosing if n.name == func), key=lambda n: n.lineno)
        grad = any(re.search(r"no_grad|inference_mode|DynamicGradMode", ast.unparse(d)) for d in fn.decorator_list)
        assert grad == _deco, f"{path}:{line} {func}: decorated={_deco} but the wheel says {grad}"
        if carets:
            stripped = lines[line - 1].strip()
            assert carets[0] + carets[1] <= len(stripped)


def test_format_traceback_shape():
    tb = T.format_traceback(T.S9_TRTLLM, "RuntimeError: x", "/site")
    assert tb.startswith("Traceback (most recent call last):\n")
    assert '  File "/site/torch/nn/modules/module.py", line 1775, in _wrapped_call_impl\n' in tb
    assert tb.endswith("RuntimeError: x\n")


def test_a_missing_model_dir_fails_from_sglangs_get_config_line():
    f = failure_model.launch_failure("0.5.9", {"model_path": "/models/does-not-exist"}, 120,
                                     path_exists=lambda path: False)
    assert f.stage == "server_args" and f.exc.startswith("OSError: Can't load the configuration of ")
    check_frames("0.5.9", [f.frame])
