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
