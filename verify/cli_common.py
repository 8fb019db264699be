"""Pieces shared by the command-line tools."""
from __future__ import annotations

from polyverify.cli import UsageError  # noqa: F401  (re-exported: one UsageError everywhere)

from .proof import ProofResult


def print_proof(res: ProofResult, out) -> None:
    status = "PROVED" if res.ok else "FAILED"
    sym = f" (symbolic in {', '.join(res.symbolic_params)})" if res.symbolic_params else ""
    print(f"proof: {status} in {res.seconds:.3f} s{sym}; {res.entries_checked} state entries checked; "
          f"sections {', '.join(k + '=' + ('ok' if v else 'FAIL') for k, v in res.sections.items())}; "
          f"exact arithmetic: {res.backend}"
          + (f", {res.ring.split(' (')[0]} ring" if res.ring != "full" else ""), file=out)
    if res.failure:
        print("  " + res.failure.describe().replace("\n", "\n  "), file=out)




def markdown_table(header: list[str], rows) -> list[str]:
    """A markdown table's lines; cells escaped (``|``) and kept on one line."""
    def cell(x) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows])
