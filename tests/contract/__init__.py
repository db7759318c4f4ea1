"""Contract suites: one set of tests that every backend of a Protocol must pass."""
