#!/usr/bin/env bash
# The GPU session behind bench/results/ and examples/, one step per command sent to the GPU machine
# back to back (files in /root survive only ~30 s between commands; shared/docs/device.md).
# Prepared here first: ../shared/tools/device-wheels transformers==5.24.0 (.whl/),
# ../shared/tools/smollm2-chunks (.device-model/), and a copy of gguf-to-hf in .device/tools/.
#
#   step       carry                      does
#   model-1    .device-model/p1           the first half of SmolLM2-135M-Instruct's GGUF
#   model-2    .device-model/p2 .device   the whole GGUF, and the converter
#   setup      .whl                       the pinned wheels (transformers apart, so that the image's
#                                         own 5.17 can be tried), the HF folder, the engine under
#                                         5.17 and 5.24
#   realsize   .whl (if the machine is fresh)  bench/realsize.py at the Qwen3-0.6B shape, alone (REALSIZE_ARGS: more
#                                         of its flags, e.g. a short run: "--steps 4 --seed-steps 2 --budget-s 300")
#   memory     .whl                       the allocator's A/B at that shape under 15 GiB (issue 44; MEMORY_S=240)
#   start      (none)                     in the background: the proof on SmolLM2 (3 easy families),
#                                         the catalog screen, and the prompt candidates
#   wait S     (none)                     waits up to S seconds for them, then copies what they wrote
#   start22    .whl                       the whole study in the background: catalog, selection, predictions, a
#                                         second screen, the proof (after model-1 and model-2)
#   wait22 S   (none)                     waits up to S seconds, then brings back what it wrote (refuses at
#                                         once on a fresh machine: the last one went back between calls)
#   steps      .whl                       (SHORTLIST_COMMIT=the commit the tree is at) issue 39's profile (after model-1 and model-2), in the background: one family
#                                         alone (STEPS_ALONE steps), then 8 families under MPS (STEPS_SHARED steps),
#                                         each family's step split into generation, scoring and the rest
#                                         (proof/steptime.py) by bench/throughput.py (then waitsteps); STEPS_SET (e.g.
#                                         "--set batch_per_device=32"): the family alone again with them, and the 8 with them
#   waitsteps S (none)                    waits up to S seconds, then brings back both JSONs, the families' results
#                                         and the logs
#   modes      .whl                       (SHORTLIST_COMMIT) bench/throughput.py --warm over MODES (default 8mps cold, then
#                                         8mps-w1 and 8mps-w2 on copies of its compile cache), MODE_FAMILIES (8) specs of
#                                         examples/smollm2-22, MODE_STEPS (20) steps, in the background (after model-1,
#                                         model-2; then waitmodes); MODE_ARGS: more of its flags (e.g. "--mode-set
#                                         8mps-b16:batch_per_device=16" with MODES=8mps,8mps-b16). On an H100 a cold mode of 8 at 20 steps took 899 s
#                                         (01 140 s, 03 277 s): three modes do not fit one session's 30 device minutes
#   waitmodes S (none)                    waits up to S seconds, then brings back modes.json, the families' results, each
#                                         mode's log and every executed notebook's cell timings (cells.json)
#   tf32       .whl                       what a GRPO run's libraries do to fp32 on this GPU: TF32's switches after
#                                         TrainingArguments(torch_compile) and accelerate's dynamo plugin, a 4096^2
#                                         matmul's error against fp64 under them and after precision.fp32() (no model)
#   share      (none)                     bench/archive/share_probe.py: decode of 1 and 8 processes, time-sliced and
#                                         under MPS (bench/results/sharing.h200.json)
#   MPS=1 before start22/resume22: the jobs share the GPU through CUDA's multi-process service
#   resume22   .whl .device/old           the proof of examples/smollm2-22 again, from what it committed
#                                         (predictions, stored evaluations): no new catalog or selection,
#                                         run by the code it was committed with (schema 3), prepared here:
#                                         mkdir -p .device/old && git archive 69a0e36 shortlist proof notebooks
#                                         pyproject.toml | tar -x -C .device/old (after model-1, model-2; then wait22)
#   start3     .whl                       the proof of the rule, v3: the whole catalog (every level) with this
#                                         code, the selection (examples/smollm2-22's specs excluded), the
#                                         predictions committed, a second screen, then the training (then wait3)
#   wait3 S    (none)                     as wait22, for start3's run
#   catalog3   .whl                       v3's first piece (design v2, docs/design-v2.md): the SmolLM2 catalog on the
#                                         wider grid, timed by bench/throughput.py (catalog_wall_s, issue 39) under
#                                         CATALOG_MIN minutes, then selection v2 on it (examples/smollm2-22 excluded);
#                                         no commitment: that is the next piece (then waitc3)
#   attention  .whl                       bench/decode_attention.py (after model-1, model-2): the engine's decode step with
#                                         "sdpa" against decode_attention.py, SmolLM2 and Qwen3-0.6B's shape (~4 min; the latter
#                                         profiled: its kernels by CUDA time)
#   grouped    .whl                       bench/grouped_generation.py (after model-1, model-2): GRPO's generation for
#                                         GROUPED_FAMILIES (8) specs of examples/smollm2-22 in one batch through their
#                                         own LoRA adapters, against each alone on its merged copy, and against as many
#                                         processes at once under MPS, as runs do today (issue 39's lever, before it
#                                         is built; ~4 min)
#   scoring    .whl                       bench/scoring_overhead.py --battery: the policies a report checks again for
#                                         the first 8 specs of examples/smollm2-22, at SCORING_WORKERS answers at once
#                                         (no model, no GPU; ~2 min)
#   waitc3 S   (none)                     waits up to S seconds for catalog3, then brings back the catalog, the
#                                         selection (or its one-line refusal), the timing JSON and the logs
#
# Everything the command measured lands in $OUT; copy it into bench/results/ or examples/.
set -uo pipefail
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
PINNED="PYTHONPATH=/root/tf:/root/site:$PWD"   # requirements.txt's transformers 5.24.0
PINNED_REPO="PYTHONPATH=/root/tf:/root/site:/root/repo"  # the same, for a copy of the tree that later commands cannot change
IMAGE="PYTHONPATH=/root/site:$PWD"             # the machine's own transformers 5.17.0
FAMILIES="products(max_digits=1), chain_sum(max_terms=2, max_digits=1), basic_arithmetic(max_terms=2, max_digits=1, operators=['+', '-'], allow_parentheses=False, allow_negation=False)"

