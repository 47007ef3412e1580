"""Logging for the CLI and the service: readable text on a terminal, JSON lines for a journal.

JSON lines (`--log-format json`) carry `ts`, `level`, `logger`, `message` and any `extra=`
fields a call site gives, so a log shipper can index refusals by room and reason. Where a call
site gives none, the fields are read off the message's own arguments (`fields_of`): the first
room id (`room_id`), event id (`event_id`), and a number logged as `… ms` (`ms`). No secret is
ever passed to a log call (tests/bot/service/test_metrics.py greps the service's debug log for
the tokens).
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = set(vars(logging.LogRecord("x", 0, "x", 0, "x", None, None))) | {"message", "asctime"}


# A %-placeholder of a log format (`%s`, `%.0f`, `%(name)s`), and whether ` ms` follows it.
_PLACEHOLDER = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\d+|\*)?(?:\.\d+)?[diouxXeEfFgGcrsa%]")


# `!opaque:server`, or a v12 `!` + 43 characters (no server); never a `!command` word.
_ROOM_ID = re.compile(r"![^\s:]+:\S+|![A-Za-z0-9_\-]{43}")
_EVENT_ID = re.compile(r"\$[^\s]+")  # v3+ event ids carry no server


def fields_of(msg: object, args: object) -> dict[str, Any]:
    """`room_id`, `event_id` and `ms` from a log call's own arguments, where they are."""
    if not isinstance(msg, str) or not isinstance(args, tuple) or not args:
        return {}
    found: dict[str, Any] = {}
    values = iter(args)
    for match in _PLACEHOLDER.finditer(msg):
        if match.group().endswith("%") and match.group() != "%":
            continue  # `%%`: no argument
        value = next(values, None)
        if isinstance(value, str) and _ROOM_ID.fullmatch(value):
            found.setdefault("room_id", value)
        elif isinstance(value, str) and _EVENT_ID.fullmatch(value):
            found.setdefault("event_id", value)
        elif isinstance(value, int | float) and msg.startswith(" ms", match.end()):
            found.setdefault("ms", value)
    return found


class JsonFormatter(logging.Formatter):
    """One JSON object a line."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        doc.update(fields_of(record.msg, record.args))
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                doc[key] = value  # a call site's own `extra=` wins
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False, default=str)


def setup_logging(*, verbose: bool, fmt: str) -> None:
    """Configure the root logger once, on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
