"""Pure codecs for Kafka log data: record batches (magic 2), segment indexes, file names.

Bytes in, values out: nothing here performs I/O or imports boto3, sqlite3, click, pyspark or
the ``offloader`` package. :mod:`formats.kafka.batch` decodes record batches (CRC32C checked,
every codec of :mod:`formats.kafka.codecs`), :mod:`formats.kafka.encode` writes them,
:mod:`formats.kafka.index` reads and builds ``.index`` / ``.timeindex`` files by Kafka's rule and
:mod:`formats.kafka.names` owns segment, directory and remote object names. Errors are the
:mod:`formats.kafka.errors` classes (part of the project's one tree). ``spec/kafka-segments.md``
writes the layouts down.
"""

#: nothing is re-exported: import the module that owns what you need (``formats.kafka.batch``...)
__all__: list[str] = []
