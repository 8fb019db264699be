"""Every entry of the one registry proves at its default sizes through the CLI
(``python -m verify.construct NAME --json FILE``), in-process."""
from __future__ import annotations

import io
import json

import pytest

from constructions.base import Construction
from constructions.catalogue import entries, gd_architectures
from verify.construct import main


@pytest.mark.parametrize("name", sorted(entries()))
def test_every_entry_proves_by_default(tmp_path, name):
    path = tmp_path / "r.json"
    out = io.StringIO()
    assert main([name, "--json", str(path)], out=out) == 0, out.getvalue()
    rep = json.loads(path.read_text())
    assert rep["command"] == name and rep["proof"]["ok"] is True and rep["proof"]["failure"] is None
    # a certified witness (seed 000 Thm. D.31) is WITNESSED, never PROVED; everything else is PROVED
    witness = rep["proof"].get("witness") is not None
    assert ("check: WITNESSED" if witness else "proof: PROVED") in out.getvalue()
    assert rep["verdict"] == ("witnessed" if witness else "proved")
    e = entries()[name]
    built = e.build(**e.sizes)
    assert rep["built"]["kind"] == ("construction" if isinstance(built, Construction) else "identity")


def test_gd_architectures_are_registry_entries():
    gd = gd_architectures()
    assert list(gd) == ["baseconv", "baseconv-causal", "lsa", "elsa", "compiled-baseconv", "compiled-baseconv-causal",
                        "compiled-elsa", "compiled-lsa", "token-lsa"]
    assert all(entries()[e.name] is e and e.depth and e.state for e in gd.values())
