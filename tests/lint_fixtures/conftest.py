"""The files here are code for the linter to read, never tests to run (some are named like
test modules on purpose: the linter judges test code differently)."""

collect_ignore_glob = ["*.py", "recall/*.py"]
