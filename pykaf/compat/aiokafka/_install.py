"""``install()``: pykaf's shim under aiokafka's module names, for code one cannot edit.

A framework that imports ``aiokafka`` itself (FastStream, ...) runs on
pykaf once ``install()`` has put the shim's modules in ``sys.modules`` under
aiokafka's names, before the framework is imported.
"""

from __future__ import annotations

import sys
from types import ModuleType


def _modules() -> dict[str, ModuleType]:
    from pykaf.compat import aiokafka
    from pykaf.compat.aiokafka import (
        abc,
        admin,
        assignors,
        consumer,
        errors,
        partitioner,
        producer,
        structs,
    )

    return {
        "aiokafka": aiokafka,
        "aiokafka.abc": abc,
        "aiokafka.admin": admin,
        "aiokafka.admin.client": admin,
        "aiokafka.admin.config_resource": admin,
        "aiokafka.admin.new_partitions": admin,
        "aiokafka.admin.new_topic": admin,
        "aiokafka.admin.records_to_delete": admin,
        "aiokafka.consumer": consumer,
        "aiokafka.consumer.consumer": consumer,
        "aiokafka.coordinator": assignors,
        "aiokafka.coordinator.assignors": assignors,
        "aiokafka.coordinator.assignors.abstract": assignors,
        "aiokafka.coordinator.assignors.range": assignors,
        "aiokafka.coordinator.assignors.roundrobin": assignors,
        "aiokafka.coordinator.assignors.sticky": assignors,
        "aiokafka.errors": errors,
        "aiokafka.partitioner": partitioner,
        "aiokafka.producer": producer,
        "aiokafka.producer.producer": producer,
        "aiokafka.structs": structs,
    }


def install() -> None:
    """Make ``import aiokafka`` (and its submodules) give pykaf's shim from now on.

    Call it before importing the code that imports aiokafka; a module that
    imported the real aiokafka already keeps it.

    Raises:
        RuntimeError: the real aiokafka is imported already.
    """
    found = sys.modules.get("aiokafka")
    modules = _modules()
    if found is not None and found is not modules["aiokafka"]:
        raise RuntimeError(
            "the real aiokafka is imported already: call "
            "pykaf.compat.aiokafka.install() before anything imports aiokafka"
        )
    sys.modules.update(modules)
    # Attribute paths such as ``aiokafka.admin.client.AIOKafkaAdminClient``.
    for name, module in modules.items():
        parent, _, child = name.rpartition(".")
        if parent and not hasattr(modules[parent], child):
            setattr(modules[parent], child, module)


__all__ = ["install"]
