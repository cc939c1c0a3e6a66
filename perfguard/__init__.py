"""perfguard: guard compute kernels against performance regressions with simulators."""

# The one place the version is written: pyproject.toml reads it, every baseline, model, dataset and
# report records it, and the messages that refuse a file of a newer format name it. The scheme and
# the release step: docs/development.md, "Versions and releases"; what changed: CHANGELOG.md.
__version__ = "0.2.0"
