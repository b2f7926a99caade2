"""The blocking facades behind ``pykaf.sync``: the producer and the consumers."""
