"""The documentation site's generators: the pages ``make docs`` writes at build time from the
code and the benchmark results (the CLI reference from the click tree, the configuration
reference from the settings tables, the performance page from ``bench/results/*.json``), and
the MkDocs hook (:mod:`docsgen.hooks`) that adds them, with the repository's ``spec/*.md``,
``ARCHITECTURE.md`` and ``CHANGELOG.md``, to the site. Nothing generated is committed, so the
pages cannot drift from what they describe."""
