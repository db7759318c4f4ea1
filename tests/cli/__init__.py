"""Tests of the ``offloader`` command line (click's CliRunner)."""
