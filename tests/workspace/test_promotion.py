"""The promotion workflow smoke-runs staging after deploying it, and prod waits for that."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def test_prod_needs_a_passing_staging_smoke_run_of_the_same_commit():
    promote = yaml.safe_load((REPO / ".github/workflows/promote.yml").read_text())
    staging, prod = promote["jobs"]["staging"], promote["jobs"]["prod"]
    runs = [step.get("run", "") for step in staging["steps"]]
    deploy = next(i for i, r in enumerate(runs) if "bundle deploy --target staging" in r)
    smoke = next(i for i, r in enumerate(runs) if "kafka-iceberg workspace smoke --target staging" in r)

    assert smoke > deploy
    assert not staging["steps"][smoke].get("continue-on-error")
    assert "refs/tags/v" in staging["if"]  # a release tag deploys and smoke-runs staging first
    assert "staging" in prod["needs"]  # so approval of prod is only asked after a green smoke run
    assert prod["environment"] == "prod"
