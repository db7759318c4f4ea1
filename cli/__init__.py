"""The ``offloader`` command (click): ``cli.main:main`` is the console script; each command
group is a module beside it (``topics``, ``namespaces``, ``objects``, ``kafka``, ``service``...).

Thin: parse, call :mod:`offloader.api`, render text or JSON. Nothing is meant to be imported
from the package itself, so its public surface is empty.
"""

__all__: list[str] = []
