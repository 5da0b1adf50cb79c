"""rag-gate: a regression gate for RAG systems on pull requests."""

__version__ = "0.1.0"

__all__ = ["__version__"]
