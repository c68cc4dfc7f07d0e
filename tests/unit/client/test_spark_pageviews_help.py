"""`python -m client.spark.pageviews --help`: the example commands one per line."""

from __future__ import annotations

import pytest

from client.spark import pageviews


def test_help_prints_each_example_command_on_its_own_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        pageviews.main(["--help"])
    assert exit_info.value.code == 0
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    assert (
        "python -m client.spark.pageviews produce --count 20000      # page views into "
        "`pageviews`" in lines
    )
    assert "python -m client.spark.pageviews run --available-now        # the Spark job" in lines
    assert "highwater consume pageview-counts --from-beginning --exit-at-end" in lines
