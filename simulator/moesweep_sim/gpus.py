"""GPU profiles of the simulated hosts, as data, and the host profile loader.

Every value comes from real nvidia-smi output; the source of each is named next to it.

* h200 / h200-x2: the recording `tests/fixtures/nvidia-smi/h200-x2/` (driver 580.159.04, 2x H200 in a
  Firecracker VM, NV18 between the GPUs): table, `-q -x`, `--query-gpu`, `topo -m`, `nvlink -s`, `dmon`; load
  signatures from `tests/fixtures/nvidia-smi/h200-x1-loads/` and `tests/fixtures/nvidia-smi/h200-x1-telemetry/`.
* rtx-pro-6000 ("NVIDIA RTX PRO 6000 Blackwell Server Edition"), see
  tests/fixtures/nvidia-smi/rtx-pro-6000/SOURCES.md:
  - table with driver 570.172.08 / CUDA 12.8: `N/A 27C P8 28W / 600W | 0MiB / 97887MiB`, persistence On,
    ECC `0`, MIG `Disabled` (github.com/gnosia93/slurm-on-aws, lesson/3-pcluster.md, AWS g7e);
  - `--query-gpu=index,name,compute_cap,memory.total,driver_version`: `12.0, 97887 MiB`
    (github.com/vllm-project/vllm issue "vLLM does not support DeepSeek series on RTX PRO 6000/SM120");
  - PCI id 10de:2bb5 (lspci in github.com/bigstack-oss/cubecos/issues/312);
  - power.limit = power.default_limit = 600.00 W, clocks.max.sm 3090 MHz, clocks.max.memory 14001 MHz,
    PCIe gen 5 x16: a public `--query-gpu` snapshot of the GB202 Workstation Edition (same die and
    board power; no Server Edition clock query was found, see SOURCES.md);
  - idle SM clock and the minimum power limit were not found in public output: ASSUMED values, marked.
* b200 ("NVIDIA B200", SM100: the profile on which the SM10x-only MoE paths -- trtllm-gen, CuTe DSL, the DeepSeek
  `auto` -> flashinfer_trtllm resolution -- serve):
  - table with driver 580.95.05 / CUDA 13.0: `N/A 33C P0 192W / 1000W | ... / 183359MiB | 0% Default`, persistence
    On, ECC `0`, MIG `Disabled` (github.com/NVIDIA/TensorRT-LLM/issues/10278, 8x B200);
  - compute capability 10.0, 148 SMs, `clocks.max.memory` 3996 MHz (github.com/pytorch/ao/pull/4002);
  - NV18 between every GPU pair in `topo -m` (github.com/vllm-project/vllm/issues/16336);
  - PCI device id 0x2901 (github.com/NVIDIA/gpu-operator/pull/1242, "MIG configs for the B200 GPU- 2901");
  - max SM clock, idle clocks, minimum power limit, part numbers and the load signature were not found in public
    output: ASSUMED values, marked.
"""

from __future__ import annotations

import hashlib
import json
import os

DEFAULT_PROFILE_PATH = "/etc/moesweep-sim/profile.json"

_H200_SUPPORTED_GRAPHICS = list(range(1980, 344, -15))  # fixture: 1980 .. 345 MHz in 15 MHz steps

