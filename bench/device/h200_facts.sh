#!/usr/bin/env bash
# Prove gpu_facts and the sglang_preflight on a real GPU host, and record real nvidia-smi output.
#
# This is how tests/fixtures/nvidia-smi/h200-x1-device/ and tests/fixtures/gpu_facts/h200-x1-device.json
# were produced: one call of this workplace's `device` tool (kind nvidia-h200: one H200, Firecracker VM,
# no network, no ansible), carrying ansible-core 2.19.14 and its dependencies as wheels in .whl/
# (cp312 manylinux, `pip download` recipe of the device README):
#
#     run(kind=nvidia-h200, carry=[".whl"], command="bash bench/device/h200_facts.sh")
#
# It runs from the repository root. Everything it records goes under $OUT (at most 8 files come back):
#   gpu_facts.json             `ansible localhost -m moesweep.sweep.gpu_facts`, GPU idle (tree callback JSON)
#   gpu_facts-under-load.json  the same while a torch process holds ~20 GiB and runs bf16 matmuls
#   preflight.txt              ansible-playbook bench/device/h200_preflight.yml per sweep point, timed
#   preflight-results.json     the preflight task result of each point (tree callback), with wall times
#   check.txt                  `moesweep check --facts gpu_facts.json ...` for the same points, timed
#   summary.txt                timings, exit codes, versions
#   raw.tar.gz                 raw outputs: nvidia-smi (plain, -q, -q -x, query-gpu, topo -m, compute-apps,
#                              -lms 250 samples and dmon under load), systemd-detect-virt, cpuinfo flags,
#                              DMI, nproc, lscpu, nvcc, ...
#   run.log                    this script's own output
# Serials and UUIDs are NOT redacted here: redact before committing anything recorded (see SOURCES.md).
set -u
OUT=${OUT:-$(mktemp -d /tmp/h200-out.XXXXXX)}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO" || exit 1
RAW=/tmp/h200-raw
rm -rf "$RAW" /tmp/h200-tree*
mkdir -p "$RAW" "$OUT"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$2"; }
# rec NAME CMD...: run CMD (LC_ALL=C, as gpu_facts does), stdout+stderr to $RAW/NAME, rc to $RAW/NAME.rc
rec() {
    local name=$1
    shift
    LC_ALL=C LANG=C "$@" >"$RAW/$name" 2>&1
    echo $? >"$RAW/$name.rc"
}

main() {
PY=$(command -v python3)
note "date_utc: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
note "uname: $(uname -a)"
note "python3: $PY $($PY -V 2>&1)"
note "nvidia-smi: $(command -v nvidia-smi)"
note "CUDA_HOME: ${CUDA_HOME:-<unset>}"

# ---- 1. raw recordings, GPU idle -------------------------------------------------------------------
FIELDS=$($PY -c "import ast,sys
src = open('plugins/module_utils/nvidia_smi.py').read()
tree = ast.parse(src)
for n in tree.body:
    if isinstance(n, ast.Assign) and getattr(n.targets[0], 'id', '') == 'QUERY_GPU_FIELDS':
        print(','.join(ast.literal_eval(n.value)))")
note "QUERY_GPU_FIELDS: $FIELDS"
rec nvidia-smi.txt nvidia-smi
rec nvidia-smi-q.txt nvidia-smi -q
rec nvidia-smi-q-x.xml nvidia-smi -q -x
rec query-gpu.csv nvidia-smi --query-gpu="$FIELDS" --format=csv
rec query-gpu-nounits.csv nvidia-smi --query-gpu="$FIELDS" --format=csv,nounits
rec topo-m.txt nvidia-smi topo -m
rec topo-p2p-r.txt nvidia-smi topo -p2p r
rec nvlink-s.txt nvidia-smi nvlink -s
rec compute-apps-idle.csv nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_bus_id --format=csv,nounits
rec help-query-gpu.txt nvidia-smi --help-query-gpu
if command -v systemd-detect-virt >/dev/null; then
    rec systemd-detect-virt.txt systemd-detect-virt
else
    echo "systemd-detect-virt: not installed ($(command -v systemd-detect-virt || echo 'command -v: nothing'))" >"$RAW/systemd-detect-virt.txt"
    echo 127 >"$RAW/systemd-detect-virt.txt.rc"
fi
grep -m1 flags /proc/cpuinfo >"$RAW/cpuinfo-flags.txt" 2>&1
grep -m1 "model name" /proc/cpuinfo >"$RAW/cpuinfo-model.txt" 2>&1
for f in sys_vendor product_name board_vendor bios_vendor chassis_vendor; do
    echo "$f: $(cat /sys/class/dmi/id/$f 2>&1)"
done >"$RAW/dmi.txt"
{
    echo "/run/systemd/container: $(cat /run/systemd/container 2>&1)"
    echo "PID 1 container=: $(tr '\0' '\n' </proc/1/environ 2>&1 | grep '^container=' || echo '<none>')"
    echo "PID 1 comm: $(cat /proc/1/comm 2>&1)"
    echo "/sys/devices/system/node/online: $(cat /sys/devices/system/node/online 2>&1)"
    echo "/proc/self/status Cpus_allowed_list: $(grep Cpus_allowed_list /proc/self/status)"
} >"$RAW/virt-evidence.txt"
rec nproc.txt nproc
rec lscpu.txt lscpu
rec uname.txt uname -a
rec os-release.txt cat /etc/os-release
rec nvcc-version.txt "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" --version
ls -ld /usr/local/cuda* >"$RAW/cuda-dirs.txt" 2>&1
rec torch.txt env -u PYTHONPATH "$PY" -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))"

