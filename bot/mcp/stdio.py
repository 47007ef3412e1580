"""`muninn mcp`'s stdio transport: the SDK's framing (one JSON-RPC message a line), bounded.

The SDK's `stdio_server` drops a line it cannot parse (the client waits for an answer that
never comes) and reads a line of any length; and as its dispatcher answers each request in a
task of its own, a client that sends without reading has the server read on and hold every
answer in memory (132 → 453 MiB, issue 46): its write stream has no buffer, the waiting tasks
are the queue. Here, at the edge, the same streams the SDK's server runs on, with:

- a line that is not JSON answered -32700 Parse error, JSON that is no JSON-RPC message -32600
  Invalid Request, both with id null (the id cannot be read), and the next line served;
- a line of at most `MAX_LINE` bytes: a longer one is skipped as it is read, never held, and
  answered -32600;
- at most `MAX_IN_FLIGHT` requests read and not yet answered (`Unanswered`): past it stdin is
  not read, so a client that stops reading fills its own pipe and waits, and the server holds
  no more answers than that;
- answers written one at a time under the pipe's flow control, none held once written.

As the SDK's does, it points fd 1 at stderr and fd 0 at /dev/null while serving (a stray
print or a library's output never reaches the wire) and serves the protocol on duplicates.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from typing import Any, BinaryIO, Protocol

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

__all__ = [
    "MAX_IN_FLIGHT",
    "MAX_LINE",
    "FileLines",
    "FileSink",
    "PipeLines",
    "PipeSink",
    "Unanswered",
    "framed",
    "message_of",
    "serve_stdio",
]

MAX_LINE = 1024 * 1024  # bytes of one message; a tool's arguments are far smaller
MAX_IN_FLIGHT = 16  # requests read and not yet answered; the tools answer one at a time


class LineTooLong(Exception):
    """A line over `MAX_LINE`, skipped as it was read."""


class Unanswered:
    """The requests read and not yet answered, by id: `admit` waits while `bound` are."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.ids: Counter[str] = Counter()
        self._changed = anyio.Condition()

    async def admit(self, request_id: RequestId) -> None:
        async with self._changed:
            while self.ids.total() >= self.bound:
                await self._changed.wait()
            self.ids[str(request_id)] += 1

    async def settle(self, request_id: RequestId) -> None:
        """The request is answered (or the client cancelled it: no answer is due then)."""
        async with self._changed:
            key = str(request_id)
            if self.ids[key] > 0:
                self.ids[key] -= 1
                self._changed.notify_all()
            if self.ids[key] <= 0:
                del self.ids[key]


def message_of(line: bytes) -> SessionMessage | JSONRPCError:
    """A line as a message, or the error that answers it (-32700 not JSON, -32600 JSON that is
    no JSON-RPC message); never the line's text."""
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValidationError as e:
        if any(error["type"] == "json_invalid" for error in e.errors(include_url=False)):
            return _error(PARSE_ERROR, "Parse error")
        return _error(INVALID_REQUEST, "Invalid Request")


def _error(code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=code, message=message))


class Lines(Protocol):
    async def line(self) -> bytes | None:
        """The next line, None at the end; `LineTooLong` for one over the bound, skipped."""


class Sink(Protocol):
    async def write(self, frame: bytes) -> None:
        """Write a frame, waiting while the peer is behind; ConnectionError once it left."""


class PipeLines:
    """Lines of a pipe (or socket, or terminal), read by the event loop: at most twice the
    reader's limit is buffered, then the pipe is not read until lines are taken."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    async def line(self) -> bytes | None:
        skipped = 0
        while True:
            try:
                line = await self.reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as e:  # the last line, without its newline
                line = e.partial
                if not line and not skipped:
                    return None
            except asyncio.LimitOverrunError as e:  # dropped as it is read, never held
                skipped += e.consumed
                await self.reader.readexactly(e.consumed)
                continue
            if skipped:
                raise LineTooLong(skipped + len(line))
            return line


class PipeSink:
    """A pipe written under its flow control: `write` waits while the peer does not read
    (with no write buffer: until the pipe has the frame)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    async def write(self, frame: bytes) -> None:
        self.writer.write(frame)
        await self.writer.drain()


