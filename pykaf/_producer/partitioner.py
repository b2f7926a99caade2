"""Partitioners: which partition of a topic a record goes to.

A partitioner is any object with ``partition(topic, key, partitions,
available) -> int`` (the :class:`Partitioner` protocol). ``partitions`` is the
topic's partition count; ``available`` lists the partitions that have a
leader, or is ``None`` or empty when that is unknown. Keyed partitioners hash
over *all* partitions whatever ``available`` says, as Java's producer and
librdkafka do, so a key's partition does not move while a leader is down.

Partitioners that keep state between records (the sticky one, and keyed ones
through their null-key fallback) also have ``on_new_batch(topic, previous)``;
the producer calls it when the batch a sticky partition was filling is full
or sent (KIP-480). The producer looks for the method with ``getattr``, so a
custom partitioner may leave it out.

Compatibility with other clients (see ``docs/partitioners.md``):

- :class:`Murmur2Partitioner`: Java's default partitioner and librdkafka's
  ``murmur2_random`` (confluent-kafka's ``partitioner="murmur2_random"``).
- :class:`Fnv1aPartitioner`: librdkafka's ``fnv1a_random`` and sarama's
  default hash partitioner (the hash read as a signed int32).
- :class:`Crc32Partitioner`: librdkafka's ``consistent_random`` (its default).

A partition out of range from a user's callable, or a :class:`ManualPartitioner`
asked to choose, raises :class:`PartitionerError`, which the producer reports
for that one record.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from pykaf.codec import fnv1a_32, murmur2
from pykaf.errors import ConfigError, PartitionerError

PartitionerFunc = Callable[[str, bytes | None, int, Sequence[int] | None], int]
"""A plain function used as a partitioner: ``(topic, key, partitions, available) -> int``."""


@runtime_checkable
class Partitioner(Protocol):
    """Chooses a partition for a record."""

    def partition(
        self, topic: str, key: bytes | None, partitions: int, available: Sequence[int] | None
    ) -> int:
        """The partition in ``range(partitions)`` for a record with ``key`` on ``topic``.

        ``available`` holds the partitions with a leader; ``None`` or empty
        means unknown. Raises :class:`PartitionerError` when it cannot choose.
        """
        ...


def _no_partitions(topic: str, partitions: int) -> PartitionerError:
    return PartitionerError(f"topic {topic!r} has {partitions} partitions: nothing to choose")


def _candidates(partitions: int, available: Sequence[int] | None) -> Sequence[int] | None:
    """The available partitions still in range, or None to use all of them."""
    if not available:
        return None
    usable = [p for p in available if 0 <= p < partitions]
    return usable if len(usable) != len(available) else available


class RandomPartitioner:
    """A uniformly random partition per record, among the available ones if known.

    Keys are ignored. ``seed`` makes the choice repeatable (for tests).
    """

    def __init__(self, *, seed: int | None = None) -> None:
        self._random = random.Random(seed)

    def partition(
        self, topic: str, key: bytes | None, partitions: int, available: Sequence[int] | None
    ) -> int:
        """A random partition: one of ``available`` when known, else of all."""
        if partitions <= 0:
            raise _no_partitions(topic, partitions)
        usable = _candidates(partitions, available)
        if usable:
            return usable[self._random.randrange(len(usable))]
        return self._random.randrange(partitions)

    def on_new_batch(self, topic: str, previous: int | None = None) -> None:
        """Nothing to do: every record is chosen afresh."""


class RoundRobinPartitioner:
    """Each topic's records go to its partitions in turn (Java's RoundRobinPartitioner).

    Keys are ignored. When ``available`` is known the rotation runs over the
    available partitions only, otherwise over all of them.
    """

    def __init__(self) -> None:
        self._next: dict[str, int] = {}

    def partition(
        self, topic: str, key: bytes | None, partitions: int, available: Sequence[int] | None
    ) -> int:
        """The next partition in this topic's rotation."""
        if partitions <= 0:
            raise _no_partitions(topic, partitions)
        n = self._next.get(topic, 0)
        self._next[topic] = n + 1
        usable = _candidates(partitions, available)
        if usable:
            return usable[n % len(usable)]
        return n % partitions

    def on_new_batch(self, topic: str, previous: int | None = None) -> None:
        """Nothing to do: the rotation moves on every record."""