# ---- 2. ansible-core from the carried wheels -------------------------------------------------------
t0=$(now)
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
note "pip install wheels: rc=$? in $(elapsed "$t0" "$(now)") s"
export PYTHONPATH=/tmp/site
export PATH=/tmp/site/bin:$PATH
export LANG=C.UTF-8 LC_ALL=C.UTF-8
export ANSIBLE_CONFIG=$REPO/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH=$REPO/collections
export ANSIBLE_HOME=/tmp/ansible-home ANSIBLE_LOCAL_TEMP=/tmp/ansible-local
export ANSIBLE_PYTHON_INTERPRETER=$PY
export ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0
note "ansible: $(ansible --version 2>&1 | head -1)"

# gpu_facts, ad hoc, GPU idle. Run twice: the first run pays the cold imports.
facts() { # facts NAME: ad-hoc gpu_facts, result JSON to $OUT/NAME.json
    local t0 rc
    t0=$(now)
    ansible localhost -i localhost, -c local -m moesweep.sweep.gpu_facts -t "/tmp/h200-tree-$1" >"$RAW/ansible-$1.txt" 2>&1
    rc=$?
    note "ansible gpu_facts ($1): rc=$rc in $(elapsed "$t0" "$(now)") s wall"
    cp "/tmp/h200-tree-$1/localhost" "$OUT/$1.json" 2>/dev/null || note "no tree output for $1"
}
facts gpu_facts-cold
facts gpu_facts
rm -f "$OUT/gpu_facts-cold.json"
cp /tmp/h200-tree-gpu_facts-cold/localhost "$RAW/gpu_facts-cold.json" 2>/dev/null

# ---- 3. preflight per sweep point: the playbook (gpu_facts + sglang_preflight), timed --------------
POINTS="flashinfer_trtllm:modelopt_fp4:0.5.9 flashinfer_cutlass:modelopt_fp4:0.5.9 marlin:modelopt_fp4:0.5.9 marlin:modelopt_fp4:0.5.23 auto:modelopt_fp4:0.5.9"
: >"$OUT/preflight.txt"
for p in $POINTS; do
    IFS=: read -r backend quant ver <<<"$p"
    tree=/tmp/h200-tree-pf-$backend-$ver
    t0=$(now)
    ANSIBLE_CALLBACKS_ENABLED=tree ANSIBLE_CALLBACK_TREE_DIR=$tree \
        ansible-playbook -i localhost, -c local bench/device/h200_preflight.yml \
        -e backend="$backend" -e quantization="$quant" -e sglang_version="$ver" >"$RAW/pf.txt" 2>&1
    rc=$?
    wall=$(elapsed "$t0" "$(now)")
    {
        echo "===== $backend / $quant / sglang $ver: ansible-playbook rc=$rc, ${wall} s wall"
        cat "$RAW/pf.txt"
    } >>"$OUT/preflight.txt"
    note "preflight playbook $backend/$quant/$ver: rc=$rc in $wall s wall"
    "$PY" - "$tree/localhost" "$backend" "$quant" "$ver" "$rc" "$wall" <<'PYEOF'
