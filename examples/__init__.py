"""Runnable examples: the end-to-end demo (``python -m examples.demo``) and the Spark job."""
