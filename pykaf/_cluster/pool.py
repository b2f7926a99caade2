"""Connections to the cluster's brokers: one per broker, reopened with backoff.

A broker that refuses connections is retried after an exponentially growing,
jittered delay (``reconnect_backoff`` doubling up to ``reconnect_backoff_max``),
so a dead broker is not hammered and a restarted one is found again quickly.
"""

from __future__ import annotations

import logging

import trio

from pykaf._cluster.backoff import delay
from pykaf._config import ClientConfig
from pykaf._net.connection import BrokerConnection
from pykaf.errors import ClosedError, KafkaConnectionError

log = logging.getLogger("pykaf.cluster")


class _Slot:
    __slots__ = ("conn", "failures", "lock", "next_attempt")

    def __init__(self) -> None:
        self.conn: BrokerConnection | None = None
        self.lock = trio.Lock()
        self.failures = 0
        self.next_attempt = 0.0


class ConnectionPool:
    """Opens, caches and reopens broker connections inside the owner's nursery."""

    def __init__(self, nursery: trio.Nursery, config: ClientConfig) -> None:
        self._nursery = nursery
        self.config = config
        self._slots: dict[tuple[str, int], _Slot] = {}
        self._closed = False
        self.connects = 0
        self.connect_failures = 0

    def backoff(self, failures: int) -> float:
        """Seconds to wait before the next attempt after ``failures`` failures."""
        cfg = self.config
        return delay(failures, cfg.reconnect_backoff, cfg.reconnect_backoff_max)

    async def get(self, host: str, port: int, node_id: int = -1) -> BrokerConnection:
        """A live connection to ``host:port`` (opened or reopened as needed).

        Raises:
            KafkaConnectionError: the connection could not be opened.
            ClosedError: the pool is closed.
        """
        if self._closed:
            raise ClosedError("the client is closed")
        key = (host, port)
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = _Slot()
        conn = slot.conn
        if conn is not None and not conn.broken:
            if conn.expires_at is None or trio.current_time() < conn.expires_at:
                conn.learn_node_id(node_id)
                return conn
            conn.close()  # the SASL session is ending: authenticate afresh
        async with slot.lock:
            conn = slot.conn
            if conn is not None and not conn.broken:
                conn.learn_node_id(node_id)
                return conn
            wait = slot.next_attempt - trio.current_time()
            if wait > 0:
                await trio.sleep(wait)
            if self._closed:
                raise ClosedError("the client is closed")
            try:
                conn = await BrokerConnection.open(
                    self._nursery, host, port, self.config, node_id=node_id
                )
            except KafkaConnectionError:
                slot.failures += 1
                self.connect_failures += 1
                slot.next_attempt = trio.current_time() + self.backoff(slot.failures)
                raise
            slot.failures = 0
            slot.next_attempt = 0.0
            slot.conn = conn
            self.connects += 1
            return conn

    def live(self, host: str, port: int) -> BrokerConnection | None:
        """The open connection to ``host:port`` that :meth:`get` would return at once, or None."""
        slot = self._slots.get((host, port))
        if slot is None or self._closed:
            return None
        conn = slot.conn
        if conn is None or conn.broken:
            return None
        if conn.expires_at is not None and trio.current_time() >= conn.expires_at:
            return None  # get() authenticates afresh first
        return conn

    def connections(self) -> list[BrokerConnection]:
        """The live connections."""
        return [s.conn for s in self._slots.values() if s.conn is not None and not s.conn.broken]

    def drop(self, host: str, port: int) -> None:
        """Close the connection to ``host:port`` if there is one."""
        slot = self._slots.get((host, port))
        if slot is not None and slot.conn is not None:
            slot.conn.close()

    def drop_all(self) -> None:
        """Close every connection and forget the reconnect backoffs (a rebootstrap)."""
        for slot in self._slots.values():
            if slot.conn is not None:
                slot.conn.close()
            slot.failures = 0
            slot.next_attempt = 0.0

    async def aclose(self) -> None:
        """Close every connection and wait for their reader tasks to end."""
        self._closed = True
        for slot in self._slots.values():
            if slot.conn is not None:
                await slot.conn.aclose()