H200 = {
    "name": "NVIDIA H200",
    "brand": "NVIDIA",
    "architecture": "Hopper",
    "compute_cap": "9.0",
    "memory_total_mib": 143771,
    "memory_reserved_mib": 616,
    "free_round_mib": 1,  # fixture: total 143771, reserved 616, used 0, free 143156
    "bar1_total_mib": 262144,
    "power_limit_w": 700.0,
    "power_min_limit_w": 200.0,
    "power_max_limit_w": 700.0,
    "idle_power_w": [82.11, 86.73],  # query-gpu.csv at idle
    "idle_temp_c": [37, 36],
    "idle_mem_temp_c": [37, 35],
    "idle_pstate": "P0",
    "idle_sm_clock_mhz": 345,
    "max_sm_clock_mhz": 1980,
    "mem_clock_mhz": 3201,
    "supported_mem_clocks_mhz": [3201, 2201],
    "supported_graphics_clocks_mhz": _H200_SUPPORTED_GRAPHICS,
    "idle_video_clock_mhz": 765,
    "max_video_clock_mhz": 1545,
    "pcie_gen": 5,
    "pcie_width": 16,
    "pci_device_id": "233510DE",
    "pci_sub_system_id": "18BF10DE",
    "vbios_version": "96.00.A5.00.1A",
    "board_part_number": "692-2G520-0282-000",
    "gpu_part_number": "2335-895-A1",
    "inforom_img_version": "G520.0282.02.02",
    "fan": "N/A",
    "ecc_table": "0",
    "link": "NV18",
    "nvlinks": 18,
    "nvlink_gbps": "26.562",
    "p2p_read": "OK",
    "virtualization_mode": "Pass-Through",
    # Under load an H200 is power bound: tests/fixtures/nvidia-smi/h200-x2/query-lms250-under-bf16-matmul-on-gpu0.csv,
    # tests/fixtures/nvidia-smi/h200-x1-loads/compute.csv and tests/fixtures/nvidia-smi/h200-x1-telemetry/
    # matmul-lms250.csv (250 ms samples): after ~1.25 s of ramp (168 -> 361 -> 488 -> 653 W) the draw sits at
    # 688-695 W of 700 W, util 99-100 %, SW power cap (0x4) active, SM clock 1410-1560 MHz of 1980, 52-60 C.
    "load_power_w": 691.5,
    "load_power_jitter_w": 2.5,
    "load_power_bound": True,
    "load_sm_clocks_mhz": [1500, 1485, 1530, 1470, 1545, 1515, 1410, 1500, 1455, 1560],
    "load_ramp_s": 1.25,
    # temperature.gpu + <gpu_temp_tlimit> of the -q -x recording (37 C + 50 C) is the max operating temperature;
    # <gpu_temp_slow_tlimit_threshold> -2 C puts HW (thermal) slowdown 2 C above it
    "max_operating_temp_c": 87,
    "slowdown_temp_c": 89,
}

RTX_PRO_6000 = {
    "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "brand": "NVIDIA RTX",  # as the RTX A6000 reports (public -q output); not seen for this board: ASSUMED
    "architecture": "Blackwell",
    "compute_cap": "12.0",
    "memory_total_mib": 97887,
    "memory_reserved_mib": 512,  # ASSUMED (not in the sources)
    "bar1_total_mib": 131072,  # ASSUMED
    "power_limit_w": 600.0,
    "power_min_limit_w": 300.0,  # ASSUMED: a 300 W limit is accepted on RTX PRO 6000 boards in public output
    "power_max_limit_w": 600.0,
    "idle_power_w": [28.0, 30.0],  # slurm-on-aws table: 28W and 30W at P8
    "idle_temp_c": [27, 27],
    "idle_mem_temp_c": [27, 27],
    "idle_pstate": "P8",
    "idle_sm_clock_mhz": 180,  # ASSUMED
    "max_sm_clock_mhz": 3090,
    "mem_clock_mhz": 14001,
    "supported_mem_clocks_mhz": [14001],
    "supported_graphics_clocks_mhz": list(range(3090, 179, -15)),  # ASSUMED step, as on H200
    "idle_video_clock_mhz": 600,  # ASSUMED
    "max_video_clock_mhz": 3090,  # ASSUMED
    "pcie_gen": 5,
    "pcie_width": 16,
    "pci_device_id": "2BB510DE",
    "pci_sub_system_id": "204E10DE",  # ASSUMED
    "vbios_version": "98.02.52.00.02",  # ASSUMED
    "board_part_number": "900-2G153-0000-000",  # ASSUMED
    "gpu_part_number": "2BB5-895-A1",  # ASSUMED
    "inforom_img_version": "G153.0200.00.02",  # ASSUMED
    "fan": "N/A",  # Server Edition is passive: `N/A` in the table
    "ecc_table": "0",
    "link": "PHB",  # KVM/Proxmox VM: all GPUs behind one host bridge
    "nvlinks": 0,
    "nvlink_gbps": None,
    # The reference VM has no P2P: NCCL's all-reduce goes through host memory (allreduce.py's `vm_phb` curve), and
    # `topo -p2p r` says so with "NS" (Not supported, nvidia-smi's legend) between every pair. `--knob p2p_read=OK`
    # gives the VM P2P, and the all-reduce then follows the curve of 8 RTX PRO 6000 on PCIe switches (`pix`).
    "p2p_read": "NS",
    "virtualization_mode": "Pass-Through",
    # Decoding on the real 8x RTX PRO 6000 deployment this project targets is launch bound: ~100 % util at ~55 %
    # of the 600 W limit with SM clocks at their maximum -- the signature tests/fixtures/nvidia-smi/h200-x1-loads/
    # launch-cudagraph.csv records on an H200 for tiny kernels replayed from a CUDA graph (util 92-100 %,
    # 17 % of the power limit, 1980 of 1980 MHz, no clock event reason active).  Ramp and jitter: ASSUMED as on H200.
    "load_power_w": 330.0,
    "load_power_jitter_w": 2.5,
    "load_power_bound": False,
    "load_sm_clocks_mhz": [3090],
    "load_ramp_s": 1.25,
    "max_operating_temp_c": 87,  # ASSUMED (not in the public sources), as on H200
    "slowdown_temp_c": 89,  # ASSUMED
}

