"""Throwaway servers for development: moto's S3 server, a single-node Ceph RADOS Gateway and a
PostgreSQL server, each started on a free loopback port and removed afterwards.

The test suite, the benchmarks and the examples (``make demo``, ``make tour``) share them; this
package imports nothing of theirs (``tests/test_import_rules.py`` checks that examples/ and
bench/ never import tests/).
"""
