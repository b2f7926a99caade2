"""pykaf's benchmarks (pytest-benchmark), measured against peer clients in the same run.

A package so its modules never clash by name with ``tests/`` when both are
collected in one pytest session.
"""