install() {
  [ -d /root/tf/transformers ] && return 0
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /root/site \
    $(ls .whl/*.whl | grep -v '/transformers-') || exit 1
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /root/tf \
    .whl/transformers-*.whl || exit 1
}

# MPS=1: jobs sharing the GPU run their kernels side by side through CUDA's multi-process service instead of
# time-slicing the GPU between processes (each job's kernels are small: a 135M model at batch 32). The
# daemon serves every CUDA process started after it with the same pipe folder; nothing else changes.
mps_on() {
  [ "${MPS:-0}" = 1 ] || return 0
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if ! pgrep -x nvidia-cuda-mps-control > /dev/null; then
    command -v nvidia-cuda-mps-control || { echo "MPS: no nvidia-cuda-mps-control here"; MPS=0; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; return 0; }
    nvidia-cuda-mps-control -d || { echo "MPS: the daemon did not start"; MPS=0; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; return 0; }
  fi
  python3 -c "import torch; x = torch.ones(1, device='cuda'); print('MPS: a CUDA client ran', float(x.sum()))" \
    || { echo "MPS: a client failed; off"; echo quit | nvidia-cuda-mps-control; MPS=0; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; }
  echo "MPS=${MPS}"; cat "$CUDA_MPS_LOG_DIRECTORY/control.log" 2>/dev/null | tail -3
}

# what the GPU and the CPUs did while a run went on, every 15 s, for the benchmark's record
monitor() {
  mkdir -p /root/logs
  # a pid file, not pgrep -f: the device tool's own command line may hold any pattern (it once held this one)
  [ -f /root/logs/monitor.pid ] && kill -0 "$(cat /root/logs/monitor.pid)" 2>/dev/null && return 0
  setsid nohup nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -l 15 \
    > /root/logs/gpu.log 2>&1 &
  echo $! > /root/logs/monitor.pid
  setsid nohup bash -c 'while true; do echo "$(date +%s) $(cat /proc/loadavg)"; sleep 15; done' > /root/logs/load.log 2>&1 &
}

# wait_run DIR S NAME: a run started in the background on this machine (DIR/started), waited for up to S seconds
# (DIR/finished); a fresh machine (the last went back between calls) holds none: said at once, exit 3
wait_run() {
  [ -f "$1/started" ] || { echo "no run on this machine: it is a fresh one (the last went back); start again"; exit 3; }
  local end=$((SECONDS + $2))
  while [ ! -f "$1/finished" ] && [ $SECONDS -lt $end ]; do sleep 5; done
  [ -f "$1/finished" ] && echo "$3 finished" || echo "$3 still running after ${SECONDS} s"
}

# specs N: the first N specs of examples/smollm2-22, split at the commas outside parentheses, as proof run takes them
specs() {
  python3 -c "import re, sys; print(', '.join(re.split(r',\s*(?![^()]*\))', open('examples/smollm2-22/families.txt').read().strip())[:int(sys.argv[1])]))" "$1"
}

versions() { env "$@" python3 -c "import torch, transformers, trl; print('torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__)"; }

case "${1:?step}" in
  model-1)
    mkdir -p /root/m && cp .device-model/p1/part.00 /root/m/ && nvidia-smi -L ;;
  model-2)
    cat /root/m/part.00 .device-model/p2/part.01 > /root/smollm2.gguf && cp .device/tools/gguf-to-hf /root/ \
      && sha256sum /root/smollm2.gguf ;;
  setup)
    install
    env $PINNED python3 /root/gguf-to-hf /root/smollm2.gguf /root/smollm2 || exit 1
    mkdir -p "$OUT"
    for side in IMAGE PINNED; do
      versions ${!side}
      env ${!side} python3 bench/engine_check.py --model /root/smollm2 --trainee smollm2 \
        --out "$OUT/engine_check.$side.json" 2>&1 | tail -12
    done ;;
  realsize)
    install
    versions $PINNED
    env $PINNED SHORTLIST_COMMIT="${SHORTLIST_COMMIT:-unknown}" python3 bench/realsize.py --out "$OUT" --memory-gb 15 ${REALSIZE_ARGS:-} ;;
  memory)
    # issue 44's allocator, A/B in one command: two families of ours at once on one GPU (each capped at a T4's
    # 15 GiB), PyTorch's default allocator against shortlist.models.memory.allocator()'s expandable segments;
    # their peak memory per phase lands in $OUT/realsize.{default,expandable}.json (timings are shared-GPU ones)
    install
    versions $PINNED
    mkdir -p "$OUT" /tmp/rs
    common="--work /tmp/rs --model /tmp/rs/shape --model-path /tmp/rs/shape --memory-gb 15 --steps 3"
    env $PINNED python3 bench/realsize.py --role build --json "$OUT/realsize.build.json" $common || exit 1
    end=$(( $(date +%s) + ${MEMORY_S:-240} ))
    for side in default expandable; do
      conf=$([ $side = default ] && echo "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False" || echo "X=")
      env $PINNED $conf timeout $(( end - $(date +%s) + 10 )) python3 bench/realsize.py --role ours \
        --json "$OUT/realsize.$side.json" --cache /tmp/rs/compile-$side --deadline $end $common \
        > "$OUT/realsize.$side.log" 2>&1 &
    done
    wait
    python3 bench/realsize_table.py --phases "$OUT"/realsize.default.json "$OUT"/realsize.expandable.json ;;
  start)
    mkdir -p /root/logs /root/repo  # a copy of the tree of its own: a later command's copy cannot change under it
    tar --exclude=./.whl --exclude=./.device-model --exclude=./.device -cf - . | tar -xf - -C /root/repo
    cd /root/repo && PINNED="PYTHONPATH=/root/tf:/root/site:/root/repo"
    env $PINNED setsid nohup python3 -m proof run --trainee smollm2 --model /root/smollm2 \
      --families "$FAMILIES" --set steps=40 --out /root/runs/smollm2 --per-gpu 1 > /root/logs/proof.log 2>&1 &
    env $PINNED setsid nohup python3 -m shortlist screen --all --trainee smollm2 --model /root/smollm2 \
      --out /root/runs/catalog --per-gpu 1 --budget-min "${CATALOG_MIN:-7}" > /root/logs/catalog.log 2>&1 &
    env $PINNED setsid nohup python3 bench/archive/smollm2_profile.py --model /root/smollm2 --write /root/smollm2.json \
      --out /root/runs/smollm2_profile.json > /root/logs/profile.log 2>&1 &
    sleep 5; tail -n 3 /root/logs/*.log ;;
  wait)
    end=$((SECONDS + ${2:-500}))
    while pgrep -f "proof run|shortlist screen|smollm2_profile" > /dev/null && [ $SECONDS -lt $end ]; do sleep 10; done
    pgrep -af "proof run|shortlist screen|smollm2_profile" || echo "all done after ${SECONDS} s"
    mkdir -p "$OUT/catalog"
    tar -czf "$OUT/logs.tgz" -C /root logs
    cp /root/runs/smollm2_profile.json /root/smollm2.json "$OUT/" 2>/dev/null
    (cd /root/runs/smollm2 2>/dev/null && tar -czf "$OUT/smollm2.tgz" predictions.json predictions.sha256 families \
      report.html notebooks 2>/dev/null)  # one file: a command brings back only a few
    (cd /root/runs/catalog 2>/dev/null && { cp shortlist.* "$OUT/catalog/"; tar -czf "$OUT/catalog/families.tgz" families; })
    tail -n 5 /root/logs/*.log ;;
  start22)
    # the whole study, in the background: the SmolLM2 catalog walked up every curriculum (per-GPU workers), the
    # selection rule on it (proof/selection.py), the predictions committed for that list, a second screen
    # of every spec on other prediction seeds, then GRPO on every spec (100 steps, the protocol's)
    install
    [ -d /root/smollm2 ] || env $PINNED python3 /root/gguf-to-hf /root/smollm2.gguf /root/smollm2 || exit 1
    mkdir -p /root/logs /root/repo /root/runs
    tar --exclude=./.whl --exclude=./.device-model --exclude=./.device -cf - . | tar -xf - -C /root/repo
    cat > /root/run22.sh <<EOS
cd /root/repo && export $PINNED_REPO HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
date +%s > /root/runs/started
python3 -m shortlist screen --all --levels --trainee smollm2 --model /root/smollm2 --out /root/runs/catalog \\
  --per-gpu ${CATALOG_PER_GPU:-8} --budget-min ${CATALOG_MIN:-7} > /root/logs/catalog.log 2>&1
python3 -m proof.selection /root/runs/catalog/shortlist.json --json /root/runs/selection.json \\
  > /root/runs/families.txt 2> /root/logs/selection.log || exit 1
python3 -m shortlist screen --trainee smollm2 --model /root/smollm2 --families "\$(cat /root/runs/families.txt)" \\
  --first-seed 1000 --json /root/runs/second_screen.json > /root/logs/second_screen.log 2>&1 &
python3 -m proof run --trainee smollm2 --model /root/smollm2 --families "\$(cat /root/runs/families.txt)" \\
  --out /root/runs/proof --per-gpu ${PROOF_PER_GPU:-8} > /root/logs/proof.log 2>&1
wait
date +%s > /root/runs/finished
EOS
    setsid nohup bash /root/run22.sh > /root/logs/run22.log 2>&1 &
    sleep 20; tail -n 3 /root/logs/*.log ;;
  resume22)
    # the committed selection and predictions, not a new catalog: the list was fixed before any training
    install
    [ -d /root/smollm2 ] || env $PINNED python3 /root/gguf-to-hf /root/smollm2.gguf /root/smollm2 || exit 1
    mkdir -p /root/logs /root/repo /root/runs
    if [ -d .device/old/proof ]; then cp -r .device/old/. /root/repo/; else  # the code the commitment was made with
      tar --exclude=./.whl --exclude=./.device-model --exclude=./.device -cf - . | tar -xf - -C /root/repo; fi
    cp -r examples/smollm2-22/proof /root/runs/proof && cp examples/smollm2-22/{selection.json,families.txt,second_screen.json} /root/runs/
    mps_on; monitor
    cat > /root/run22.sh <<EOS
cd /root/repo && export $PINNED_REPO HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
[ "$MPS" = 1 ] && export CUDA_MPS_PIPE_DIRECTORY=$CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY=$CUDA_MPS_LOG_DIRECTORY
date +%s > /root/runs/started
python3 -m proof run --trainee smollm2 --model /root/smollm2 --families "\$(cat /root/runs/families.txt)" \\
  --out /root/runs/proof --per-gpu ${PROOF_PER_GPU:-8} > /root/logs/proof.log 2>&1
date +%s > /root/runs/finished
EOS
    setsid nohup bash /root/run22.sh > /root/logs/run22.log 2>&1 &
    sleep 20; tail -n 3 /root/logs/*.log ;;
  wait22)
    # a fresh machine (the last one went back between two calls) holds no run: say so at once, not after S seconds
    # waits up to S seconds, then brings back what the run has written: the catalog, the selection, the
    # second screen, and the proof's committed predictions, results, notebooks and report (not its
    # checkpoints or compile cache: over what one command brings back; an unfinished family restarts
    # its training from its stored evaluation in a later session)
    wait_run /root/runs "${2:-540}" run22
    nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv
    (cd /root/runs && tar -czf "$OUT/catalog.tgz" --exclude=compile catalog 2>/dev/null)
    (cd /root/runs && tar -czf "$OUT/proof.tgz" selection.json families.txt second_screen.json started finished \
       proof/predictions.json proof/predictions.sha256 proof/families proof/notebooks proof/report.html \
       $(ls -d proof/work/*/before.json 2>/dev/null) 2>/dev/null)
    tar -czf "$OUT/logs.tgz" -C /root logs
    ls -la "$OUT"; tail -n 4 /root/logs/*.log ;;
  start3)
    # the proof of the rule, v3 (docs/design-v2.md): catalog -> selection -> predictions -> training
    install
    [ -d /root/smollm2 ] || env $PINNED python3 /root/gguf-to-hf /root/smollm2.gguf /root/smollm2 || exit 1
    mkdir -p /root/logs /root/repo /root/v3
    tar --exclude=./.whl --exclude=./.device-model --exclude=./.device -cf - . | tar -xf - -C /root/repo
    [ -d examples/smollm2-v3 ] && cp -r examples/smollm2-v3/. /root/v3/  # what an earlier session brought back
    mps_on; monitor
    cat > /root/run3.sh <<EOS
cd /root/repo && export $PINNED_REPO HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
[ "$MPS" = 1 ] && export CUDA_MPS_PIPE_DIRECTORY=$CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY=$CUDA_MPS_LOG_DIRECTORY
date +%s >> /root/v3/started
python3 -m shortlist screen --all --levels --trainee smollm2 --model /root/smollm2 --out /root/v3/catalog \\
  --per-gpu ${CATALOG_PER_GPU:-12} --budget-min ${CATALOG_MIN:-15} > /root/logs/catalog.log 2>&1
[ -f /root/v3/families.txt ] || python3 -m proof.selection /root/v3/catalog/shortlist.json --json /root/v3/selection.json \\
  --exclude examples/smollm2-22/families.txt > /root/v3/families.txt 2> /root/logs/selection.log || exit 1
python3 -m shortlist screen --trainee smollm2 --model /root/smollm2 --families "\$(cat /root/v3/families.txt)" \\
  --first-seed 1000 --json /root/v3/second_screen.json > /root/logs/second_screen.log 2>&1 &
python3 -m proof run --trainee smollm2 --model /root/smollm2 --families "\$(cat /root/v3/families.txt)" \\
  --out /root/v3/proof --per-gpu ${PROOF_PER_GPU:-12} > /root/logs/proof.log 2>&1
wait
date +%s > /root/v3/finished
EOS
    setsid nohup bash /root/run3.sh > /root/logs/run3.log 2>&1 &
    sleep 20; tail -n 3 /root/logs/*.log ;;
  wait3)
    wait_run /root/v3 "${2:-540}" v3
    (cd /root/v3 && tar -czf "$OUT/v3.tgz" --exclude=compile --exclude='proof/work/*/checkpoints' . 2>/dev/null)
    tar -czf "$OUT/logs.tgz" -C /root logs
    ls -la "$OUT"; tail -n 4 /root/logs/*.log ;;
  catalog3)
    install
    [ -d /root/smollm2 ] || env $PINNED python3 /root/gguf-to-hf /root/smollm2.gguf /root/smollm2 || exit 1
    mkdir -p /root/logs /root/repo /root/v3
    tar --exclude=./.whl --exclude=./.device-model --exclude=./.device -cf - . | tar -xf - -C /root/repo
    [ -d examples/smollm2-v3/catalog ] && cp -r examples/smollm2-v3/catalog /root/v3/  # an earlier piece: resumed
    versions $PINNED; mps_on; monitor
    cat > /root/catalog3.sh <<EOS
cd /root/repo && export $PINNED_REPO HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
[ "$MPS" = 1 ] && export CUDA_MPS_PIPE_DIRECTORY=$CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY=$CUDA_MPS_LOG_DIRECTORY
date +%s >> /root/v3/started
SHORTLIST_COMMIT=${SHORTLIST_COMMIT:-unknown} python3 bench/throughput.py --model /root/smollm2 --trainee smollm2 \\
  --modes "" --catalog ${CATALOG_PER_GPU:-8} --catalog-walk grid --catalog-budget ${CATALOG_MIN:-12} \\
  --catalog-out /root/v3/catalog --out /root/v3/bench --json /root/v3/throughput.catalog.json > /root/logs/catalog3.log 2>&1
python3 -m proof.selection /root/v3/catalog/shortlist.json --json /root/v3/selection.json \\
  --exclude examples/smollm2-22/families.txt > /root/v3/families.txt 2> /root/logs/selection.log
echo "selection rc \$?" >> /root/logs/selection.log
date +%s > /root/v3/finished
EOS
    setsid nohup bash /root/catalog3.sh > /root/logs/run3.log 2>&1 &
    sleep 15; tail -n 3 /root/logs/*.log ;;
  waitc3)
    wait_run /root/v3 "${2:-540}" catalog3
    (cd /root/v3 && tar -czf "$OUT/catalog3.tgz" --exclude=compile catalog selection.json families.txt \
       throughput.catalog.json started finished 2>/dev/null)
    tar -czf "$OUT/logs.tgz" -C /root logs
    ls -la "$OUT"; tail -n 6 /root/logs/catalog3.log /root/logs/selection.log; tail -n 3 /root/logs/gpu.log ;;
  steps)
    install
    [ -d /root/smollm2 ] || env $PINNED python3 /root/gguf-to-hf /root/smollm2.gguf /root/smollm2 || exit 1
    mkdir -p /root/logs /root/repo /root/sp
    tar --exclude=./.whl --exclude=./.device-model --exclude=./.device -cf - . | tar -xf - -C /root/repo
    versions $PINNED; monitor
    eight=$(specs 8)  # issue 39's 8
    cat > /root/steps.sh <<EOS
cd /root/repo && export $PINNED_REPO HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
export SHORTLIST_COMMIT=${SHORTLIST_COMMIT:-unknown}
date +%s > /root/sp/started
[ "${STEPS_ALONE:-20}" = 0 ] || python3 bench/throughput.py --model /root/smollm2 --trainee smollm2 \\
  --families "chain_sum(max_digits=1, max_terms=2)" --modes 1 --set steps=${STEPS_ALONE:-20} --out /root/sp/alone \\
  --json /root/sp/alone.json > /root/logs/alone.log 2>&1
# STEPS_SET: the same family alone again with those settings (its own folder and compile cache: cold, as the first)
[ "${STEPS_ALONE:-20}" = 0 ] || [ -z "${STEPS_SET:-}" ] || python3 bench/throughput.py --model /root/smollm2 \\
  --trainee smollm2 --families "chain_sum(max_digits=1, max_terms=2)" --modes 1 --set steps=${STEPS_ALONE:-20} \\
  ${STEPS_SET:-} --out /root/sp/alone-set --json /root/sp/alone-set.json > /root/logs/alone-set.log 2>&1
[ "${STEPS_SHARED:-30}" = 0 ] || python3 bench/throughput.py --model /root/smollm2 --trainee smollm2 --families "$eight" \\
  --modes 8mps --set steps=${STEPS_SHARED:-30} ${STEPS_SET:-} --out /root/sp/shared --json /root/sp/shared.json > /root/logs/shared.log 2>&1
# STEPS_WARM=1: the same 8 again, from the same commitment, with the compile cache the first 8 filled: what
# compiling once per machine (instead of once per process) would save under MPS
if [ "${STEPS_WARM:-0}" = 1 ]; then
  rm -rf /root/sp/warm; mkdir -p /root/sp/warm/8mps/work && cp -r /root/sp/shared/8mps/work/compile /root/sp/warm/8mps/work/
  cp /root/sp/shared/8mps/predictions.json /root/sp/shared/8mps/predictions.sha256 /root/sp/shared/8mps/trainee.json /root/sp/warm/8mps/
  python3 bench/throughput.py --model /root/smollm2 --trainee smollm2 --families "$eight" \\
    --modes 8mps --set steps=${STEPS_SHARED:-30} --out /root/sp/warm --json /root/sp/warm.json > /root/logs/warm.log 2>&1
fi
date +%s > /root/sp/finished
EOS
    setsid nohup bash /root/steps.sh > /root/logs/steps.log 2>&1 &
    sleep 10; tail -n 3 /root/logs/*.log ;;
  waitsteps)
    wait_run /root/sp "${2:-540}" steps
    (cd /root/sp && tar -czf "$OUT/steps.tgz" --exclude=compile --exclude=checkpoints --exclude=adapter \
       started finished alone.json alone-set.json shared.json warm.json alone/*/families alone/*/predictions.json \
       alone-set/*/families shared/*/families shared/*/predictions.json warm/*/families alone/*.log alone-set/*.log \
       shared/*.log warm/*.log 2>/dev/null)
    tar -czf "$OUT/logs.tgz" -C /root logs
    cat /root/sp/*.json 2>/dev/null | head -c 6000; tail -n 3 /root/logs/alone.log /root/logs/alone-set.log /root/logs/shared.log /root/logs/warm.log 2>/dev/null ;;
  modes)
    # issue 39's next piece, in the background: bench/throughput.py --warm over MODES (default: 8 per GPU under MPS
    # cold, then twice on copies of the cache it filled: warm against warm tells float order that varies run to run
    # from kernels compiled for other shapes), MODE_FAMILIES specs of examples/smollm2-22, MODE_STEPS steps
    install
    [ -d /root/smollm2 ] || env $PINNED python3 /root/gguf-to-hf /root/smollm2.gguf /root/smollm2 || exit 1
    rm -rf /root/md  # a run of its own: an earlier one on this machine would leave its finished file and a full cache
    mkdir -p /root/logs /root/repo /root/md
    tar --exclude=./.whl --exclude=./.device-model --exclude=./.device -cf - . | tar -xf - -C /root/repo
    versions $PINNED; monitor
    specs=$(specs "${MODE_FAMILIES:-8}")
    cat > /root/modes.sh <<EOS
cd /root/repo && export $PINNED_REPO HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
export SHORTLIST_COMMIT=${SHORTLIST_COMMIT:-unknown}
date +%s > /root/md/started
python3 bench/throughput.py --model /root/smollm2 --trainee smollm2 --families "$specs" --warm \\
  --modes ${MODES:-8mps,8mps-w1,8mps-w2} --set steps=${MODE_STEPS:-20} ${MODE_ARGS:-} --out /root/md --json /root/md/modes.json \\
  > /root/logs/modes.log 2>&1
date +%s > /root/md/finished
EOS
    setsid nohup bash /root/modes.sh > /root/logs/modes-run.log 2>&1 &
    sleep 10; tail -n 3 /root/logs/*.log ;;
  waitmodes)
    wait_run /root/md "${2:-540}" modes
    # each executed notebook's cells, timed by papermill (where 01's and 03's seconds go), small enough to bring back
    python3 - > /root/md/cells.json <<'EOP'
import glob, json
cells = {}
for path in sorted(glob.glob("/root/md/*/notebooks/*.ipynb")):
    nb = json.load(open(path))
    cells[path] = [[c.get("metadata", {}).get("papermill", {}).get("duration"), "".join(c.get("source", ""))[:80]]
                   for c in nb.get("cells", []) if c.get("cell_type") == "code"]
print(json.dumps(cells, indent=1))
EOP
    (cd /root/md && tar -czf "$OUT/modes.tgz" --exclude=compile --exclude=checkpoints --exclude=adapter \
       started finished modes.json cells.json ./*.log ./*/families ./*/predictions.json \
       ./*/notebooks/03_report.ipynb 2>/dev/null)  # 03: the seconds its checks took per family (report: checking)
    tar -czf "$OUT/logs.tgz" -C /root logs
    cat /root/md/modes.json 2>/dev/null | python3 -c "import json, sys; d = json.load(sys.stdin); print(json.dumps({m: {k: v for k, v in r.items() if k not in ('phases_median_s', 'equivalence', 'per_family')} for m, r in d['modes'].items()}, indent=1))"
    tail -n 3 /root/logs/modes.log ;;
  grouped)
    install
    [ -d /root/smollm2 ] || env $PINNED python3 /root/gguf-to-hf /root/smollm2.gguf /root/smollm2 || exit 1
    mkdir -p "$OUT"; versions $PINNED; MPS=1 mps_on
    env $PINNED python3 bench/grouped_generation.py --model /root/smollm2 --trainee smollm2 \
      --families "$(specs "${GROUPED_FAMILIES:-8}")" --processes "${GROUPED_FAMILIES:-8}" --repeats "${GROUPED_REPEATS:-5}" \
      --json "$OUT/grouped.json" \
      2>&1 | grep -v Warning | tail -30
    echo quit | nvidia-cuda-mps-control ;;
  attention)
    install
    [ -d /root/smollm2 ] || env $PINNED python3 /root/gguf-to-hf /root/smollm2.gguf /root/smollm2 || exit 1
    mkdir -p "$OUT"; versions $PINNED
    env $PINNED python3 bench/decode_attention.py --model /root/smollm2 --trainee smollm2 \
      --json "$OUT/decode_attention.smollm2.json" 2>&1 | grep -v Warning | tail -3
    env $PINNED python3 bench/decode_attention.py --model qwen3-shape --trainee qwen3 --profile \
      --json "$OUT/decode_attention.qwen3.json" 2>&1 | grep -v Warning | tail -40 ;;
  scoring)
    install; mkdir -p "$OUT"
    env $PINNED python3 bench/scoring_overhead.py --battery ${SCORING_WORKERS:-4,8,16} --specs "$(specs 8)" \
      2>&1 | grep -v -e Warning -e memoize | tee "$OUT/scoring_battery.txt" ;;
  tf32)
    install
    env $PINNED python3 - <<'EOP' 2>&1 | grep -v Warning
