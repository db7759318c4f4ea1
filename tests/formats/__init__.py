"""Tests of the pure codecs in ``formats/``: golden, property, corruption and spec vectors."""