B200 = {
    "name": "NVIDIA B200",
    "brand": "NVIDIA",
    "architecture": "Blackwell",
    "compute_cap": "10.0",
    "memory_total_mib": 183359,
    "memory_reserved_mib": 616,  # ASSUMED, as on H200
    "free_round_mib": 1,
    "bar1_total_mib": 262144,  # ASSUMED, as on H200
    "power_limit_w": 1000.0,
    "power_min_limit_w": 200.0,  # ASSUMED
    "power_max_limit_w": 1000.0,
    "idle_power_w": [192.0, 196.0],  # TensorRT-LLM #10278 table (GPUs 0 and 1, P0, model loaded, idle)
    "idle_temp_c": [33, 35],
    "idle_mem_temp_c": [33, 35],  # ASSUMED: as the GPU temperature
    "idle_pstate": "P0",
    "idle_sm_clock_mhz": 120,  # ASSUMED
    "max_sm_clock_mhz": 1965,  # ASSUMED (not in the public sources found)
    "mem_clock_mhz": 3996,
    "supported_mem_clocks_mhz": [3996],
    "supported_graphics_clocks_mhz": list(range(1965, 119, -15)),  # ASSUMED step, as on H200
    "idle_video_clock_mhz": 765,  # ASSUMED, as on H200
    "max_video_clock_mhz": 1650,  # ASSUMED
    "pcie_gen": 5,
    "pcie_width": 16,
    "pci_device_id": "290110DE",
    "pci_sub_system_id": "199910DE",  # ASSUMED
    "vbios_version": "97.00.82.00.0C",  # ASSUMED
    "board_part_number": "692-2G525-0220-000",  # ASSUMED
    "gpu_part_number": "2901-886-A1",  # ASSUMED
    "inforom_img_version": "G525.0220.00.04",  # ASSUMED
    "fan": "N/A",
    "ecc_table": "0",
    "link": "NV18",
    "nvlinks": 18,
    "nvlink_gbps": "53.125",  # ASSUMED: NVLink 5 lanes
    "p2p_read": "OK",
    "virtualization_mode": "None",
    # ASSUMED: power bound under load as the H200 recordings are (same SXM class), at the same share of the limit
    "load_power_w": 988.0,
    "load_power_jitter_w": 3.5,
    "load_power_bound": True,
    "load_sm_clocks_mhz": [1500, 1485, 1530, 1470, 1545, 1515, 1410, 1500, 1455, 1560],
    "load_ramp_s": 1.25,
    "max_operating_temp_c": 87,  # ASSUMED, as on H200
    "slowdown_temp_c": 89,  # ASSUMED
}

MODELS = {"h200": H200, "h200-x2": H200, "rtx-pro-6000": RTX_PRO_6000, "b200": B200}

