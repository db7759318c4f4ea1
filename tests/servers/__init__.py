"""Fakes the tests talk to over the network (a Pulsar broker that records what the official
client sends). The real servers (moto, Ceph RGW, PostgreSQL) are in ``devservers``."""