class UniformStickyPartitioner:
    """KIP-480 sticky partitioning: one partition per topic until its batch is done.

    Every record of a topic goes to the same randomly chosen partition (an
    available one when known) until the producer calls :meth:`on_new_batch`,
    which picks a different one. Keys are ignored: keyed partitioners use this
    for null keys. A sticky partition that stops being available or falls out
    of range (the partition count shrank) is replaced at once.
    """

    def __init__(self, *, seed: int | None = None) -> None:
        self._random = random.Random(seed)
        self._sticky: dict[str, int] = {}
        self._retired: dict[str, int] = {}  # the partition to move away from

    def partition(
        self, topic: str, key: bytes | None, partitions: int, available: Sequence[int] | None
    ) -> int:
        """The sticky partition of ``topic``, choosing one first if there is none."""
        current = self._sticky.get(topic)
        if current is not None and current < partitions and (not available or current in available):
            return current
        if partitions <= 0:
            raise _no_partitions(topic, partitions)
        old = current if current is not None else self._retired.pop(topic, None)
        usable = _candidates(partitions, available)
        pool: Sequence[int] = usable if usable else range(partitions)
        if old is not None and len(pool) > 1 and old in pool:
            # Uniform over the pool without ``old``: the last candidate stands in for it.
            choice = pool[self._random.randrange(len(pool) - 1)]
            if choice == old:
                choice = pool[-1]
        else:
            choice = pool[self._random.randrange(len(pool))]
        self._sticky[topic] = choice
        return choice

    def on_new_batch(self, topic: str, previous: int | None = None) -> None:
        """Drop ``topic``'s sticky partition: the next record picks a different one.

        With ``previous`` (the partition whose batch just completed), only
        switch if the sticky partition is still that one, so two batches
        completing at once switch it only once (as Java's producer does).
        """
        current = self._sticky.get(topic)
        if current is None or (previous is not None and current != previous):
            return
        del self._sticky[topic]
        self._retired[topic] = current


class ManualPartitioner:
    """For producers where every record names its partition: never chooses.

    The producer uses a record's explicit partition without asking any
    partitioner; reaching this one means the record had none.
    """

    def partition(
        self, topic: str, key: bytes | None, partitions: int, available: Sequence[int] | None
    ) -> int:
        """Always raises :class:`PartitionerError`: the record must give its partition."""
        raise PartitionerError(
            f"partitioner is 'manual' but a record for topic {topic!r} names no partition"
        )

    def on_new_batch(self, topic: str, previous: int | None = None) -> None:
        """Nothing to do."""


class _KeyedPartitioner:
    """Shared parts of the hash partitioners: the null-key fallback."""

    def __init__(
        self, *, null_key: Partitioner | None = None, hash_null_keys: bool = False
    ) -> None:
        self._null: Partitioner = null_key if null_key is not None else UniformStickyPartitioner()
        self._hash_null = hash_null_keys

    def on_new_batch(self, topic: str, previous: int | None = None) -> None:
        """Pass the batch boundary on to the null-key partitioner."""
        hook = getattr(self._null, "on_new_batch", None)
        if hook is not None:
            hook(topic, previous)


class Murmur2Partitioner(_KeyedPartitioner):
    """``(murmur2(key) & 0x7fffffff) % partitions``: Java's default partitioner for keys.

    Matches Java's producer and librdkafka's ``murmur2_random``. Null keys go
    to ``null_key`` (default: a :class:`UniformStickyPartitioner`, as both of
    those do). ``hash_null_keys=True`` instead hashes a null key as empty
    bytes, like librdkafka's plain ``murmur2``.
    """

    def partition(
        self, topic: str, key: bytes | None, partitions: int, available: Sequence[int] | None
    ) -> int:
        """The key's murmur2 partition; a null key's from the fallback."""
        if key is None:
            if not self._hash_null:
                return self._null.partition(topic, key, partitions, available)
            key = b""
        if partitions <= 0:
            raise _no_partitions(topic, partitions)
        return (murmur2(key) & 0x7FFFFFFF) % partitions


class Fnv1aPartitioner(_KeyedPartitioner):
    """FNV-1a 32 of the key, mapped as sarama's hash partitioner: librdkafka's ``fnv1a_random``.

    The mapping is ``abs(int32(fnv1a_32(key)) % partitions)`` with Go's
    truncating remainder, which is ``abs(int32(hash)) % partitions``: the
    hash is read as a *signed* 32-bit int. librdkafka does the same (checked
    against confluent-kafka in the tests), so keys land where sarama and
    confluent-kafka put them. Plain ``fnv1a_32(key) % partitions`` would
    differ for every hash with the top bit set. Null keys: as
    :class:`Murmur2Partitioner`.
    """

    def partition(
        self, topic: str, key: bytes | None, partitions: int, available: Sequence[int] | None
    ) -> int:
        """The key's FNV-1a partition; a null key's from the fallback."""
        if key is None:
            if not self._hash_null:
                return self._null.partition(topic, key, partitions, available)
            key = b""
        if partitions <= 0:
            raise _no_partitions(topic, partitions)
        h = fnv1a_32(key)
        if h & 0x80000000:
            h = 0x100000000 - h  # |int32(h)|
        return h % partitions


