# Helpers the benchmark scripts share (sourced, not run).

# kv KEY LINE: the value of KEY in a line of key=value pairs (trainer time's
# "time: ..." line, the scripts' own summary lines).
kv() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | tail -1; }

# median [FORMAT]: the median of the numbers on standard input ("nan" when
# there are none); an even count prints the mean of the middle two with
# FORMAT (default %.4f).
median() {
  sort -g | awk -v fmt="${1:-%.4f}" '{ v[NR] = $1 }
    END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else printf fmt "\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ratio A B: A / B with two decimals (a speed ratio from two times: ratio
# peer_ms ours_ms is above 1 when ours is faster).
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# trainer_time SCRIPT LOG BIN DOT ARGS...: runs `BIN time ARGS...`, with
# --cpu_bf16_dot=0 where DOT is 0 (BF16 GEMM operands widened to float; 1,
# the default, passes no flag, so that an earlier build runs as well), its
# output in LOG, and prints total_ms_median; on failure it prints the log's
# tail and exits (call it as ms=$(trainer_time ...) || exit 1).
trainer_time() {
  local script=$1 log=$2 bin=$3 dot=$4 out
  shift 4
  local -a widen=()
  [ "$dot" = 0 ] && widen=(--cpu_bf16_dot=0)
  if ! "$bin" time "$@" ${widen[@]+"${widen[@]}"} >"$log" 2>&1 || ! out=$(grep '^time:' "$log"); then
    tail -20 "$log" >&2
    echo "$script: trainer time failed for $*" >&2
    exit 1
  fi
  kv total_ms_median "$out"
}

# cortado_ratios: from the medians in med[], prints the speed of the BF16
# kernel against cortado_bf16_widen (BF16_GEMMS: the trainer's log line
# naming the path) and, with BASELINE_TRAINER set, of cortado_fp32 against
# baseline_fp32; appends both to $summary.
cortado_ratios() {
  local rw rb
  rw=$(ratio "${med[cortado_bf16_widen]}" "${med[cortado_bf16]}")
  echo "  Cortado BF16 / BF16 widened to float (--cpu_bf16_dot=0) speed: $rw (${BF16_GEMMS:-})"
  summary+=" bf16_dot_ratio=$rw"
  if [ -n "${BASELINE_TRAINER:-}" ]; then
    rb=$(ratio "${med[baseline_fp32]}" "${med[cortado_fp32]}")
    echo "  Cortado FP32 / baseline FP32 speed: $rb ($BASELINE_TRAINER)"
    summary+=" baseline_ratio=$rb"
  fi
}
