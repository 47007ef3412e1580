"""Rule 8 end to end for the disguised shapes of issue 37 item 2: a secret carried by an
invisible, full-width or look-alike character reaches no embedding, no payload and no file of
the store (real Synapse, MiniLM and qdrant-edge; the shapes are
tests/ingest/rules/test_scrub.py's)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.homeserver import Homeserver, MatrixUser
from tests.indexing import Indexer, admit, reader_config
from tests.ingest.rules.test_scrub import DISGUISED


def _files_holding(root: Path, piece: str) -> list[str]:
    needles = {piece.encode(), piece.encode("unicode_escape")}  # raw, or escaped in JSON
    return [
        str(p.relative_to(root))
        for p in sorted(root.rglob("*"))
        if p.is_file() and any(n in p.read_bytes() for n in needles)
    ]


async def test_disguised_secrets_reach_no_embedding_payload_or_store_file(
    hs: Homeserver, alice: MatrixUser, tmp_path: Path
) -> None:
    """Regression (issue 37 item 2): each disguised shape, sent as a message, is indexed
    scrubbed: its secret is in no text the embedder was given, no payload, and (after a clean
    stop) no byte of the store's files; the words around it are indexed."""
    room = await hs.fresh_room(alice)
    reader = await hs.register(displayname="Reader")
    await admit(alice, room, reader)
    for text, _, _ in DISGUISED:
        await alice.send_text(room, text)
    ix = Indexer(reader_config(hs, reader, tmp_path))
    try:
        await ix.refresh()
        dump = await ix.dump()
        assert len(await ix.bodies()) == len(DISGUISED)
        assert dump.count("[redacted:") >= len(DISGUISED)
        documents = "\n".join(ix.embedder.documents)
        for text, pieces, kept in DISGUISED:
            for piece in pieces:
                assert piece not in dump and piece not in documents, (text, piece)
            assert all(json.dumps(w, ensure_ascii=False)[1:-1] in dump for w in kept), text
    finally:
        await ix.close()
    store = tmp_path / "qdrant"
    for _, pieces, _ in DISGUISED:
        for piece in pieces:
            assert _files_holding(store, piece) == [], piece
