"""The package version (one place; the package, the reports and the editions read it)."""

__version__ = "0.1.0"
