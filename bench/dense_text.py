"""The embedded text's line format as a benchmark flag (`--dense-text`), issue 14 item 3.

The lexical vector, the payload's messages and the window boundaries always read whole lines
(`ingest.chunker.FULL_LINE`); only the text MiniLM embeds varies.
"""

from __future__ import annotations

import argparse

from ingest.chunker import DENSE_LINE, LineFormat

DENSE_TEXTS: dict[str, LineFormat] = {
    "full": LineFormat(date=True, label="name"),  # `[2026-11-01 16:34] Alice Smith: body`
    "no-date": LineFormat(date=False, label="name"),  # `Alice Smith: body`
    "short-label": LineFormat(date=True, label="short"),  # `[2026-11-01 16:34] Alice: body`
    "no-date-short-label": LineFormat(date=False, label="short"),  # `Alice: body`
    "no-date-no-label": LineFormat(date=False, label="none"),  # `body` (a lower bound)
}

PRODUCT = next(name for name, fmt in DENSE_TEXTS.items() if fmt == DENSE_LINE)


def add_flag(parser: argparse.ArgumentParser) -> None:
    """`--dense-text NAME`, default: the product's."""
    parser.add_argument(
        "--dense-text",
        choices=sorted(DENSE_TEXTS),
        default=PRODUCT,
        help=f"the embedded text's line format (default {PRODUCT}: the product's)",
    )
