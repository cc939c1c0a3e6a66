"""perfguard: guard compute kernels against performance regressions with simulators."""

__version__ = "0.1.0"