# Defaults per profile name; profile.json keys override them.
PROFILE_DEFAULTS = {
    "h200-x2": {
        "gpu_count": 2,
        "driver_version": "580.159.04",
        "cuda_version": "13.0",
        # fixture bus ids, board ids, module ids and minor numbers
        "bus_ids": ["00000000:00:06.0", "00000000:00:07.0"],
        "board_ids": ["0x6", "0x7"],
        "module_ids": [2, 4],
        "cpu_affinity": "0-31",
        "numa_affinity": "0",
    },
    "h200": {"gpu_count": 8, "driver_version": "580.159.04", "cuda_version": "13.0"},
    "rtx-pro-6000": {"gpu_count": 8, "driver_version": "570.172.08", "cuda_version": "12.8"},
    "b200": {"gpu_count": 8, "driver_version": "580.95.05", "cuda_version": "13.0"},
}

# CUDA version that a driver branch reports in the table header (real pairs seen in public output:
# 570.172.08 -> 12.8, 575.x -> 12.9, 580.x -> 13.0, 590.x -> 13.1, 595.x -> 13.2).
DRIVER_CUDA = {"570": "12.8", "575": "12.9", "580": "13.0", "590": "13.1", "595": "13.2"}


class Gpu:
    """One simulated GPU: the model's static data plus its position in the host."""

    def __init__(self, model: dict, index: int, profile: dict):
        self.m = model
        self.index = index
        self.profile = profile
        host = int(profile.get("host_index", 1))
        bus_ids = profile.get("bus_ids")
        if bus_ids and index < len(bus_ids):
            self.bus_id = bus_ids[index]
        elif model is H200:
            # the fixture VM puts GPUs at consecutive slots from 00:06.0
            self.bus_id = f"00000000:00:{6 + index:02X}.0"
        else:
            # one root port per GPU behind the VM's host bridge (q35 layout)
            self.bus_id = f"00000000:{index + 1:02X}:00.0"
        board_ids = profile.get("board_ids")
        self.board_id = board_ids[index] if board_ids and index < len(board_ids) else "0x" + format(
            int(self.bus_id.split(":")[1], 16) * 256 + int(self.bus_id.split(":")[2][:2], 16), "x")
        module_ids = profile.get("module_ids")
        self.module_id = module_ids[index] if module_ids and index < len(module_ids) else index + 1
        # stable fake identities: same host and index -> same UUID and serial
        seed = f"moesweep-sim/{profile.get('gpu_model')}/{host}/{index}"
        h = hashlib.sha256(seed.encode()).hexdigest()
        self.uuid = f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
        self.serial = str(int(h[32:48], 16))[:13].rjust(13, "1")

    def idle(self, key: str):
        v = self.m[key]
        return v[self.index % len(v)]


def load_profile() -> dict:
    path = os.environ.get("MOESWEEP_SIM_PROFILE") or DEFAULT_PROFILE_PATH
    try:
        with open(path, encoding="utf-8") as f:
            prof = json.load(f)
    except FileNotFoundError:
        prof = {}
    model = prof.get("gpu_model", "h200-x2")
    if model not in MODELS:
        raise SystemExit(f"moesweep-sim: unknown gpu_model {model!r} in {path}")
    merged = dict(PROFILE_DEFAULTS.get(model, {}))
    merged.update(prof)
    merged["gpu_model"] = model
    drv = str(merged.get("driver_version", "580.159.04"))
    merged["driver_version"] = drv
    if "cuda_version" not in prof:
        merged["cuda_version"] = DRIVER_CUDA.get(drv.split(".")[0], merged.get("cuda_version", "13.0"))
    if "cpu_affinity" not in merged:
        merged["cpu_affinity"] = f"0-{(os.cpu_count() or 1) - 1}"
    merged.setdefault("numa_affinity", "0")
    return merged


def gpus_for(profile: dict) -> list[Gpu]:
    model = MODELS[profile["gpu_model"]]
    return [Gpu(model, i, profile) for i in range(int(profile.get("gpu_count", 1)))]
