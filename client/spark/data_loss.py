"""Data loss: what the source does when offsets a query needs are gone.

Kept light (no pyarrow, no structlog at import): Spark's streaming source runner imports the
source in a fresh Python process before every query starts, and waits for it.
"""

from __future__ import annotations

__all__ = ["DataLossError", "report_data_loss"]


class DataLossError(RuntimeError):
    """Records the query needs are gone (failOnDataLoss=true)."""


def report_data_loss(fail_on_data_loss: bool, message: str) -> None:
    """Raise (failOnDataLoss=true) or log a warning: Spark's Kafka source does the same."""
    if fail_on_data_loss:
        raise DataLossError(
            f"{message}. Some data may have been lost because they are not available any "
            "more: deleted by retention or truncated away by an unclean leader election. If "
            "you want the query to go on, set the source option 'failOnDataLoss' to 'false'."
        )
    import structlog  # only when there is something to say

    structlog.get_logger(__name__).warning("data_loss", detail=message)
