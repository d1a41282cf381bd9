"""The current version of profctl: one home, read by the package, the run store and the CLI."""

__version__ = "0.3.0"
