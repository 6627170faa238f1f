#!/usr/bin/env bash
# Record the host checks' raw inputs on a real GPU host (one H100 / H200), idle and under load, and judge them.
#
# Run from the repository root with the workplace's `device` tool (no ansible needed: the checks are pure Python
# in plugins/module_utils/host_checks.py, imported from the collection path):
#
#     run(kind=nvidia-h100-x1, command="bash bench/device/host_checks.sh")
#
# Everything goes under $OUT:
#   nvidia-smi-q.txt, nvidia-smi-q-under-load.txt   `nvidia-smi -q` idle and while a bf16 matmul runs (links,
#                                                   power readings, persistence, ECC, remapped rows)
#   query-link-power.csv                            --query-gpu of link gen/width (current, max, gpu/host max),
#                                                   power limits, persistence, util, idle then under load (-lms 250)
#   topo-p2p-r.txt, topo-m.txt                      P2P matrix and topology (one GPU: a 1x1 matrix)
#   version.txt                                     nvidia-smi --version (driver, CUDA)
#   proc-1-limits.txt, proc-1-status.txt            the service manager's limits and capabilities (CapEff)
#   proc-self-limits.txt                            this shell's limits
#   unit-limits.txt                                 /proc/self/limits of a transient unit asking for
#                                                   LimitMEMLOCK=infinity LimitNOFILE=1048576 (systemd-run), or why not
#   shm.txt                                         df and mount line of /dev/shm
#   cmdline.txt, iommu-groups.txt, lspci-vvv.txt    kernel command line, IOMMU groups, lspci -vvv (or why not)
#   kernel-nvrm.txt                                 NVRM lines of the kernel log (journalctl -k -b, else dmesg)
#   meminfo.txt, df.txt                             RAM and free disk of / and /var/lib
#   host-checks.json                                host_checks.evaluate() on the idle inputs (and under load)
#   run.log                                         this script's own output
# UUIDs and serials are not redacted here: redact them before committing a recording (see SOURCES.md).
set -u
OUT=${OUT:-$(mktemp -d /tmp/host-checks.XXXXXX)}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO" || exit 1
mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1
export LC_ALL=C
LINK=index,pci.bus_id,utilization.gpu,pstate,pcie.link.gen.current,pcie.link.gen.max,pcie.link.gen.gpucurrent,pcie.link.gen.gpumax,pcie.link.gen.hostmax,pcie.link.width.current,pcie.link.width.max,power.draw,power.limit,enforced.power.limit,power.default_limit,power.max_limit,persistence_mode,ecc.errors.uncorrected.volatile.total

echo "== versions"
nvidia-smi --version > "$OUT/version.txt" 2>&1; cat "$OUT/version.txt"
nvidia-smi -q > "$OUT/nvidia-smi-q.txt" 2>&1
nvidia-smi topo -p2p r > "$OUT/topo-p2p-r.txt" 2>&1
nvidia-smi topo -m > "$OUT/topo-m.txt" 2>&1
nvidia-smi --query-gpu="timestamp,$LINK" --format=csv > "$OUT/query-link-power.csv" 2>&1

echo "== limits"
cat /proc/1/limits > "$OUT/proc-1-limits.txt" 2>&1
cat /proc/1/status > "$OUT/proc-1-status.txt" 2>&1
cat /proc/self/limits > "$OUT/proc-self-limits.txt" 2>&1
if command -v systemd-run >/dev/null && [ -d /run/systemd/system ]; then
  systemd-run --wait --pipe --quiet -p LimitMEMLOCK=infinity -p LimitNOFILE=1048576 cat /proc/self/limits \
    > "$OUT/unit-limits.txt" 2>&1 || echo "systemd-run exited $?" >> "$OUT/unit-limits.txt"
else
  echo "no systemd as PID 1 ($(cat /proc/1/comm 2>/dev/null)): no unit to start" > "$OUT/unit-limits.txt"
fi
grep -E "locked|open files" "$OUT/proc-1-limits.txt" "$OUT/unit-limits.txt"

