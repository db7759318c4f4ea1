"""Topics as managed ledgers, and the work done over their ledgers.

Owns :class:`ManagedLedger` (a topic's ledger list: produce, rollover, trim), the per-topic
writer lock, and the tasks over a topic's closed ledgers (``tasks``: offload-prefix,
threshold-driven auto-offload, deletion after the deletion lag, retention, topic deletion,
sweeping leftovers), which call the offload path one ledger at a time.

May import: ``formats``, the value modules, ``store``, ``metadata``, ``ledgers``, ``runtime``,
``offload`` and ``read``. Must not import ``spark``, ``api`` or ``service``.
"""

from offloader.errors import TopicBusy
from offloader.topics import tasks
from offloader.topics.lock import topic_write_lock
from offloader.topics.managed_ledger import ManagedLedger, ProduceOutcome

__all__ = ["ManagedLedger", "ProduceOutcome", "TopicBusy", "tasks", "topic_write_lock"]
