"""Pure codecs for Apache Pulsar's tiered-storage objects (jcloud offloader, index v1).

Bytes or memoryviews in, values out: nothing here performs I/O or imports boto3, sqlite3 or
click. See ``spec/`` for the byte format these modules implement.
"""
