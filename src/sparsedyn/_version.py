"""The version of sparsedyn (one place: the package facade and the build cache keys read it)."""

__version__ = "0.1.0"
