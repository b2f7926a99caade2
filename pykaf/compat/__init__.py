"""Drop-in APIs for code written against other Kafka clients, on :mod:`pykaf.sync`.

``from pykaf.compat import confluent_kafka`` gives confluent-kafka's names
(``Producer``, ``Consumer``, ``Message``, ``TopicPartition``, ``KafkaError``,
``KafkaException``, ``admin.AdminClient``) with its librdkafka-style
configuration dictionaries; see ``docs/migrating.md``.
"""