class FileLines:
    """Lines of a regular file (`muninn mcp < requests.jsonl`): a read never waits on a peer."""

    def __init__(self, file: BinaryIO, limit: int = MAX_LINE) -> None:
        self.file = file
        self.limit = limit

    async def line(self) -> bytes | None:
        line = self.file.readline(self.limit + 1)
        if len(line) <= self.limit or line.endswith(b"\n"):
            return line or None
        skipped = len(line)
        while (rest := self.file.readline(self.limit)) and not rest.endswith(b"\n"):
            skipped += len(rest)
        raise LineTooLong(skipped + len(rest))


class FileSink:
    """A regular file (`muninn mcp > answers.jsonl`): a write never waits on a peer."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file

    async def write(self, frame: bytes) -> None:
        self.file.write(frame)
        self.file.flush()


@asynccontextmanager
async def framed(
    lines: Lines, sink: Sink, in_flight: int = MAX_IN_FLIGHT
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """The streams the SDK's server runs on, over lines read and a sink written."""
    inbound_send, inbound = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outbound, outbound_receive = anyio.create_memory_object_stream[SessionMessage](0)
    unanswered = Unanswered(in_flight)

    async def read(errors: MemoryObjectSendStream[SessionMessage]) -> None:
        async with inbound_send, errors:
            while True:
                try:
                    line = await lines.line()
                except LineTooLong:
                    await errors.send(SessionMessage(_error(INVALID_REQUEST, _too_long())))
                    continue
                if line is None:
                    return
                if not line.strip():
                    continue
                item = message_of(line)
                if isinstance(item, JSONRPCError):
                    await errors.send(SessionMessage(item))
                    continue
                message = item.message
                if isinstance(message, JSONRPCRequest):
                    await unanswered.admit(message.id)
                elif (cancelled := _cancelled(message)) is not None:
                    await unanswered.settle(cancelled)
                await inbound_send.send(item)

    async def write() -> None:
        async with outbound_receive:
            async for item in outbound_receive:
                message = item.message
                frame = message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    await sink.write(frame.encode() + b"\n")
                except ConnectionError:  # the client closed its end: nobody reads an answer
                    tasks.cancel_scope.cancel()
                    return
                if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
                    await unanswered.settle(message.id)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read, outbound.clone())
        tasks.start_soon(write)
        yield inbound, outbound


def _too_long() -> str:
    return f"Invalid Request: a message is at most {MAX_LINE // (1024 * 1024)} MiB"


def _cancelled(message: Any) -> RequestId | None:
    """The request a `notifications/cancelled` cancels: the server answers it no more."""
    if not isinstance(message, JSONRPCNotification) or message.method != "notifications/cancelled":
        return None
    request_id = (message.params or {}).get("requestId")
    return request_id if isinstance(request_id, int | str) else None


@contextmanager
def _claimed() -> Iterator[tuple[int, int]]:
    """The protocol's own duplicates of fds 0 and 1; meanwhile fd 0 reads /dev/null and fd 1
    writes to stderr. Put back, blocking again, at the end."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        yield wire_in, wire_out
    finally:
        for fd, wire in ((0, wire_in), (1, wire_out)):
            os.set_blocking(wire, True)  # the event loop's pipes made it non-blocking
            os.dup2(wire, fd)
            os.close(wire)


def _is_file(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)


async def serve_stdio(server: MCPServer) -> None:
    """Serve `server` on stdin/stdout, bounded, until the client closes stdin."""
    loop = asyncio.get_running_loop()
    with _claimed() as (wire_in, wire_out), ExitStack() as closing:
        source = closing.enter_context(os.fdopen(os.dup(wire_in), "rb"))
        target = closing.enter_context(os.fdopen(os.dup(wire_out), "wb"))
        lines: Lines = FileLines(source)
        sink: Sink = FileSink(target)
        if not _is_file(wire_in):
            reader = asyncio.StreamReader(limit=MAX_LINE)
            pipe, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), source
            )
            closing.callback(pipe.close)
            lines = PipeLines(reader)
        if not _is_file(wire_out):
            pipe_out, flow = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin, target
            )
            pipe_out.set_write_buffer_limits(high=0)  # `write` returns once the pipe has it
            closing.callback(pipe_out.close)
            sink = PipeSink(asyncio.StreamWriter(pipe_out, flow, None, loop))
        # The SDK's own server: `MCPServer.run_stdio_async` runs it just so, on its transport.
        lowlevel = server._lowlevel_server
        async with framed(lines, sink) as (inbound, outbound):
            await lowlevel.run(inbound, outbound, lowlevel.create_initialization_options())
