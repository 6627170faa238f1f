#!/usr/bin/env python3
"""Which third-party modules does sglang's launch path import at import time? (dev machine, no GPU, no torch)

Runs the staged site directory's own sglang under ``python3.12 -I -S`` with the GPU stack (torch, triton, the kernel
packages) answered by the permissive stub modules of ``scripts/extract_sglang_flags.py``, every package that the
site directory holds imported for real, and every other missing import answered by a stub *and recorded*. The
recorded names, less what the device's python3 already has (KINDS.md's package list), are what the staged stack
still lacks. Stubs are truthy, so ``if _is_cuda:`` and ``if _is_hip:`` both take their branch: the list is a
superset of what a real CUDA import needs, which is what a carry list wants.

    python3.12 bench/device/real_sglang/import_probe.py --site SITE_DIR --also DEVICE_LIKE_DIR [--json OUT]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

# GPU-side packages: stubbed here even where the site directory holds them (their import loads CUDA libraries;
# compressed_tensors validates torch.dtype fields at import, which a stub cannot pass)
FORCED = {"torch", "triton", "sgl_kernel", "flashinfer", "tvm_ffi", "deep_gemm", "torch_memory_saver", "cuda",
          "triton_kernels", "compressed_tensors", "torchvision", "torchaudio", "cupy", "jax", "numba"}

# the modules the launch, the scheduler, the two models, every MoE runner and bench_serving import
TARGETS = [
    "sglang.launch_server",
    "sglang.srt.server_args",
    "sglang.srt.entrypoints.http_server",
    "sglang.srt.managers.scheduler",
    "sglang.srt.managers.tokenizer_manager",
    "sglang.srt.managers.detokenizer_manager",
    "sglang.srt.model_executor.model_runner",
    "sglang.srt.models.qwen3_moe",
    "sglang.srt.models.deepseek_v2",
    "sglang.srt.layers.moe.moe_runner.triton",
    "sglang.srt.layers.moe.moe_runner.triton_kernels",
    "sglang.srt.layers.moe.moe_runner.deep_gemm",
    "sglang.srt.layers.moe.moe_runner.flashinfer_cutlass",
    "sglang.srt.layers.moe.moe_runner.flashinfer_trtllm",
    "sglang.srt.layers.moe.moe_runner.flashinfer_cutedsl",
    "sglang.srt.layers.moe.moe_runner.marlin",
    "sglang.srt.layers.moe.cutlass_moe",
    "sglang.bench_serving",
]


def _cuda_torch() -> None:
    """Make the torch stub answer as the device's torch 2.11.0+cu130 on an SM90 GPU would, so that sglang's
    platform checks (is_cuda / is_hip / is_npu / is_xpu / is_cpu) take the CUDA branch alone."""
    import types

    import torch

    torch.__version__ = "2.11.0+cu130"
    torch.version = types.SimpleNamespace(cuda="13.0", hip=None, git_version="stub", __version__="2.11.0+cu130")
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
    torch.cuda.get_device_name = lambda *a, **k: "NVIDIA H100 80GB HBM3"
    for other in ("xpu", "mps", "musa"):
        setattr(torch, other, types.SimpleNamespace(is_available=lambda: False))
    torch.backends.mps = types.SimpleNamespace(is_available=lambda: False, is_built=lambda: False)


def worker(site: str, out: str, also: list) -> None:
    for extra in reversed(also):
        sys.path.insert(0, extra)
    sys.path.insert(0, site)
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    import extract_sglang_flags as ex  # the permissive stubs of the flag extractor

    sys.path.pop(0)
    real = {n.split(".")[0].split("-")[0] for n in os.listdir(site) if not n.endswith((".dist-info", ".data"))}
    real = {n[:-3] if n.endswith(".py") else n for n in real} - FORCED
    ex._install_stubs(real)
    stub_finder = sys.meta_path[-1]

    class Forced:
        def find_spec(self, fullname, path=None, target=None):
            if fullname.partition(".")[0] in FORCED:
                return stub_finder.find_spec(fullname, path, target)
            return None

    # only the GPU stack is stubbed: any other missing module raises ModuleNotFoundError as on the device
    sys.meta_path.remove(stub_finder)
    sys.meta_path.insert(0, Forced())
    _cuda_torch()
    results = {}
    for name in TARGETS:
        before = set(ex._install_stubs.stubbed)
        try:
            importlib.import_module(name)
            results[name] = {"ok": True}
        except BaseException as exc:  # noqa: BLE001 - recorded
            results[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                             "trace": traceback.format_exc()[-1500:]}
        results[name]["new_stubs"] = sorted(set(ex._install_stubs.stubbed) - before)
    from_also = {}
    for mod_name, mod in list(sys.modules.items()):
        path = getattr(mod, "__file__", None) or ""
        for extra in also:
            if path.startswith(extra + os.sep):
                from_also[mod_name.partition(".")[0]] = extra
    with open(out, "w") as fh:
        json.dump({"stubbed": sorted(ex._install_stubs.stubbed), "forced": sorted(FORCED), "targets": results,
                   "imported_from_also": sorted(from_also)}, fh, indent=1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--site", required=True)
    ap.add_argument("--json", default="import-probe.json")
    ap.add_argument("--also", action="append", default=[],
                    help="a directory of the packages the device's python3 already has (imported for real)")
    ap.add_argument("--worker", action="store_true")
    args = ap.parse_args()
    if args.worker:
        worker(args.site, args.json, args.also)
        return
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "LANG": "C.UTF-8"}
    proc = subprocess.run([sys.executable, "-I", "-S", os.path.abspath(__file__), "--worker", "--site",
                           os.path.abspath(args.site), "--json", os.path.abspath(args.json)]
                          + [w for d in args.also for w in ("--also", os.path.abspath(d))], env=env)
    doc = json.load(open(args.json))
    print("stubbed (not in the site directory):", " ".join(sorted(set(doc["stubbed"]) - set(doc["forced"]))))
    print("imported from --also (must be on the device):", " ".join(doc["imported_from_also"]))
    for name, res in doc["targets"].items():
        verdict = "ok" if res["ok"] else "FAIL " + res["error"][:150]
        print(f"{name:55s} {verdict} {' '.join(res['new_stubs'])}")
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
