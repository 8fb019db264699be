"""``python -m verify.errata``: every known erratum, checked by the verifier.

For each registered :class:`constructions.catalogue.Erratum` the as-printed
form must be *rejected* (with a counterexample) and the corrected form must
be proved.  ``--markdown FILE`` writes the errata table (paper, location,
as printed, correction, the counterexample the verifier produced); the table
in ``docs/errata.md`` is generated this way, never typed by hand.
Exit 0 when every erratum behaves as documented, 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from constructions.catalogue import check, errata


def run_all() -> list[dict]:
    rows = []
    for eid, e in errata().items():
        bad = check(e.as_printed_check())
        good = check(e.corrected_check())
        ce = bad.failure.counterexample if bad.failure else None
        rows.append({
            "id": eid, "paper": e.paper, "location": e.location, "as_printed": e.as_printed,
            "correction": e.correction, "as_printed_rejected": not bad.ok, "corrected_proved": good.ok,
            "failure": bad.failure.describe() if bad.failure else None,
            "residual": bad.failure.residual if bad.failure else None,
            "counterexample": None if ce is None else
            {"assignment": ce.assignment, "as_printed_gives": ce.got, "should_be": ce.expected},
            "seconds": bad.seconds + good.seconds,
        })
    return rows


def _cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def markdown(rows: list[dict]) -> str:
    lines = ["| id | paper | location | as printed | correction | counterexample found by the verifier | status |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        ce = r["counterexample"]
        if ce:
            asg = ", ".join(f"{k}={v}" for k, v in ce["assignment"].items()) or "all variables 0"
            cell = f"{asg} (others 0): as printed gives {ce['as_printed_gives']}, should be {ce['should_be']}"
        else:
            cell = "(none: as-printed form was not rejected)"
        ok = r["as_printed_rejected"] and r["corrected_proved"]
        status = "rejected as printed, corrected form proved" if ok else (
            f"UNEXPECTED: as printed rejected={r['as_printed_rejected']}, corrected proved={r['corrected_proved']}")
        lines.append("| " + " | ".join(_cell(x) for x in (r["id"], r["paper"], r["location"], r["as_printed"],
                                                            r["correction"], cell, status)) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m verify.errata", description=__doc__.splitlines()[0])
    p.add_argument("--markdown", help="write the errata table (markdown) to this file")
    p.add_argument("--json", help="write the full results as JSON")
    a = p.parse_args(argv)
    rows = run_all()
    for r in rows:
        ok = r["as_printed_rejected"] and r["corrected_proved"]
        print(f"{'ok ' if ok else 'BAD'} {r['id']}: {r['paper']} {r['location']}")
        if r["failure"]:
            print("    as printed: " + r["failure"].replace("\n", "\n    "))
    if a.markdown:
        Path(a.markdown).write_text(markdown(rows))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["as_printed_rejected"] and r["corrected_proved"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
