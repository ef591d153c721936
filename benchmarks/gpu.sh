#!/usr/bin/env bash
# Every check that needs a CUDA GPU, in one run of a few minutes: the GPU tests, the padded
# attention kernels, a `full`-preset study's first trials (bf16; compiled, eager, eager with
# larger steps, and eager four at once on the one GPU; TORCH_LOGS=recompiles names any recompile) and the whole-model training step. Run from the repository root, with the project installed:
#
#     bash benchmarks/gpu.sh [LOG]        # LOG (default runs/gpu-check.log) keeps the whole output
#     PYTHON=.venv/bin/python bash benchmarks/gpu.sh   # another interpreter than python3
#
# Each part has its own time limit, so that one that hangs leaves the others their turn.
set -uo pipefail
log=${1:-runs/gpu-check.log}
mkdir -p "$(dirname "$log")"
export PYTHONUNBUFFERED=1 HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 TORCH_LOGS=${TORCH_LOGS-recompiles}
python=${PYTHON:-python3}
status=0

part() {  # part SECONDS TITLE COMMAND...: run one check, note its exit status and time
    local limit=$1 title=$2
    shift 2
    echo "=== $title ($(date -u +%T))"
    local start=$SECONDS
    timeout "$limit" "$@"
    local code=$?
    echo "=== $title: exit $code in $((SECONDS - start)) s"
    [ "$code" -eq 0 ] || status=1
}

packed() {  # packed COPIES ARGS...: first_trials ARGS alone, then COPIES copies at once on the one GPU (as
    # `--gpus-per-trial 1/COPIES` packs Ray's trials), each trial's examples/s summed over the copies against alone
    local copies=$1 folder
    shift
    folder=$(mktemp -d)
    if ! "$python" -m benchmarks.first_trials "$@" >"$folder/alone" 2>&1; then
        cat "$folder/alone"
        rm -rf "$folder"
        return 1
    fi
    local pids=() copy code=0
    trap 'kill "${pids[@]}" 2>/dev/null' TERM  # the part's time limit stops the copies too
    for copy in $(seq "$copies"); do
        "$python" -m benchmarks.first_trials "$@" >"$folder/copy-$copy" 2>&1 &
        pids+=($!)
    done
    for copy in "${pids[@]}"; do wait "$copy" || code=1; done
    cat "$folder/alone" "$folder"/copy-*
    # A trial's row ends in its costs: examples/s is the seventh field from the end; its last row counts.
    awk -v copies="$copies" '
        $1 ~ /^[0-9]+$/ && $0 !~ /FAILED/ { last[FILENAME, $1] = $(NF - 6); if ($1 + 0 > top) top = $1 + 0 }
        END {
            for (t = 0; t <= top; t++) {
                alone = last[ARGV[1], t]; sum = 0; n = 0
                for (i = 2; i < ARGC; i++) if ((ARGV[i], t) in last) { sum += last[ARGV[i], t]; n++ }
                if (n == copies && alone > 0)
                    printf "packed: trial %s, %d at once %.0f examples/s in all, alone %.0f: %.2fx\n", t, copies, sum, alone, sum / alone
                else
                    printf "packed: trial %s, not measured (alone: %s; %d of %d copies reported it)\n", t, alone > 0 ? "reported" : "missing", n, copies
            }
        }' "$folder/alone" "$folder"/copy-*
    rm -rf "$folder"
    return "$code"
}
export -f packed  # `part` runs it under `timeout`, in a shell of its own
export python

(
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    "$python" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
    part 150 "GPU tests" "$python" -m pytest -q -p no:cacheprovider tests/gpu tests/trainers/test_segments.py
    part 60 "padded attention kernels" "$python" -m benchmarks.padded_attention --lengths 1024 2048 4096
    # The real trial loop, one process for three families as a reused Ray worker runs them, compiled and eager
    # (the same configurations: the sampler is seeded), then eager with four times the examples a step.
    trials=(-m benchmarks.first_trials lra_sharing --preset full --trials 3 --train-size 2000)
    part 200 "full preset, first trials, compiled" "$python" "${trials[@]}" --steps 200 --compile
    part 120 "full preset, first trials, eager" "$python" "${trials[@]}" --steps 200 --no-compile
    part 120 "full preset, first trials, eager, batch 128" "$python" "${trials[@]}" --steps 100 --no-compile --batch-size 128
    # Packing trials onto the GPU keeps the recipe (LRA's batch of 32): the same three trials alone, then four at once.
    part 300 "full preset, first trials, eager, alone and 4 at once" bash -c 'packed "$@"' packed 4 "${trials[@]}" --steps 100 --no-compile
    part 150 "training step, padded, eager bf16" "$python" -m benchmarks.train_step --lengths 1024 4096 --padded
    part 200 "training step, padded, compiled bf16" "$python" -m benchmarks.train_step --lengths 2048 --padded --compile \
        --only "damcha r16 g2 stack"
    echo "=== all parts done; exit $status"
    exit "$status"
) 2>&1 | tee "$log"
exit "${PIPESTATUS[0]}"
