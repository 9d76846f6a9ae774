"""Bookkeeping between ranks (barriers, the unique id, times, error counts) over TCP, never through the
library under test, with a timeout on every wait."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import time
from typing import Any


class HostGroupError(RuntimeError):
    """A rank went away or did not answer in time."""


class HostGroup:
    """Barrier and all-gather of small JSON values among the ranks, over TCP with rank 0 as the hub.

    It never touches the library under test, so a library that fails or hangs cannot hang the
    bookkeeping, and every wait has a timeout. A rank that exits closes its socket, which the others
    see at once.
    """

    def __init__(self, rank: int, size: int, host: str, port: int, timeout: float) -> None:
        self.rank = rank
        self.size = size
        self.timeout = timeout
        self._peers: dict[int, socket.socket] = {}
        self._hub: socket.socket | None = None
        if size == 1:
            return
        deadline = time.monotonic() + timeout
        if rank == 0:
            server = socket.create_server((host, port), backlog=size)
            try:
                while len(self._peers) < size - 1:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        missing = sorted(set(range(1, size)) - set(self._peers))
                        raise HostGroupError(f"ranks {missing} did not connect within {timeout:g} s")
                    server.settimeout(left)
                    try:
                        conn, _ = server.accept()
                    except TimeoutError:
                        continue
                    self._setup(conn)
                    hello = self._recv(conn, "a connecting rank")
                    self._peers[int(hello["rank"])] = conn
            finally:
                server.close()
        else:
            while True:
                try:
                    conn = socket.create_connection(
                        (host, port), timeout=max(0.1, deadline - time.monotonic())
                    )
                    break
                except OSError as e:
                    if time.monotonic() > deadline:
                        raise HostGroupError(f"cannot reach rank 0 at {host}:{port}: {e}") from None
                    time.sleep(0.05)
            self._setup(conn)
            self._hub = conn
            self._send(conn, {"rank": rank})

    def _setup(self, conn: socket.socket) -> None:
        conn.settimeout(self.timeout)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @staticmethod
    def _send(conn: socket.socket, value: Any) -> None:
        data = json.dumps(value).encode()
        conn.sendall(struct.pack("!Q", len(data)) + data)

    def _recv(self, conn: socket.socket, who: str) -> Any:
        head = self._recv_exact(conn, 8, who)
        (n,) = struct.unpack("!Q", head)
        return json.loads(self._recv_exact(conn, n, who))

    def _recv_exact(self, conn: socket.socket, n: int, who: str) -> bytes:
        chunks = []
        while n:
            try:
                chunk = conn.recv(min(n, 1 << 20))
            except TimeoutError:
                raise HostGroupError(f"no word from {who} within {self.timeout:g} s") from None
            except OSError as e:
                raise HostGroupError(f"lost {who}: {e}") from None
            if not chunk:
                raise HostGroupError(f"{who} closed its connection (it failed or exited)")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def allgather(self, value: Any) -> list[Any]:
        """Every rank's value, in rank order, on every rank."""
        if self.size == 1:
            return [value]
        try:
            if self.rank == 0:
                values = [value] + [self._recv(self._peers[r], f"rank {r}") for r in range(1, self.size)]
                for r in range(1, self.size):
                    self._send(self._peers[r], values)
                return values
            assert self._hub is not None
            self._send(self._hub, value)
            return list(self._recv(self._hub, "rank 0"))
        except OSError as e:
            raise HostGroupError(f"exchange between ranks failed: {e}") from None

    def barrier(self) -> None:
        self.allgather(None)

    def close(self) -> None:
        for conn in [*self._peers.values(), self._hub]:
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.close()
        self._peers.clear()
        self._hub = None
