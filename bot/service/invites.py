"""What `muninn run` does with an invite to the bot (docs/ARCHITECTURE.md §3 rules 16 and 25).

Muninn joins rooms only through the operator's roster (`muninn roster apply`, §1), and the
roster may need an invite first: for an invite-only room its plan says "invite the reader,
then apply". Declining every invite at once undid that (the apply then failed, "1 FAILED"),
and a decline racing the roster's join left the room the roster had just joined (issue 46).
So an invite is
- rejected when it is a DM's (`is_direct`: never read, roster or not, rule 3);
- accepted when it is the command room's (joined even where the roster omits it);
- kept, for `muninn roster apply` to join, when the roster (`bot.roster`) lists the room,
  when no roster is configured or it cannot be read (nothing then tells which rooms it lists:
  an invite is harmless, leaving a listed room is not), or while the command room's alias is
  not resolved (it may be this room);
- declined otherwise, after the bot's membership is read right before the leave: a join
  since the invite (by the roster or by hand) wins. What remains: a join that lands between
  that read and the leave, one request's round trip; the roster's joins are never in it, since
  a room the roster lists is never declined.
"""

from __future__ import annotations

import logging
from pathlib import Path

from bot.chat.handlers import CommandHandler
from bot.chat.sender import BotClient
from bot.roster import RosterError, load_roster, normal_room
from ingest.errors import MatrixError
from ingest.matrix import ClientEvent, content_of
from ingest.types import RoomID

__all__ = ["Invites"]

log = logging.getLogger("muninn.service")


class Invites:
    """`invited(room, event)` for the bot's own member events (`Dispatcher.own_membership`)."""

    def __init__(
        self,
        client: BotClient,
        handler: CommandHandler,
        *,
        roster: Path | None,
        server_name: str,
    ) -> None:
        """`handler`: whose command room (and its alias, resolved or not) is joined on an
        invite; `roster`: the file `bot.roster` names, read at each invite, or None."""
        self._client = client
        self._handler = handler
        self.roster = roster
        self._server_name = server_name

    async def invited(self, room_id: RoomID, event: ClientEvent) -> None:
        content = content_of(event)
        if content.get("membership") != "invite":
            return  # dispatch dropped the room's cached verdict
        inviter = event.get("sender")
        if content.get("is_direct"):
            log.info("rejecting DM invite to %s from %s", room_id, inviter)
            await self._client.leave(room_id)
            return
        if room_id == self._handler.command_room:
            log.info("joining the command room %s (invited by %s)", room_id, inviter)
            await self._client.join(room_id)
            self._handler.rooms.invalidate(room_id)
            return
        kept = await self._kept(room_id)
        if kept is not None:
            log.info("keeping the invite to %s from %s: %s", room_id, inviter, kept)
            return
        # Right before the leave: a join since the invite (the roster's, or by hand) wins.
        if await self._client.membership(room_id, self._handler.bot_user_id) == "join":
            return
        log.info(
            "declining invite to %s from %s: the roster (%s) does not list it, and Muninn "
            "joins rooms only through it (`muninn roster apply`)",
            room_id,
            inviter,
            self.roster,
        )
        await self._client.leave(room_id)

    async def _kept(self, room_id: RoomID) -> str | None:
        """Why the invite is kept for the roster, or None: decline it."""
        if self._handler.command_alias.pending:
            return "the command room's alias is not resolved yet, and this may be the room"
        if self.roster is None:
            return (
                "bot.roster is not set, so nothing tells whether the roster lists this room "
                "(`muninn roster apply` joins it if it does)"
            )
        try:
            roster = load_roster(self.roster, self._server_name)
        except RosterError as e:
            return f"the roster cannot be read, so it may list this room: {e}"
        entries = [normal_room(entry.room, self._server_name) for entry in roster.rooms]
        if room_id in entries:
            return "the roster lists it (`muninn roster apply` joins it)"
        for alias in (e for e in entries if e.startswith("#")):
            try:
                named = await self._client.resolve_alias(alias)
            except MatrixError as e:
                return f"the roster's {alias} cannot be resolved now ({e}); it may name this room"
            if named == room_id:
                return f"the roster lists it as {alias} (`muninn roster apply` joins it)"
        return None
