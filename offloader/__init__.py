"""ledger-offloader's engine: object stores, metadata, local ledgers, offload and read paths."""

__all__ = ["__version__"]

__version__ = "0.1.0"
