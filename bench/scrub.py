"""The scrub's cost on a hostile 1 MB body (docs/ARCHITECTURE.md §3 rule 8): CPU seconds of one
`scrub` over each unit repeated to 1,000,000 characters, ASCII shapes and the characters the
normalised view reads (`ingest/rules/scrub_view.py`).

    python -m bench.scrub [--chars 1000000]
"""

from __future__ import annotations

import argparse
import time

from ingest.rules.scrub import scrub

UNITS = {
    "password: (ASCII, every unit a finding)": "password: hunter2 ",
    "mot de passe / Passwort / 密码": "mot de passe Passwort: 密码：",
    "full-width password= (every unit a finding)": "ｐａｓｓｗｏｒｄ＝ｈｕｎｔｅｒ２ ",
    "zero-width space": "\u200b",
    "soft hyphen and no-break space in a key": "pass\u00adword\u00a0",
    "Cyrillic look-alike in a key, a finding": "p\u0430ssword: hunter2 ",
    "CJK": "東京",
    "Latin with accents": "Größe ändern ",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=1_000_000)
    args = parser.parse_args()
    for name, unit in UNITS.items():
        text = unit * (args.chars // len(unit))
        start = time.process_time()
        scrub(text)
        print(f"{time.process_time() - start:6.2f} s  {name}")


if __name__ == "__main__":
    main()