import json, sys
path, backend, quant, ver, rc, wall = sys.argv[1:]
out = "/tmp/h200-raw/preflight-results.json"
try:
    data = json.load(open(out))
except OSError:
    data = []
try:
    result = json.load(open(path))
except (OSError, ValueError) as exc:
    result = {"error": str(exc)}
data.append({"backend": backend, "quantization": quant, "sglang_version": ver,
             "playbook_rc": int(rc), "wall_s": float(wall), "result": result})
json.dump(data, open(out, "w"), indent=2)
PYEOF
done
cp "$RAW/preflight-results.json" "$OUT/preflight-results.json"

# ---- 4. moesweep check from the recorded facts (same evaluator, no ansible run) --------------------
: >"$OUT/check.txt"
for p in $POINTS; do
    IFS=: read -r backend quant ver <<<"$p"
    t0=$(now)
    out=$(PYTHONPATH=$REPO/src:/tmp/site "$PY" -m moesweep.cli check --facts "$OUT/gpu_facts.json" \
        --backend "$backend" --quantization "$quant" --sglang-version "$ver" 2>&1)
    rc=$?
    wall=$(elapsed "$t0" "$(now)")
    printf '===== moesweep check %s / %s / sglang %s: rc=%s, %s s wall\n%s\n' "$backend" "$quant" "$ver" "$rc" "$wall" "$out" >>"$OUT/check.txt"
    note "moesweep check $backend/$quant/$ver: rc=$rc in $wall s wall"
done

# ---- 5. under load: a torch process holding ~20 GiB, bf16 matmul loop ------------------------------
cat >/tmp/h200-load.py <<'PYEOF'
import sys, time
import torch
dur = float(sys.argv[1])
hold = torch.empty(20 * 1024**3 // 2, dtype=torch.bfloat16, device="cuda")  # 20 GiB
hold.fill_(1)
a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
torch.cuda.synchronize()
print("load: ready", flush=True)
open("/tmp/h200-load.ready", "w").close()
t = time.time(); n = 0
while time.time() - t < dur:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize(); n += 20
el = time.time() - t
print("load: %d matmuls 8192^3 bf16 in %.1f s = %.0f TFLOP/s" % (n, el, n * 2 * 8192**3 / el / 1e12), flush=True)
PYEOF
rm -f /tmp/h200-load.ready
env -u PYTHONPATH "$PY" /tmp/h200-load.py 35 >"$RAW/load.txt" 2>&1 &
LOAD_PID=$!
for _ in $(seq 1 120); do
    [ -e /tmp/h200-load.ready ] && break
    kill -0 $LOAD_PID 2>/dev/null || break
    sleep 0.5
done
note "load pid $LOAD_PID ready: $([ -e /tmp/h200-load.ready ] && echo yes || echo NO)"
sleep 1
rec compute-apps-load.csv nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_bus_id --format=csv,nounits
rec compute-apps-load-module-order.csv nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name,used_memory --format=csv,nounits
rec nvidia-smi-load.txt nvidia-smi
rec query-gpu-load.csv nvidia-smi --query-gpu="$FIELDS" --format=csv
rec lms250-load.csv timeout 8 nvidia-smi --query-gpu=timestamp,index,utilization.gpu,power.draw,power.limit,clocks.sm,clocks.max.sm,memory.used --format=csv -lms 250
rec dmon-pucm-load.txt timeout 20 nvidia-smi dmon -s pucm -c 5
facts gpu_facts-under-load
echo "load pid: $LOAD_PID" >>"$RAW/compute-apps-load.csv.rc"
wait $LOAD_PID
note "load: rc=$? $(tail -1 "$RAW/load.txt")"
rec compute-apps-after.csv nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_bus_id --format=csv,nounits

# ---- 6. pack -----------------------------------------------------------------------------------------
cp "$SUMMARY" "$RAW/summary.txt"
tar -C /tmp -czf "$OUT/raw.tar.gz" h200-raw
note "done: $(ls "$OUT" | tr '\n' ' ')"
}

main 2>&1 | tee "$OUT/run.log"
