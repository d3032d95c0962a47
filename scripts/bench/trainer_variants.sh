#!/usr/bin/env bash
# One net under several settings, side by side: `trainer time` runs each
# variant in turn, REPEATS rounds alternating, and prints the median images/s
# and peak memory of each, and each one's ratio to the first. Two speeds:
# images_per_s from the median of forward, backward and update each timed to
# a wait, and loop_images_per_s from the training loop (Solver::Step) run
# back to back with one wait at the end, which is what --defer_steps=0 (a
# wait per iteration on the GPU) changes. For measuring what a switch gains
# (the trainer's switches: --share_diffs=0, one diff buffer per blob;
# --cudnn_workspace_mb=N, cuDNN's workspace bound; ...).
#
#   scripts/bench/trainer_variants.sh 'NAME=SETTING,SETTING' ... -- TRAINER_TIME_ARGS...
#
# A variant is a name, '=', then comma-separated settings (none: the
# defaults): a trainer flag (--share_diffs=0) or an environment variable
# for that run (OMP_NUM_THREADS=1), e.g.
#   scripts/bench/trainer_variants.sh 'default=' 'own_diffs=--share_diffs=0' -- \
#     --solver=models/resnet50/solver.prototxt --stage=synthetic --precision=fp16 \
#     --gpu=0 --batch_size=256 --iterations=20 --warmup=5
#
# Environment: TRAINER (build/tools/trainer), REPEATS (2), LOG_DIR (a
# temporary folder, kept and printed).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/lib.sh
TRAINER=${TRAINER:-build/tools/trainer}
REPEATS=${REPEATS:-2}
variants=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do variants+=("$1"); shift; done
[ "${1:-}" = "--" ] || { echo "trainer_variants: usage: $0 'NAME=SETTING,...' ... -- TRAINER_TIME_ARGS" >&2; exit 1; }
shift
[ ${#variants[@]} -gt 0 ] || { echo "trainer_variants: no variants" >&2; exit 1; }
[ -x "$TRAINER" ] || { echo "trainer_variants: $TRAINER not found" >&2; exit 1; }
LOG_DIR=${LOG_DIR:-$(mktemp -d)}
mkdir -p "$LOG_DIR"

declare -A ips=() loop=() mem=()
for r in $(seq "$REPEATS"); do
  for v in "${variants[@]}"; do
    name=${v%%=*}
    settings=${v#*=}
    envs=() flags=() all=()
    [ -n "$settings" ] && IFS=, read -r -a all <<<"$settings"
    for setting in ${all[@]+"${all[@]}"}; do
      case "$setting" in --*) flags+=("$setting") ;; *) envs+=("$setting") ;; esac
    done
    log=$LOG_DIR/${name}_$r.log
    if env ${envs[@]+"${envs[@]}"} "$TRAINER" time "$@" ${flags[@]+"${flags[@]}"} >"$log" 2>&1; then
      line=$(grep '^time:' "$log" | tail -1)
      ips[$name]+="$(kv images_per_s "$line") "
      loop[$name]+="$(kv loop_images_per_s "$line") "
      mem[$name]+="$(kv peak_mem_mib "$line") "
      echo "trainer_variants: round $r $name: $(kv images_per_s "$line") images/s (training loop $(kv loop_images_per_s "$line")), peak $(kv peak_mem_mib "$line") MiB"
    else
      echo "trainer_variants: round $r $name FAILED: $(grep -m1 -iE 'error|out of memory' "$log" | cut -c1-200) (log: $log)"
    fi
  done
done

first="" first_loop=""
echo "trainer_variants: medians over $REPEATS rounds (logs: $LOG_DIR)"
for v in "${variants[@]}"; do
  name=${v%%=*}
  i=$(echo "${ips[$name]:-}" | tr ' ' '\n' | grep . | median %.1f || true)
  l=$(echo "${loop[$name]:-}" | tr ' ' '\n' | grep . | median %.1f || true)
  m=$(echo "${mem[$name]:-}" | tr ' ' '\n' | grep . | median %.0f || true)
  [ -z "$first" ] && first=$i && first_loop=$l
  ratio=$(awk -v a="$i" -v b="$first" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f", a / b; else print "n/a" }')
  lratio=$(awk -v a="$l" -v b="$first_loop" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f", a / b; else print "n/a" }')
  printf 'trainer_variants: %-24s images_per_s=%s loop_images_per_s=%s peak_mem_mib=%s ratio_to_first=%s loop_ratio_to_first=%s  [%s]\n' \
    "$name" "${i:-n/a}" "${l:-n/a}" "${m:-n/a}" "$ratio" "$lratio" "${v#*=}"
done
