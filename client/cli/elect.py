"""`highwater elect-leaders`: preferred or unclean leader elections on demand (the Admin).

Kafka's kafka-leader-election.sh: `--election-type preferred|unclean` and either one
partition (`--topic T --partition P`) or `--all-topic-partitions`. One line per partition says
what happened; an unclean election first prints a warning, as it may lose acked records.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from client.admin import Admin, ElectionResult
from client.cli.common import admin_settings, bootstrap_option, fail, run_client
from client.cli.refusals import Need, administering
from client.cli.topic_args import one_topic, optional_topic
from protocol.errors import ErrorCode
from protocol.messages.elect_leaders import ElectionType

__all__ = ["elect_leaders", "election_lines"]

ADMIN_TIMEOUT_S = 60.0
UNCLEAN_WARNING = (
    "WARNING: an unclean election makes a replica that may lack acknowledged records the "
    "leader; those records are lost."
)
_OUTCOMES = {
    ErrorCode.NONE: "elected",
    ErrorCode.ELECTION_NOT_NEEDED: "already elected (no election needed)",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: (
        "not elected: the preferred replica is not live or not in the ISR"
    ),
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "not elected: no live replica is eligible",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "not elected: unknown topic or partition",
}


def election_lines(election_type: ElectionType, results: Sequence[ElectionResult]) -> list[str]:
    """One line per partition: `topic-partition: outcome`."""
    lines = []
    for r in results:
        outcome = _OUTCOMES.get(r.error_code, f"not elected: {r.error_code.name}")
        if r.error_code == ErrorCode.ELECTION_NOT_NEEDED:
            if election_type == ElectionType.PREFERRED:
                outcome = "already led by the preferred replica"
            else:
                outcome = "has a live leader (no election needed)"
        lines.append(f"{r.topic}-{r.partition}: {outcome}")
    return lines


@click.command("elect-leaders")
@bootstrap_option
@click.option(
    "--election-type",
    type=click.Choice(["preferred", "unclean"]),
    required=True,
    help="preferred: move leadership back to each partition's first replica if it is live and "
    "in the ISR. unclean: elect any live replica of a leaderless partition (may lose data).",
)
@one_topic()
@click.option(
    "-p", "--partition", type=click.IntRange(min=0), help="The partition (with the topic)."
)
@click.option("--all-topic-partitions", is_flag=True, help="Every partition of every topic.")
def elect_leaders(
    bootstrap: str,
    election_type: str,
    topic: str | None,
    topic_option: str | None,
    partition: int | None,
    all_topic_partitions: bool,
) -> None:
    """Elect leaders now (Kafka's kafka-leader-election).

    For TOPIC's partition --partition, or --all-topic-partitions."""
    topic = optional_topic(topic, topic_option)
    if all_topic_partitions == (topic is not None or partition is not None):
        fail("give either --topic T --partition P or --all-topic-partitions", exit_code=2)
    if not all_topic_partitions and (topic is None or partition is None):
        fail("--topic and --partition go together", exit_code=2)
    kind = ElectionType.PREFERRED if election_type == "preferred" else ElectionType.UNCLEAN
    if kind == ElectionType.UNCLEAN:
        click.echo(UNCLEAN_WARNING, err=True)
    wanted = None if all_topic_partitions else [(str(topic), int(partition or 0))]

    async def elect() -> list[ElectionResult]:
        async with Admin(bootstrap, **admin_settings()) as admin:
            return await admin.elect_leaders(kind, wanted)

    attempt = administering(Need("ALTER", "cluster"))  # ElectLeaders: ALTER on the cluster
    results = run_client(bootstrap, elect, timeout_s=ADMIN_TIMEOUT_S, attempt=attempt)
    for line in election_lines(kind, results):
        click.echo(line)
    failed = [
        r for r in results if r.error_code not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)
    ]
    if failed and not all_topic_partitions:
        raise SystemExit(1)
