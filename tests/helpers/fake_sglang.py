"""A stand-in ``sglang`` package for the dry run's tests: its ``prepare_server_args`` parses, resolves and checks
the way the real one's stages do (argparse's exit 2, an exception in ``__post_init__``, ``check_server_args``), asks
torch and nvidia-smi what the real one asks, and its model runner calls ``set_device`` where sglang's does. Not
sglang: the real wheels are exercised in tests/unit/plugins/plugin_utils/test_sglang_sandbox.py."""

from __future__ import annotations

import textwrap
from pathlib import Path

SERVER_ARGS = '''
import argparse
import dataclasses
import logging
import subprocess

import torch
import zmq  # a package the stack installs and the sandbox lacks: a stub

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    tp_size: int = 1
    dp_size: int = 1
    pp_size: int = 1
    moe_runner_backend: str = "auto"
    attention_backend: str = None
    gpu_mem: int = 0

    def __post_init__(self):
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, check=True)
        self.gpu_mem = min(int(x) for x in out.stdout.split())
        if self.model_path == "offline":
            raise OSError("We couldn't connect to 'https://huggingface.co' to load the files")
        if self.moe_runner_backend == "flashinfer_trtllm" and torch.cuda.get_device_capability() < (10, 0):
            raise ValueError("flashinfer_trtllm needs SM100, got %s" % (torch.cuda.get_device_capability(),))
        if self.attention_backend is None:
            self.attention_backend = "fa3" if torch.cuda.get_device_capability()[0] == 9 else "flashinfer"
            logger.warning("Attention backend not specified. Use %s backend by default.", self.attention_backend)

    def check_server_args(self):
        assert self.tp_size % self.pp_size == 0, "tp_size must be divisible by pp_size"


def prepare_server_args(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--tp-size", "--tp", type=int, default=1)
    parser.add_argument("--dp-size", "--dp", type=int, default=1)
    parser.add_argument("--pp-size", type=int, default=1)
    parser.add_argument("--moe-runner-backend", choices=["auto", "triton", "flashinfer_trtllm"], default="auto")
    return ServerArgs(**vars(parser.parse_args(argv)))
'''


def write_fake_sglang(root: Path) -> Path:
    """The stand-in package under ``root`` (a site directory); returns ``root``."""
    pkg = root / "sglang"
    (pkg / "srt" / "model_executor").mkdir(parents=True)
    for init in (pkg / "__init__.py", pkg / "srt" / "__init__.py", pkg / "srt" / "model_executor" / "__init__.py"):
        init.write_text("")
    (pkg / "launch_server.py").write_text("")
    (pkg / "srt" / "server_args.py").write_text(textwrap.dedent(SERVER_ARGS))
    (pkg / "srt" / "model_executor" / "model_runner.py").write_text(
        "class ModelRunner:\n    def init_torch_distributed(self):\n        torch.cuda.set_device(self.gpu_id)\n")
    return root