echo "== shm, kernel, PCI"
{ df -B1 /dev/shm; grep " /dev/shm " /proc/mounts; } > "$OUT/shm.txt" 2>&1
cat /proc/cmdline > "$OUT/cmdline.txt" 2>&1
ls /sys/kernel/iommu_groups > "$OUT/iommu-groups.txt" 2>&1
if command -v lspci >/dev/null; then lspci -vvv > "$OUT/lspci-vvv.txt" 2>&1; else echo "lspci not installed" > "$OUT/lspci-vvv.txt"; fi
{ journalctl -k -b --no-pager -q -o short-monotonic 2>/dev/null || dmesg 2>&1; } | grep NVRM > "$OUT/kernel-nvrm.txt"
echo "kernel log NVRM lines: $(wc -l < "$OUT/kernel-nvrm.txt")"
cat /proc/meminfo > "$OUT/meminfo.txt"
df -B1 / /var/lib > "$OUT/df.txt" 2>&1

echo "== under load (bf16 matmul, 12 s)"
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  python3 - <<'PY' &
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
end = time.time() + 12
while time.time() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
PY
  LOAD=$!
  sleep 3
  timeout 4 nvidia-smi --query-gpu="timestamp,$LINK" --format=csv,noheader -lms 250 >> "$OUT/query-link-power.csv" 2>&1
  nvidia-smi -q > "$OUT/nvidia-smi-q-under-load.txt" 2>&1
  wait $LOAD
else
  echo "no torch with CUDA here: the under-load capture is skipped" | tee "$OUT/nvidia-smi-q-under-load.txt"
fi

echo "== host checks"
python3 - "$OUT" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "collections"))
from ansible_collections.moesweep.sweep.plugins.module_utils import host_checks as hc
from ansible_collections.moesweep.sweep.plugins.module_utils import nvidia_smi as smi
out = sys.argv[1]
def read(name):
    try:
        with open(os.path.join(out, name)) as f:
            return f.read()
    except OSError:
        return None
def statvfs(path):
    st = os.statvfs(path)
    return {"path": path, "free_bytes": st.f_bavail * st.f_frsize, "what": "exists"}
lspci = read("lspci-vvv.txt")
header = smi.parse_smi_header(os.popen("nvidia-smi").read())
base = {
    "driver_version": header.get("driver_version"), "driver_cuda_version": header.get("cuda_version"),
    "topo_p2p": read("topo-p2p-r.txt"), "topology": smi.parse_topo_matrix(read("topo-m.txt") or ""),
    "cmdline": read("cmdline.txt"), "iommu_groups": bool((read("iommu-groups.txt") or "").split()),
    "lspci": None if (lspci or "").startswith("lspci not installed") else lspci,
    "manager_limits": read("proc-1-limits.txt"), "manager_status": read("proc-1-status.txt"),
    "unit_requested": {"memlock": "infinity", "nofile": "1048576"},
    "unit_cpus": next((l.split(":", 1)[1].strip() for l in (read("proc-1-status.txt") or "").splitlines()
                       if l.startswith("Cpus_allowed_list:")), None),
    "kernel_log": read("kernel-nvrm.txt"), "meminfo": read("meminfo.txt"),
    "disk": [statvfs("/")],
}
try:
    st = os.statvfs("/dev/shm")
    base["shm_bytes"] = st.f_blocks * st.f_frsize
except OSError:
    base["shm_bytes"] = None
result = {}
for label, q in (("idle", "nvidia-smi-q.txt"), ("under_load", "nvidia-smi-q-under-load.txt")):
    text = read(q) or ""
    if "GPU " not in text:
        continue
    inputs = dict(base, nvidia_smi_q=text, gpu_count=len(hc.parse_q_gpus(text)))
    result[label] = hc.evaluate(inputs)
with open(os.path.join(out, "host-checks.json"), "w") as f:
    json.dump(result, f, indent=1)
for label, checks in result.items():
    print("--", label)
    for c in checks:
        print("%-4s %-12s %s" % (c["verdict"], c["name"], c["evidence"]))
PY
ls -la "$OUT"
