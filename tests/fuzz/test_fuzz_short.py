"""The short fuzz run of `make test`: both targets of every API (tests/fuzz/run.py), a few
dozen inputs each. The long run is `make fuzz` (a million inputs; docs/reliability.md)."""

from __future__ import annotations

from tests.fuzz.run import fuzz, slots_for, summary

INPUTS_PER_TARGET = 60


def test_every_decoder_and_handler_survives_its_inputs() -> None:
    slots = slots_for(None, ("decoder", "handler"))
    report = fuzz(INPUTS_PER_TARGET * len(slots))
    text = summary(report)
    tallies = [t for targets in report.values() for t in targets.values()]
    assert len(tallies) == len(slots)
    assert all(t.inputs == INPUTS_PER_TARGET for t in tallies), text
    assert all(t.clean for t in tallies), text
    # Not vacuous: requests of every served API reached their handler and were answered.
    handled = [t for targets in report.values() for name, t in targets.items() if name == "handler"]
    assert all(sum(t.outcomes.values()) == t.inputs for t in handled), text
