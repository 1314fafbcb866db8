"""polang's version, at the bottom of the layers: the HTTP client's ``User-Agent`` names it
and ``polang.__version__`` re-exports it (pyproject.toml's version is the same)."""

__version__ = "0.1.0"
