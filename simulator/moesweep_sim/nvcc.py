"""Simulated `nvcc` of the simulated CUDA toolkits: answers `--version` / `-V` like the real release.

The toolkit release is read from the directory nvcc lives in (/usr/local/cuda-X.Y/bin/nvcc -> X.Y), through
symlinks such as /usr/local/cuda -> cuda-X.Y; env MOESWEEP_SIM_CUDA_RELEASE overrides it (tests).

Each banner below is the real Linux x86_64 output of that release's nvcc, copied from public output
(GitHub files found with the code index; see tests/fixtures/nvidia-smi/rtx-pro-6000/SOURCES.md, "nvcc"):
  12.8 (12.8.1, V12.8.93): e.g. public READMEs and benchmark logs quoting the full five lines
  12.9 (12.9.1, V12.9.86): e.g. NVIDIA HPC SDK 25.7 nvcc -V transcript, dream-1 setup notes
  13.0 (13.0.2, V13.0.88): e.g. a llama.cpp RTX 5060 Ti benchmark log
  13.1 (13.1.1, V13.1.115): e.g. hipcc-on-NVIDIA setup notes and a JAX audit log
"""

from __future__ import annotations

import os
import re
import sys

BANNERS = {
    "12.8": ("Built on Fri_Feb_21_20:23:50_PST_2025", "V12.8.93", "35583870_0"),
    "12.9": ("Built on Tue_May_27_02:21:03_PDT_2025", "V12.9.86", "36037853_0"),
    "13.0": ("Built on Wed_Aug_20_01:58:59_PM_PDT_2025", "V13.0.88", "36424714_0"),
    "13.1": ("Built on Tue_Dec_16_07:23:41_PM_PST_2025", "V13.1.115", "37061995_0"),
}


def banner(release: str) -> str:
    built, ver, build = BANNERS[release]
    return (
        "nvcc: NVIDIA (R) Cuda compiler driver\n"
        "Copyright (c) 2005-2025 NVIDIA Corporation\n"
        f"{built}\n"
        f"Cuda compilation tools, release {release}, {ver}\n"
        f"Build cuda_{release}.r{release}/compiler.{build}\n"
    )


def release_from_path(path: str) -> str | None:
    # resolve directory links only (/usr/local/cuda -> cuda-X.Y); nvcc itself links to nvcc-sim
    for p in (path, os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))):
        m = re.search(r"/cuda-(\d+\.\d+)/bin/[^/]+$", p)
        if m:
            return m.group(1)
    return None


def main(argv: list[str] | None = None, argv0: str | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    prog = argv0 or sys.argv[0]
    release = os.environ.get("MOESWEEP_SIM_CUDA_RELEASE") or release_from_path(os.path.abspath(prog))
    if args in (["--version"], ["-V"]):
        if release not in BANNERS:
            sys.stderr.write(f"simulated nvcc: no simulated CUDA release for {prog!r} (known: "
                             f"{', '.join(sorted(BANNERS))})\n")
            return 1
        sys.stdout.write(banner(release))
        return 0
    sys.stderr.write("simulated nvcc: compiling is not simulated (only `nvcc --version` is answered)\n")
    return 1


if __name__ == "__main__":
    sys.exit(main())
