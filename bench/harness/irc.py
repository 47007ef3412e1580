"""The Ubuntu IRC logs (Kummerfeld et al. 2019, CC-BY-4.0) as one room's Matrix events, and the
texts the timed benchmarks ask with.

A nick becomes `@irc_<nick>:bench.local`, the file date + `[HH:MM]` an `origin_server_ts`
(messages within a minute spread by a second each), an annotated reply link an `m.in_reply_to`
reply with the spec's fallback. The `dev` split is never indexed below 196k messages, so its
lines are held-out queries.
"""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOM = "!irc-ubuntu:bench.local"
_LINE = re.compile(r"^\[(\d\d):(\d\d)\] <([^>]+)> (.*)$")
_FILE_DATE = re.compile(r"(\d{4}-\d\d-\d\d)")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'-]{3,}")


def _nick_id(nick: str) -> str:
    safe = re.sub(r"[^a-z0-9._=-]", "_", nick.lower()) or "anon"
    return f"@irc_{safe}:bench.local"


def _links(annotation: Path) -> dict[int, int]:
    """reply line → parent line, from `parent child -` annotation lines."""
    out: dict[int, int] = {}
    if not annotation.is_file():
        return out
    for line in annotation.read_text(errors="replace").splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            parent, child = int(parts[0]), int(parts[1])
            if parent != child:
                out[child] = parent
    return out


def irc_events(data: Path, limit: int) -> Iterator[dict[str, Any]]:
    """Raw Matrix events for the first `limit` IRC messages of `data/train` (then `dev`)."""
    create = {
        "type": "m.room.create",
        "state_key": "",
        "sender": "@irc_bench:bench.local",
        "event_id": "$create",
        "room_id": ROOM,
        "origin_server_ts": 0,
        "content": {"room_version": "12"},
    }
    yield create
    count = 0
    files = sorted((data / "train").glob("*.raw.txt")) + sorted((data / "dev").glob("*.raw.txt"))
    for raw in files:
        date = _FILE_DATE.search(raw.name)
        if date is None:
            continue
        day = datetime.strptime(date.group(1), "%Y-%m-%d").replace(tzinfo=UTC)
        links = _links(raw.with_name(raw.name.replace(".raw.txt", ".annotation.txt")))
        by_line: dict[int, tuple[str, str, str]] = {}
        second = 0
        last_minute = -1
        for n, line in enumerate(raw.read_text(errors="replace").splitlines()):
            m = _LINE.match(line)
            if m is None:
                continue
            minute = int(m.group(1)) * 60 + int(m.group(2))
            second = second + 1 if minute == last_minute else 0
            last_minute = minute
            ts = int(day.timestamp() * 1000) + (minute * 60 + min(second, 59)) * 1000
            sender, body = _nick_id(m.group(3)), m.group(4)
            event_id = f"${raw.stem}-{n}"
            content: dict[str, Any] = {"msgtype": "m.text", "body": body}
            parent = by_line.get(links.get(n, -1))
            if parent is not None:
                p_id, p_sender, p_body = parent
                content["body"] = f"> <{p_sender}> {p_body}\n\n{body}"
                content["m.relates_to"] = {"m.in_reply_to": {"event_id": p_id}}
            by_line[n] = (event_id, sender, body)
            yield {
                "type": "m.room.message",
                "sender": sender,
                "event_id": event_id,
                "room_id": ROOM,
                "origin_server_ts": ts,
                "content": content,
            }
            count += 1
            if count >= limit:
                return


def messages(data: Path, n: int) -> Iterator[dict[str, Any]]:
    """The create event and `n` IRC messages; replays the logs with new ids past their end."""
    replay = 0
    produced = 0
    span = 0
    while produced < n:
        last_ts = 0
        fresh = 0
        for event in irc_events(data, n - produced):
            if event["type"] == "m.room.create":
                if replay == 0:
                    yield event
                continue
            fresh += 1
            last_ts = max(last_ts, int(event["origin_server_ts"]))
            if replay:
                event = copy.deepcopy(event)
                event["event_id"] = f"{event['event_id']}-r{replay}"
                event["origin_server_ts"] = int(event["origin_server_ts"]) + span * replay
                rel = event["content"].get("m.relates_to", {}).get("m.in_reply_to")
                if rel is not None:
                    rel["event_id"] = f"{rel['event_id']}-r{replay}"
            yield event
        if fresh == 0:
            return
        produced += fresh
        span = span or last_ts + 86_400_000
        replay += 1


def held_out_texts(data: Path, n: int, seed: int = 11) -> list[str]:
    """`n` message texts of the `dev` split (never indexed below 196k messages), ≤ 12 words."""
    out: list[str] = []
    for raw in sorted((data / "dev").glob("*.raw.txt")):
        for line in raw.read_text(errors="replace").splitlines():
            m = _LINE.match(line)
            if m is None:
                continue
            words = m.group(4).split()
            if len(words) >= 4:
                out.append(" ".join(words[:12]))
    random.Random(seed).shuffle(out)
    return out[:n]


def phrases(bodies: Sequence[str], n: int, seed: int = 5) -> list[str]:
    """`n` two-word phrases (words of 4+ letters, adjacent) from the given bodies."""
    rng = random.Random(seed)
    out: list[str] = []
    candidates = [b for b in bodies if len(_WORD.findall(b)) >= 2]
    while len(out) < n and candidates:
        words = _WORD.findall(rng.choice(candidates))
        i = rng.randrange(len(words) - 1)
        out.append(f"{words[i]} {words[i + 1]}")
    return out


def speakers_and_lines(data: Path, n: int) -> tuple[list[str], list[str]]:
    """The senders and bodies of the first `n` messages, each body without its reply fallback
    (what a seed user sends in its place)."""
    events = [e for e in irc_events(data, n) if e["type"] == "m.room.message"]
    return (
        [str(e["sender"]) for e in events],
        [str(e["content"]["body"]).split("\n\n")[-1] for e in events],
    )
