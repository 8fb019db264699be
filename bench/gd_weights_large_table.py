"""The tables of ``bench/results/import_trained/gd_weights_large.md``, from the JSON files that
``bench/bench_learned_targets.py`` wrote (``gd --weights`` rows at 256x64 and 512x128):

    python bench/gd_weights_large_table.py bench/results/import_trained/gd_weights_large_256x64.json \\
        [bench/results/import_trained/gd_weights_large_512x128.json ...]

One table per file: each row as measured (verdict, the seconds until the ``proof:`` line (and the CPU
seconds by then, where the bench recorded them), until gd's ``verdict:`` line, wall, CPU, peak RSS, the
1-minute load average at the row's start where recorded, the target and whether it is met), a refused row's whole message
(the last line of its output); where a file has rows of two
trees (``--baseline-commit C --baseline-all``), a line per file kind with the baseline / committed ratios
of the ``proof:`` line's seconds, the wall and CPU seconds and the peak RSS.
"""
from __future__ import annotations

import json
import sys


def _num(x, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def table(path: str) -> str:
    data = json.loads(open(path).read())
    out = [f"`{path}`: `{data['command']}` (timeout {data['timeout_s']:g} s, address-space cap "
           f"{data['memory_cap_gib']:g} GiB, {data['cores']} cores)", "",
           "| size | file | command | verdict | proof: at s | proof: CPU s | verdict: at s | wall s | CPU s | peak RSS MiB "
           "| load at start | target | met |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    pairs: dict[str, dict[str, dict]] = {}
    for r in data["rows"]:
        met = "-" if r["met"] is None else "yes" if r["met"] else "NO"
        load = r.get("load_at_start", (r.get("load_average_at_start") or [None])[0])
        out.append(f"| {r['size']} | {r['file']} | {r['run']} | {r['verdict']} | {_num(r['proof_line_s'])} | "
                   f"{_num(r.get('proof_line_cpu_s'))} | {_num(r['verdict_line_s'])} | {_num(r['wall_s'])} | "
                   f"{_num(r['cpu_s'])} | {_num(r['peak_rss_mib'], 0)} | {_num(load, 2)} | {r['target'] or '-'} | {met} |")
        run = r["run"]
        if ", committed tree" in run or ", baseline (" in run:
            which = "new" if run.endswith("committed tree") else "old"
            pairs.setdefault(f"{r['size']} {r['file']}", {})[which] = r
    lines = [f"- {r['size']} {r['file']}: {r['verdict'].split(':')[0]}: "
             f"{(r.get('tail') or '').strip().splitlines()[-1]}"
             for r in data["rows"] if r["verdict"].startswith("exit") and (r.get("tail") or "").strip()]
    for name, both in pairs.items():
        if set(both) != {"new", "old"}:
            continue
        new, old = both["new"], both["old"]
        parts = []
        for key, label in (("proof_line_s", "proof: line"), ("wall_s", "wall"), ("cpu_s", "CPU"),
                           ("peak_rss_mib", "peak RSS")):
            if new.get(key) and old.get(key):
                parts.append(f"{label} {old[key] / new[key]:.2f}x")
        lines.append(f"- {name}: baseline / committed: " + ", ".join(parts))
    if lines:
        out += ["", *lines]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    print("\n\n".join(table(p) for p in argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