class Crc32Partitioner(_KeyedPartitioner):
    """``crc32(key) % partitions``: librdkafka's ``consistent_random``, its default.

    As librdkafka's ``consistent_random`` does, an *empty* key is treated like
    a null key and goes to ``null_key`` (default: sticky). With
    ``hash_null_keys=True`` null and empty keys are hashed instead (crc32 of
    nothing is 0: partition 0), like librdkafka's plain ``consistent``.
    """

    def partition(
        self, topic: str, key: bytes | None, partitions: int, available: Sequence[int] | None
    ) -> int:
        """The key's CRC-32 partition; a null or empty key's from the fallback."""
        if not key:
            if not self._hash_null:
                return self._null.partition(topic, key, partitions, available)
            key = b""
        if partitions <= 0:
            raise _no_partitions(topic, partitions)
        return zlib.crc32(key) % partitions


class CallablePartitioner:
    """Adapts a function ``(topic, key, partitions, available) -> int`` and checks its answers.

    A result that is not an int in ``range(partitions)``, or an exception
    from the function, becomes :class:`PartitionerError` (the function's
    exception is its ``__cause__``).
    """

    def __init__(self, func: PartitionerFunc) -> None:
        self.func = func

    def partition(
        self, topic: str, key: bytes | None, partitions: int, available: Sequence[int] | None
    ) -> int:
        """Call the function and validate its partition."""
        try:
            p = self.func(topic, key, partitions, available)
        except PartitionerError:
            raise
        except Exception as exc:
            raise PartitionerError(
                f"partitioner {self.func!r} failed for topic {topic!r}: {exc!r}"
            ) from exc
        if type(p) is not int or not 0 <= p < partitions:
            raise PartitionerError(
                f"partitioner {self.func!r} returned {p!r} for topic {topic!r}, "
                f"which has partitions 0..{partitions - 1}"
            )
        return p

    def on_new_batch(self, topic: str, previous: int | None = None) -> None:
        """Nothing to do: the function keeps its own state."""


def sticky_for_null_keys(partitioner: object) -> bool:
    """Whether ``partitioner`` keeps null-key records on one partition until ``on_new_batch``.

    True for :class:`UniformStickyPartitioner` and for the keyed partitioners
    with their default sticky fallback. The producer then remembers the
    chosen partition per topic and skips the partitioner for null keys
    until the batch is sealed (the hot path's biggest saving).
    """
    if type(partitioner) is UniformStickyPartitioner:
        return True
    if isinstance(partitioner, _KeyedPartitioner):
        return not partitioner._hash_null and type(partitioner._null) is UniformStickyPartitioner
    return False


PARTITIONER_NAMES: dict[str, Callable[[], Partitioner]] = {
    "murmur2": Murmur2Partitioner,
    "murmur2_random": Murmur2Partitioner,
    "fnv1a": Fnv1aPartitioner,
    "fnv1a_random": Fnv1aPartitioner,
    "crc32": Crc32Partitioner,
    "consistent": Crc32Partitioner,
    "consistent_random": Crc32Partitioner,
    "round_robin": RoundRobinPartitioner,
    "random": RandomPartitioner,
    "sticky": UniformStickyPartitioner,
    "manual": ManualPartitioner,
}
"""Config names and what they build; the keyed ones send null keys to a sticky partition."""

DEFAULT_PARTITIONER = "murmur2"


def partitioner_from_config(value: str | Partitioner | PartitionerFunc | None) -> Partitioner:
    """Build the partitioner a ``partitioner`` config value names.

    ``value`` is a name from :data:`PARTITIONER_NAMES` (case-insensitive;
    ``None`` means ``"murmur2"``), an object with a ``partition`` method
    (used as is), or a function ``(topic, key, partitions, available) -> int``
    (wrapped in a :class:`CallablePartitioner`, which checks its results).

    Raises:
        ConfigError: an unknown name, or a value of another type.
    """
    if value is None:
        value = DEFAULT_PARTITIONER
    if isinstance(value, str):
        factory = PARTITIONER_NAMES.get(value.strip().lower())
        if factory is None:
            raise ConfigError(
                f"unknown partitioner {value!r}; expected one of "
                f"{', '.join(PARTITIONER_NAMES)} or a callable"
            )
        return factory()
    if isinstance(value, (bytes, bytearray)):  # these have a .partition method too
        raise ConfigError(f"partitioner name must be a str, not {type(value).__name__}")
    if isinstance(value, Partitioner):
        return value
    if callable(value):
        return CallablePartitioner(value)
    raise ConfigError(f"partitioner must be a name or a callable, not {type(value).__name__}")


__all__ = [
    "DEFAULT_PARTITIONER",
    "PARTITIONER_NAMES",
    "CallablePartitioner",
    "Crc32Partitioner",
    "Fnv1aPartitioner",
    "ManualPartitioner",
    "Murmur2Partitioner",
    "Partitioner",
    "PartitionerError",
    "PartitionerFunc",
    "RandomPartitioner",
    "RoundRobinPartitioner",
    "UniformStickyPartitioner",
    "partitioner_from_config",
    "sticky_for_null_keys",
]
