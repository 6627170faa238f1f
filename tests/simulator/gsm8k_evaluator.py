"""The real evaluator's prompt and extraction functions, compiled from the sglang 0.5.9 wheel's source."""

from __future__ import annotations

import ast
import re

from simulator.real_wheels import source


def real_evaluator() -> dict:
    tree = ast.parse(source("sglang==0.5.9", "sglang/test/few_shot_gsm8k.py"))
    wanted = [n for n in tree.body if isinstance(n, ast.FunctionDef)
              and n.name in ("get_answer_value", "get_one_example", "get_few_shot_examples")]
    namespace = {"ast": ast, "re": re, "INVALID": -9999999}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), "few_shot_gsm8k.py", "exec"), namespace)  # noqa: S102
    return namespace
