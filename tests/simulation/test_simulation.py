"""Hundreds of seeded whole-cluster simulations, each checking every invariant after every
step (see invariants.py) and ending with a converged, identical cluster.

A failing seed prints its replay command: `python -m tests.simulation.replay --seed N`.
Bugs it found are pinned as scenario tests in test_scenarios.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.simulation.cluster import run_seed

SEEDS = range(300)


@pytest.mark.parametrize("seed", SEEDS)
def test_seed(seed: int, tmp_path: Path) -> None:
    report = run_seed(seed, tmp_path)
    assert report.steps > 0
