"""Drop-in APIs for code written against other Kafka clients, on pykaf's sync facade.

- ``from pykaf.compat import kafka``: kafka-python's names (``KafkaProducer``,
  ``KafkaConsumer``, ``KafkaAdminClient``, ``kafka.errors``);
- ``from pykaf.compat import confluent_kafka``: confluent-kafka's names;
- ``from pykaf.compat import aiokafka``: aiokafka's names, on :mod:`pykaf.aio`.

See ``docs/migrating.md``.
"""
