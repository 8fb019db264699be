"""bench/_timed.py, the timed runner bench_refute.py and bench_learned_targets.py share: the seconds and CPU
seconds at the marked lines, the exit status, the timeout (the command's whole process group killed), the
memory cap; and each script's own fields made from it."""
import sys

CMD = [sys.executable, "-c", "import time; print('start', flush=True); sum(i * i for i in range(3_000_000)); "
                             "print('proof: FAILED', flush=True); time.sleep(0.2); print('verdict: FAILED', flush=True); "
                             "time.sleep(1); raise SystemExit(1)"]
# (the sleeps keep the process alive while the runner reads its CPU seconds from /proc at each marked line: on a
# loaded machine the reader may reach a line late, and a process already gone has no CPU seconds to read)


def test_the_runner_marks_lines_and_stops_at_the_timeout(load_bench):
    t = load_bench("_timed.py")
    r = t.run(CMD, t.cap(8), 60, marks=("proof:", "verdict:"))
    assert r["rc"] == 1 and not r["timed_out"] and "start" in r["out"]
    assert 0 < r["at"]["proof:"] < r["at"]["verdict:"] <= r["wall_s"]
    assert 0 < r["cpu_at"]["proof:"] <= r["ru"].ru_utime + r["ru"].ru_stime + 0.05
    slow = t.run([sys.executable, "-c", "import time; time.sleep(30)"], t.cap(8), 1)
    assert slow["timed_out"] and slow["wall_s"] < 20 and slow["rc"] != 0
    capped = t.run([sys.executable, "-c", "x = bytearray(3 * 2**30)"], t.cap(1), 60)
    assert capped["rc"] != 0 and "MemoryError" in capped["out"]


def test_both_scripts_report_through_it(load_bench):
    refute, learned = load_bench("bench_refute.py"), load_bench("bench_learned_targets.py")
    a = refute.run(CMD, refute._cap(8), 60)
    assert a["rc"] == 1 and 0 < a["verdict_s"] <= a["wall_s"] and "proof: FAILED" in a["out"]
    b = learned.run(CMD, learned._cap(8), 60)
    assert b["rc"] == 1 and 0 < b["proof_s"] < b["verdict_s"] and 0 < b["proof_cpu_s"] <= b["verdict_cpu_s"]
    assert b["cpu_s"] > 0 and b["rss_mib"] > 0
