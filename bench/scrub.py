"""The scrub on hostile input and on ordinary chat (docs/ARCHITECTURE.md §3 rule 8).

Cost: CPU seconds of one `scrub` over each unit repeated to 1,000,000 characters, ASCII shapes
and the characters the normalised view reads (`ingest/rules/scrub_view.py`).

    python -m bench.scrub [--chars 1000000]

False positives: every line of the development sets and the IRC logs (`locomo-dev`,
`molweni-dev`: each turn's text; `irc-ubuntu`: each `[HH:MM] <nick> text` line of `train` and
`dev`) through `scrub`; prints each line it changes (set, kinds found, the line) and the counts.
`--out` keeps the changed lines as JSON; `--against` an earlier such file prints only the lines
whose scrubbed text differs from it (what a rule change adds or takes back).

    python -m bench.scrub --lines ../shared/data [--out FILE] [--against FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

from bench.harness.locomo import load
from ingest.rules.scrub import scrub, scrub_findings

UNITS = {
    "password: (ASCII, every unit a finding)": "password: hunter2 ",
    "mot de passe / Passwort / 密码": "mot de passe Passwort: 密码：",
    "full-width password= (every unit a finding)": "ｐａｓｓｗｏｒｄ＝ｈｕｎｔｅｒ２ ",
    "zero-width space": "\u200b",
    "soft hyphen and no-break space in a key": "pass\u00adword\u00a0",
    "Cyrillic look-alike in a key, a finding": "p\u0430ssword: hunter2 ",
    "prose: the password is (every unit a finding)": "the password is hunter2 ",
    "prose: talk about a password": "the password is wrong again ",
    "base64 runs": "QUFBQUFBQUFBQUFBQUFBQUFBQUFB ",
    "CJK": "東京",
    "Latin with accents": "Größe ändern ",
}

_IRC_LINE = re.compile(r"^\[\d\d:\d\d\] <[^>]+> (.*)$")


def lines(data: Path) -> Iterator[tuple[str, str]]:
    """(set, text) for every message of the three sets under `data`."""
    for name in ("locomo-dev", "molweni-dev"):
        for conversation in load(data / name / f"{name}.json"):
            for turn in conversation.turns:
                yield name, turn.text
    irc = data / "irc-ubuntu"
    for raw in sorted((irc / "train").glob("*.raw.txt")) + sorted((irc / "dev").glob("*.raw.txt")):
        for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
            if m := _IRC_LINE.match(line):
                yield "irc-ubuntu", m.group(1)


def false_positives(data: Path, out: Path | None, against: Path | None) -> None:
    before: dict[str, str] = json.loads(against.read_text()) if against else {}
    changed: dict[str, str] = {}
    counts: dict[str, list[int]] = {}
    for name, text in lines(data):
        seen = counts.setdefault(name, [0, 0, 0])
        seen[0] += 1
        scrubbed = scrub(text)
        if scrubbed == text:
            if text in before:
                print(f"{name}\tno longer changed\t{text}")
                seen[2] += 1
            continue
        seen[1] += 1
        changed[text] = scrubbed
        if against is None or before.get(text) != scrubbed:
            kinds = ",".join(sorted({k for k, _ in scrub_findings(text)}))
            print(f"{name}\t{kinds}\t{text}")
            seen[2] += against is not None
    for name, (total, n, new) in counts.items():
        diff = f", {new} differ from --against" if against else ""
        print(f"{name}: {n} of {total:,} lines changed{diff}")
    if out is not None:
        out.write_text(json.dumps(changed, ensure_ascii=False, indent=0, sort_keys=True))


def cost(chars: int) -> None:
    for name, unit in UNITS.items():
        text = unit * (chars // len(unit))
        start = time.process_time()
        scrub(text)
        print(f"{time.process_time() - start:6.2f} s  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=1_000_000)
    parser.add_argument("--lines", type=Path, help="the data folder: count false positives")
    parser.add_argument("--out", type=Path, help="with --lines: write the changed lines here")
    parser.add_argument("--against", type=Path, help="with --lines: an earlier --out file")
    args = parser.parse_args()
    if args.lines is not None:
        false_positives(args.lines, args.out, args.against)
    else:
        cost(args.chars)


if __name__ == "__main__":
    main()