import torch, transformers, accelerate
from shortlist.models import precision
a, b = (torch.randn(4096, 4096, device="cuda", generator=torch.Generator("cuda").manual_seed(i)) for i in (0, 1))
exact = a.double() @ b.double()
def error():  # the largest error of an fp32 matmul, relative to the largest |entry|
    return float(((a @ b).double() - exact).abs().max() / exact.abs().max())
print("torch", torch.__version__, "transformers", transformers.__version__, "accelerate", accelerate.__version__,
      torch.cuda.get_device_name(0))
print("fresh process:", precision.state(), "error %.1e" % error())
transformers.TrainingArguments(output_dir="/tmp/ta", torch_compile=True, bf16=False, fp16=False, report_to=[])
print("after TrainingArguments(torch_compile=True):", precision.state(), "error %.1e" % error())
from accelerate.utils import TorchDynamoPlugin
accelerate.Accelerator(dynamo_plugin=TorchDynamoPlugin(backend="inductor"))
print("after Accelerator(dynamo inductor):", precision.state(), "error %.1e" % error())
precision.fp32()
print("after precision.fp32():", precision.state(), "error %.1e" % error(), "reduced:", precision.reduced(only=None))
EOP
    ;;
  share)
    # how jobs share the GPU: decode throughput of 1 and N processes, time-sliced and under MPS (no model, no wheels)
    export TORCHINDUCTOR_CACHE_DIR=/tmp/ind; mkdir -p "$OUT"
    python3 bench/archive/share_probe.py --jobs 1 --seconds 20 2>/dev/null | tee "$OUT/share.j1.json"
    python3 bench/archive/share_probe.py --jobs "${SHARE_JOBS:-8}" --seconds 20 2>/dev/null | tee "$OUT/share.j8.json"
    MPS=1 mps_on && python3 bench/archive/share_probe.py --jobs "${SHARE_JOBS:-8}" --seconds 20 2>/dev/null | tee "$OUT/share.j8.mps.json"
    echo quit | nvidia-cuda-mps-control ;;
  *) echo "unknown step $1" >&2; exit 2 ;;
esac
