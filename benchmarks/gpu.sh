#!/usr/bin/env bash
# Every check that needs a CUDA GPU, in one run of a few minutes: the GPU tests, the padded
# attention kernels, a `full`-preset study's first trials (bf16; compiled, eager, and eager with
# larger steps; TORCH_LOGS=recompiles names any recompile) and the whole-model training step. Run from the repository root, with the project installed:
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
    part 150 "training step, padded, eager bf16" "$python" -m benchmarks.train_step --lengths 1024 4096 --padded
    part 200 "training step, padded, compiled bf16" "$python" -m benchmarks.train_step --lengths 2048 --padded --compile \
        --only "damcha r16 g2 stack"
    echo "=== all parts done; exit $status"
    exit "$status"
) 2>&1 | tee "$log"
exit "${PIPESTATUS[0]}"
