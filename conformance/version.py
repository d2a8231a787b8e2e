"""The kit's version, written in one place.

pyproject.toml reads it from here (without importing the package), and reports carry it without
asking the installed distribution, which costs 3 ms and knows nothing in a source tree that was
never installed. A leaf, so that every floor may name it."""

__version__ = "0.1.0"
