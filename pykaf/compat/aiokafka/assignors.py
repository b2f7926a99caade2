"""aiokafka's assignor classes (``aiokafka.coordinator.assignors``), each naming pykaf's own.

``partition_assignment_strategy`` takes these classes (or instances); each
becomes the pykaf assignor of the same protocol name, which computes the same
kind of assignment and interoperates with other clients' members. An
assignor class of one's own (a subclass of :class:`AbstractPartitionAssignor`
with its own ``assign``) is refused: pykaf's group runs its own assignors
(:class:`pykaf.Assignor`).
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

from pykaf.compat.aiokafka.errors import KafkaConfigurationError


class AbstractPartitionAssignor(abc.ABC):
    """The base of aiokafka's assignors; the shim reads only ``name``."""

    name: ClassVar[str]


class RangePartitionAssignor(AbstractPartitionAssignor):
    """Kafka's ``range`` assignor (pykaf's :class:`pykaf.RangeAssignor`)."""

    name = "range"


class RoundRobinPartitionAssignor(AbstractPartitionAssignor):
    """Kafka's ``roundrobin`` assignor (pykaf's :class:`pykaf.RoundRobinAssignor`)."""

    name = "roundrobin"


class StickyPartitionAssignor(AbstractPartitionAssignor):
    """Kafka's ``sticky`` assignor (pykaf's :class:`pykaf.StickyAssignor`)."""

    name = "sticky"


_OURS = (RangePartitionAssignor, RoundRobinPartitionAssignor, StickyPartitionAssignor)


def assignor_names(strategy: Any) -> tuple[str, ...]:
    """The pykaf ``assignors`` option for ``partition_assignment_strategy``.

    Raises:
        KafkaConfigurationError: an entry that is not one of this module's classes.
    """
    entries = strategy if isinstance(strategy, (list, tuple)) else (strategy,)
    names = []
    for entry in entries:
        cls = entry if isinstance(entry, type) else type(entry)
        if not issubclass(cls, _OURS):
            raise KafkaConfigurationError(
                f"partition_assignment_strategy: {entry!r} is not supported; pykaf runs its own "
                "assignors (RangePartitionAssignor, RoundRobinPartitionAssignor, "
                "StickyPartitionAssignor)"
            )
        names.append(cls.name)
    if not names:
        raise KafkaConfigurationError("partition_assignment_strategy is empty")
    return tuple(names)


__all__ = [
    "AbstractPartitionAssignor",
    "RangePartitionAssignor",
    "RoundRobinPartitionAssignor",
    "StickyPartitionAssignor",
]
