"""The secrets of one ``rag-gate pr`` run, read once from the environment at the command line's edge.

``GITHUB_TOKEN`` (the comment, the history branch), ``--github-token`` (local runs only) and ``RAG_GATE_CACHE_KEY``
(the base cache's signing key) are read here and nowhere else; the steps of :mod:`gate.pr.flow` get this object.
Its ``repr`` names which secrets are set, never their values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gate.pr.cache import SIGNING_KEY_VAR

TOKEN_VAR = "GITHUB_TOKEN"
"""The variable the action passes the workflow token in."""


@dataclass(frozen=True)
class Credentials:
    """The run's secrets (None: not given); never printed."""

    github_token: str | None = field(default=None, repr=False)
    """``GITHUB_TOKEN``: the token to comment with and to read and append the history branch."""
    flag_token: str | None = field(default=None, repr=False)
    """``--github-token``: the token for local runs (ignored in Actions: :func:`gate.pr.trust.github_token`)."""
    cache_key: str | None = field(default=None, repr=False)
    """``RAG_GATE_CACHE_KEY``: the key that signs and verifies base cache entries (:func:`gate.pr.cache.signing_key`).
    """

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], flag_token: str | None = None) -> Credentials:
        """Read the secrets from ``environ`` (``os.environ``); empty values are unset.

        Args:
            environ: rag-gate's environment.
            flag_token: ``--github-token`` as given (None or empty: not given).
        """
        return cls(environ.get(TOKEN_VAR) or None, flag_token or None, environ.get(SIGNING_KEY_VAR) or None)

    def github(self, in_actions: bool) -> str | None:
        """The token for GitHub: the comment's and the history branch's.

        In GitHub Actions ``GITHUB_TOKEN`` only (a command line is visible to every process of the job); locally
        ``--github-token`` before ``GITHUB_TOKEN``.

        Args:
            in_actions: whether rag-gate runs in GitHub Actions (:attr:`gate.pr.github.GithubContext.in_actions`).
        """
        return self.github_token if in_actions else self.flag_token or self.github_token

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every secret that is set, for the redactors."""
        return tuple(s for s in (self.flag_token, self.github_token, self.cache_key) if s)

    def __repr__(self) -> str:
        """Which secrets are set (``set`` / ``unset``), never their values."""
        shown = {"github_token": self.github_token, "flag_token": self.flag_token, "cache_key": self.cache_key}
        return "Credentials(" + ", ".join(f"{k}={'set' if v else 'unset'}" for k, v in shown.items()) + ")"
