"""Pure codecs for Apache Pulsar's tiered-storage objects (jcloud offloader, index v1).

Bytes or memoryviews in, values out: nothing here performs I/O or imports boto3, sqlite3 or
click. See ``spec/`` for the byte format these modules implement.
"""

#: the codecs are imported from their modules (``formats.block``, ``formats.index``,
#: ``formats.extension``...) and packages (``formats.pulsar``, ``formats.kafka``,
#: ``formats.transform``); the package itself re-exports nothing
__all__: list[str] = []
