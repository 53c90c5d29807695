"""The ``pt`` partition value: the batch's flush time in UTC, formatted per ``partition_window``."""

from __future__ import annotations

from datetime import datetime, timezone

PT_FORMATS: dict[str, str] = {"day": "%m-%d-%Y", "hour": "%m-%d-%Y %H", "minute": "%m-%d-%Y %H:%M"}


def pt_value(window: str, flush_time: datetime) -> str | None:
    """``pt`` for a flush time: ``MM-dd-yyyy``, ``MM-dd-yyyy HH`` or ``MM-dd-yyyy HH:mm`` in UTC.

    Args:
        window: ``day``, ``hour``, ``minute`` or ``none``.
        flush_time: when the batch is flushed; a naive datetime is taken to be UTC.

    Returns:
        The formatted value, or None for window ``none`` (the table has no ``pt`` column).

    Raises:
        ValueError: an unknown window.
    """
    if window == "none":
        return None
    if window not in PT_FORMATS:
        raise ValueError(f"partition_window {window!r}; expected one of day, hour, minute, none")
    utc = flush_time.replace(tzinfo=timezone.utc) if flush_time.tzinfo is None else flush_time.astimezone(timezone.utc)
    return utc.strftime(PT_FORMATS[window])
