#!/usr/bin/env python3
"""Build the slim sglang 0.5.15 stack that the device carries (dev machine; pip reaches PyPI, the device does not).

    python3 bench/device/real_sglang/build_stack.py            # -> .stack/site.tar.xz (ignored, never committed)

1. ``pip download --no-deps --require-hashes`` every wheel of ``lock-cu130-sglang-0.5.15-device.txt`` (cp312,
   manylinux x86_64) into ``.whl/real-sglang/`` (ignored);
2. unpacks them into one site directory (what ``pip install --no-deps --target`` would lay out: the packages and their
   ``.dist-info``, so ``importlib.metadata`` answers sglang's and transformers' version checks);
3. removes what the device run never loads and what would not fit the device's 64 MiB per call (REMOVED, each with
   its reason) and applies the one source change (PATCHES);
4. packs it as ``.stack/site.tar.xz`` (xz -9: 317 MB of files in about 45 MB; a wheel's per-file deflate would be
   about 90 MB). The device unpacks it to a directory on ``PYTHONPATH`` ahead of its own site-packages.

Standard library only, apart from pip run as a subprocess.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
LOCK = os.path.join(HERE, "lock-cu130-sglang-0.5.15-device.txt")
PLATFORMS = ["manylinux_2_17_x86_64", "manylinux_2_24_x86_64", "manylinux_2_26_x86_64", "manylinux_2_27_x86_64",
             "manylinux_2_28_x86_64", "manylinux_2_34_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"]

# path inside the site directory -> why it is removed
REMOVED = {
    "sgl_kernel/flash_ops.abi3.so": "FlashAttention-3 (1.76 GB of the wheel's 1.8 GB unpacked); imported only by "
                                    "sgl_kernel/flash_attn.py, i.e. by --attention-backend fa3 / fa4, which the run "
                                    "does not use (--attention-backend triton)",
    "sgl_kernel/sm100": "the SM100 (Blackwell) build of common_ops; the H100 loads sgl_kernel/sm90",
    "sglang/multimodal_gen": "sglang's diffusion runtime (11 MB), not imported by launch_server or bench_serving",
    "jedi/third_party": "typeshed stubs for IPython's completer (32 MB); sglang/utils.py imports IPython.display only",
}

# (file, old text, new text, why)
PATCHES = [
    ("sglang/jit_kernel/dsa/__init__.py",
     "    from .cutedsl_paged_mqa_logits import CuteDSLPagedMQALogitsRunner, pick_dsl_expand\n",
     "    try:\n"
     "        from .cutedsl_paged_mqa_logits import CuteDSLPagedMQALogitsRunner, pick_dsl_expand\n"
     "    except ImportError:  # moesweep device stack: nvidia-cutlass-dsl (CuTe DSL, 150 MB) is not carried\n"
     "        CuteDSLPagedMQALogitsRunner = None\n"
     "        pick_dsl_expand = None\n",
     "nvidia-cutlass-dsl 4.5.2 (its _cutlass_ir.so alone is 150 MB) does not fit a 64 MiB call; without it the "
     "eager import of the DSA indexer's CuTe DSL kernel (SM100 paged MQA logits) makes every DeepSeek-family model "
     "unimportable. The except branch is sglang's own ROCm fallback (pick_dsl_expand = None, "
     "python/sglang/srt/layers/attention/dsa/dsa_indexer.py:67-71 at v0.5.15); only a DSA model's indexer reads it"),
]


def pip_download(dest):
    os.makedirs(dest, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "--no-deps",
           "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp", "--require-hashes",
           "-d", dest, "-r", LOCK]
    for plat in PLATFORMS:
        cmd += ["--platform", plat]
    subprocess.run(cmd, check=True)


def locked_hashes():
    out = {}
    for line in open(LOCK):
        line = line.strip()
        if line and not line.startswith("#"):
            spec, _, h = line.partition(" --hash=sha256:")
            out[h.strip()] = spec
    return out


def unpack(wheels_dir, site):
    hashes = locked_hashes()
    used = []
    for name in sorted(os.listdir(wheels_dir)):
        path = os.path.join(wheels_dir, name)
        digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
        if digest not in hashes:
            continue  # another version left in the cache
        with zipfile.ZipFile(path) as zf:
            zf.extractall(site)
        used.append(hashes[digest])
    missing = sorted(set(hashes.values()) - set(used))
    if missing:
        raise SystemExit("wheels missing from {}: {}".format(wheels_dir, ", ".join(missing)))
    return used


def slim(site):
    done = {}
    for rel, why in REMOVED.items():
        path = os.path.join(site, rel)
        if os.path.isdir(path):
            size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
            shutil.rmtree(path)
        elif os.path.exists(path):
            size = os.path.getsize(path)
            os.remove(path)
        else:
            raise SystemExit(f"nothing to remove at {rel}: the lock changed?")
        done[rel] = {"bytes": size, "why": why}
    for rel, old, new, why in PATCHES:
        path = os.path.join(site, rel)
        text = open(path).read()
        if old not in text:
            raise SystemExit(f"patch does not apply to {rel}")
        open(path, "w").write(text.replace(old, new, 1))
        done[rel] = {"patched": True, "why": why}
    return done


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wheels", default=os.path.join(REPO, ".whl", "real-sglang"))
    ap.add_argument("--out", default=os.path.join(REPO, ".stack"))
    ap.add_argument("--no-download", action="store_true", help="use the wheels already in --wheels")
    args = ap.parse_args()
    if not args.no_download:
        pip_download(args.wheels)
    build = os.path.join(args.out, "build")
    site = os.path.join(build, "site")
    shutil.rmtree(build, ignore_errors=True)
    os.makedirs(site)
    used = unpack(args.wheels, site)
    changes = slim(site)
    manifest = {"lock": os.path.basename(LOCK), "wheels": used, "changes": changes}
    with open(os.path.join(site, "moesweep-stack.json"), "w") as fh:
        json.dump(manifest, fh, indent=1, sort_keys=True)
    target = os.path.join(args.out, "site.tar.xz")
    # xz -9 through the xz tool when present (multi-threaded), else Python's lzma
    if shutil.which("xz"):
        with open(target, "wb") as fh:
            tar = subprocess.Popen(["tar", "-C", site, "-cf", "-", "."], stdout=subprocess.PIPE)
            subprocess.run(["xz", "-9", "-T0"], stdin=tar.stdout, stdout=fh, check=True)
            if tar.wait() != 0:
                raise SystemExit("tar failed")
    else:
        with tarfile.open(target, "w:xz", preset=9) as tf:
            tf.add(site, arcname=".")
    shutil.rmtree(build)
    print(f"{target}: {os.path.getsize(target) / 1e6:.1f} MB, {len(used)} wheels")


if __name__ == "__main__":
    main()
