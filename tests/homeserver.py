"""A real Synapse for the test suite, and a raw client-server client for the "real user" side.

The server process and the client live in `bot.demo` (`synapse`, `synapse_config`, `client`,
`homeserver`: the demo needs them too), and tests import them from there; this module adds the
client calls only tests make (notices, threads, fake ciphertext, media, encryption and
visibility state), as the `MatrixUser` and `Homeserver` the tests use.

Facts the tests lean on (Synapse 1.163):
- the appservice bot user (`@muninn:muninn.test`) cannot `/sync` (500); it reads with `/messages`;
- room version 12 is the default: room ids have no server part;
- `is_direct` is only on the invite event; after the join it is in the join event's
  `unsigned.prev_content`;
- a redacted event keeps its id, with `content: {}` and `unsigned.redacted_because`;
- appservice users may backdate with `?ts=<ms>`, honoured in `origin_server_ts`.
"""

from __future__ import annotations

import secrets

from bot.demo import client as demo_client
from bot.demo import homeserver as demo_homeserver

__all__ = ["Homeserver", "MatrixUser"]

# A 1x1 transparent PNG, so media events point at real uploaded content.
_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


class MatrixUser(demo_client.MatrixUser):
    """`bot.demo.client.MatrixUser` plus the calls only tests make."""

    async def set_history_visibility(self, room_id: str, visibility: str) -> str:
        content = {"history_visibility": visibility}
        return await self.send_state(room_id, "m.room.history_visibility", content)

    async def enable_encryption(self, room_id: str) -> str:
        content = {"algorithm": "m.megolm.v1.aes-sha2"}
        return await self.send_state(room_id, "m.room.encryption", content)

    async def send_notice(self, room_id: str, body: str, *, ts: int | None = None) -> str:
        content = {"msgtype": "m.notice", "body": body}
        return await self.send(room_id, "m.room.message", content, ts=ts)

    async def send_thread_reply(
        self,
        room_id: str,
        root_id: str,
        body: str,
        *,
        in_reply_to: str | None = None,
        ts: int | None = None,
    ) -> str:
        """A thread reply; `is_falling_back` marks the in_reply_to as the thread fallback."""
        relates = {
            "rel_type": "m.thread",
            "event_id": root_id,
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": in_reply_to or root_id},
        }
        content = {"msgtype": "m.text", "body": body, "m.relates_to": relates}
        return await self.send(room_id, "m.room.message", content, ts=ts)

    async def send_encrypted(self, room_id: str, *, ts: int | None = None) -> str:
        """An `m.room.encrypted` event shaped like megolm output (the ciphertext is noise)."""
        content = {
            "algorithm": "m.megolm.v1.aes-sha2",
            "ciphertext": "AwgAEnAC" + secrets.token_urlsafe(96),
            "device_id": "FAKEDEVICE",
            "sender_key": secrets.token_urlsafe(32)[:43],
            "session_id": secrets.token_urlsafe(32)[:43],
        }
        return await self.send(room_id, "m.room.encrypted", content, ts=ts)

    async def upload(self, data: bytes, content_type: str, filename: str) -> str:
        resp = await self.call(
            "POST",
            "/_matrix/media/v3/upload",
            data=data,
            content_type=content_type,
            query={"filename": filename},
        )
        return str(resp["content_uri"])

    async def send_image(
        self, room_id: str, body: str = "pixel.png", *, ts: int | None = None
    ) -> str:
        url = await self.upload(_PNG, "image/png", body)
        info = {"mimetype": "image/png", "size": len(_PNG), "w": 1, "h": 1}
        content = {"msgtype": "m.image", "body": body, "url": url, "info": info}
        return await self.send(room_id, "m.room.message", content, ts=ts)

    async def send_media(
        self,
        room_id: str,
        msgtype: str,
        filename: str,
        caption: str | None = None,
        *,
        ts: int | None = None,
    ) -> str:
        """An uploaded file, image, video or audio clip (`m.file`, …); with a caption in
        MSC2530's shape: `filename`, and the caption as `body`."""
        url = await self.upload(_PNG, "application/octet-stream", filename)
        content = {"msgtype": msgtype, "body": caption or filename, "url": url}
        if caption is not None:
            content["filename"] = filename
        return await self.send(room_id, "m.room.message", content, ts=ts)

    async def edit_caption(self, room_id: str, target_id: str, caption: str) -> str:
        """MSC2530's caption edit: the media's own content, its `body` the new caption."""
        old = (await self.get_event(room_id, target_id))["content"]
        name = old.get("filename") or old["body"]
        new = {"msgtype": old["msgtype"], "body": caption, "filename": name, "url": old["url"]}
        content = {
            "msgtype": old["msgtype"],
            "body": f"* {caption}",
            "m.new_content": new,
            "m.relates_to": {"rel_type": "m.replace", "event_id": target_id},
        }
        return await self.send(room_id, "m.room.message", content)


class Homeserver(demo_homeserver.BaseHomeserver[MatrixUser]):
    """The test Synapse seen from outside; every user it hands out is a test `MatrixUser`."""

    user_class = MatrixUser
