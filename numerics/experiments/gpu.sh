#!/usr/bin/env bash
# numerics/experiments/gpu.sh: the experiments' GPU grids in one timed run (issue 30, item 6).
#
#   bash numerics/experiments/gpu.sh [--device cuda|cuda:N] [--out DIR] [--budget SECONDS]
#   bash numerics/experiments/gpu.sh --device cpu --quick [--out DIR]      (the CI smoke test)
#
# Runs, at the same time on one card, from the repository root:
#   * seed003-mqar --grid gpu: MQAR at the paper's widths d = 64..512 and N = 64, 128 (Zoology
#     App. F.1: vocabulary 8,192, alpha = 0.1; App. E.2: 100,000 training and 3,000 test examples, at
#     most 64 epochs), attention and BaseConv (the reference code's two-layer models), one seed, the
#     paper's largest learning rate (1e-2) only (GPU in seed003_mqar.py says why);
#   * seed000-table7 --grid gpu: k = 1..4 with the paper's recipe at the paper's batch 1024 and lr 1e-2
#     (seed 000 App. C.3), k = 1, 2 with StepLR Adam at the same batch.
# Both share one global budget (--budget, default 420 s): every cell takes its share of the time left,
# measures its step time, runs the steps that fit, and its record is written (atomically) as soon as it
# finishes; the summaries are written after the last cell.  The whole script ends within about
# budget + 60 s (imports, cluster start, summaries); a hard stop (SIGINT) at budget + 120 s keeps the
# finished cells (rerunning the same command resumes from them).
#
# Results: DIR/seed003-mqar/ and DIR/seed000-table7/ (default DIR = docs/experiments/gpu, beside the CPU
# results under docs/experiments/<NAME>/), each summary.json marked with the card
# (torch.cuda.get_device_name) under "device"; DIR/<NAME>.log holds each command's output.
#
# --device cpu is accepted only with --quick: tiny sizes through the same code path (the CI smoke test,
# tests/numerics/experiments/test_gpu_script.py); the full GPU grid on a CPU would take days.
# Environment: PYTHON (default python), MQAR_WORKERS (default 16; 1 with --quick), TABLE7_WORKERS
# (default 6; 1 with --quick): worker processes sharing the card.
# Exit status: 0 both grids finished with every cell; 2 bad arguments (one "error:" line, nothing run);
# otherwise the larger of the two commands' statuses (10 + F: F cells failed or not started).
set -u

DEVICE=cuda
OUT=docs/experiments/gpu
BUDGET=420
QUICK=0

die() { echo "error: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --device) [ $# -ge 2 ] || die "--device needs a value (cuda, cuda:N or cpu)"; DEVICE=$2; shift 2 ;;
    --device=*) DEVICE=${1#--device=}; shift ;;
    --out) [ $# -ge 2 ] || die "--out needs a folder"; OUT=$2; shift 2 ;;
    --out=*) OUT=${1#--out=}; shift ;;
    --budget) [ $# -ge 2 ] || die "--budget needs a number of seconds"; BUDGET=$2; shift 2 ;;
    --budget=*) BUDGET=${1#--budget=}; shift ;;
    --quick) QUICK=1; shift ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//; /^set -u/d'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

case "$DEVICE" in
  cuda|cuda:[0-9]|cuda:[0-9][0-9]) ;;
  cpu) [ "$QUICK" = 1 ] || die "--device cpu runs only the --quick smoke test (the GPU grid on a CPU would take days)" ;;
  *) die "--device must be cuda, cuda:N or cpu, got '$DEVICE'" ;;
esac
case "$BUDGET" in
  ''|*[!0-9]*) die "--budget must be a whole number of seconds, got '$BUDGET'" ;;
esac
[ "$BUDGET" -ge 30 ] && [ "$BUDGET" -le 3600 ] || die "--budget must be in [30, 3600] seconds, got $BUDGET"
[ -n "$OUT" ] || die "--out must name a folder"

cd "$(dirname "$0")/../.." || die "cannot find the repository root from $0"
PY=${PYTHON:-python}
if [ "$QUICK" = 1 ]; then
  MQ_W=${MQAR_WORKERS:-1}; T7_W=${TABLE7_WORKERS:-1}; QFLAG=--quick
else
  MQ_W=${MQAR_WORKERS:-16}; T7_W=${TABLE7_WORKERS:-6}; QFLAG=
fi
for w in "$MQ_W" "$T7_W"; do
  case "$w" in ''|*[!0-9]*|0) die "MQAR_WORKERS and TABLE7_WORKERS must be whole numbers >= 1, got '$w'" ;; esac
done
"$PY" -c "import numerics.experiments" 2>/dev/null || die "$PY cannot import numerics.experiments (run from a checkout with its environment)"
if [ "$DEVICE" != cpu ]; then
  "$PY" -c "from numerics.experiments.common import check_device as c; c('$DEVICE')" 2>/tmp/gpu_sh_check.$$ \
    || { msg=$(tail -n 1 /tmp/gpu_sh_check.$$); rm -f /tmp/gpu_sh_check.$$; die "${msg#ValueError: }"; }
  rm -f /tmp/gpu_sh_check.$$
fi
mkdir -p "$OUT" || die "cannot create --out $OUT"

HARD=$((BUDGET + 120))
t0=$(date +%s)
echo "gpu.sh: device $DEVICE, budget $BUDGET s (hard stop at $HARD s), out $OUT, workers mqar $MQ_W / table7 $T7_W${QFLAG:+, --quick}"

run() {  # NAME WORKERS
  timeout -s INT -k 20 "$HARD" "$PY" -m numerics.experiments "$1" --grid gpu --device "$DEVICE" \
    --budget "$BUDGET" --workers "$2" --out "$OUT/$1" --no-progress $QFLAG >"$OUT/$1.log" 2>&1
}
run seed003-mqar "$MQ_W" & p1=$!
run seed000-table7 "$T7_W" & p2=$!
wait $p1; rc1=$?
wait $p2; rc2=$?
t1=$(date +%s)

for n in seed003-mqar seed000-table7; do
  echo "---- $n (tail of $OUT/$n.log)"
  tail -n 8 "$OUT/$n.log"
done
"$PY" - "$OUT" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for name in ("seed003-mqar", "seed000-table7"):
    p = out / name / "summary.json"
    if not p.is_file():
        print(f"{name}: no summary.json (see {out / (name + '.log')})")
        continue
    s = json.loads(p.read_text())
    dev = s.get("device") or {}
    print(f"{name}: {s['run']['cells']} cells, {s['run']['failed']} failed, wall {s['run']['wall_s']:.0f} s on "
          f"{dev.get('name') or dev.get('device')}")
    if name == "seed003-mqar":
        for key, b in sorted(s["best"].items(), key=lambda kv: (kv[1]["N"], kv[1]["mixer"], kv[1]["d"])):
            print(f"  {b['mixer']:<9} N={b['N']:<4} d={b['d']:<4} best acc {b['acc']:.3f} (lr {b['lr']:.2g}, "
                  f"{b['steps_run']} steps)")
    else:
        for key, r in sorted(s["runs"].items()):
            print(f"  {key:<14} {r['steps']} steps, batch {r.get('batch')}, final test MSE {r['final_test_mse']:.3g}")
EOF
echo "gpu.sh: done in $((t1 - t0)) s; exit statuses seed003-mqar $rc1, seed000-table7 $rc2"
[ $rc1 -ge $rc2 ] && exit $rc1 || exit $rc2
