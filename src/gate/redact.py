"""Secrets out of everything rag-gate prints or writes: a redactor that knows the encodings a leak would use.

The first defence is that the pipeline never receives a secret (:mod:`gate.sandbox`). This is the second: text that
comes from the pipeline (answers, retrieved chunks, error messages, its stderr) and every message rag-gate prints
passes through a :class:`Redactor`, which replaces each secret with ``***`` in any of these forms:

- plain text, also with up to three separator characters between letters (``g h s _ 1 2 3``) and reversed;
- URL (percent) encoding, any mix of literal characters and ``%XX`` escapes, either case;
- hexadecimal (either case, optionally with ``0x`` / ``\\x`` prefixes or separators between bytes);
- base64, standard and URL-safe alphabets, at each of the three byte alignments: the base64 of a longer text that
  contains the secret holds one of these fragments too (the technique of the GitHub Actions runner's masker). The
  whole base64 run that holds a fragment is masked: masking the fragment alone leaves characters around it from
  which a repetitive secret can still be decoded.

Secrets are values of at least :data:`MIN_SECRET_LENGTH` characters (shorter values would blank out ordinary text).

Source: RFC 4648 (base64, base16), RFC 3986 §2.1 (percent-encoding); GitHub Actions runner ``SecretMasker``
(base64 variants of registered secrets).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import Any

MASK = "***"
"""What a secret is replaced with (the Actions runner's mask)."""
MIN_SECRET_LENGTH = 8
"""Values shorter than this are not treated as secrets (characters)."""
SECRET_NAMES = (
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "RAG_GATE_CACHE_KEY",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
)
"""Variables that always hold secrets (the GitHub token, the cache signing key, the runner's own tokens)."""
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|API_?KEY|PRIVATE_?KEY|ACCESS_?KEY|CREDENTIAL|AUTH|_KEY$|^KEY$", re.I)
"""A variable whose name matches this is treated as a secret (``OPENAI_API_KEY``, ``INPUT_GITHUB-TOKEN``, ...)."""
AUTHORIZATION = re.compile(
    r"""(\b(?:proxy-)?authori[sz]ation\b["']?\s*[:=]\s*["']?)((?:basic|bearer|token|digest)\s+)?[^\s"',;}\]]+""", re.I
)
"""An ``Authorization`` header and its value, as a server or proxy may echo it in an error body: the value is
masked whether or not it is a known secret."""
_SEPARATOR = r"(?:[^\w%]|_){0,3}"
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")
"""A run of base64 characters (both alphabets, RFC 4648 §4 and §5) with its padding."""
_HEX_SEPARATOR = r"[\s:,-]{0,2}"


def secret_values(environ: Mapping[str, str], names: Iterable[str] = ()) -> list[str]:
    """The values in ``environ`` that are secrets.

    Those of :data:`SECRET_NAMES`, of ``names``, and of every variable whose name looks like a secret
    (:data:`SECRET_NAME`), when at least :data:`MIN_SECRET_LENGTH` characters long.

    Args:
        environ: variable name → value (``os.environ``).
        names: more variable names whose values are secrets (e.g. the judge's ``api_key_env``).

    Returns:
        Distinct secret values, longest first.
    """
    wanted = set(SECRET_NAMES) | set(names)
    found = {v for k, v in environ.items() if (k in wanted or SECRET_NAME.search(k)) and len(v) >= MIN_SECRET_LENGTH}
    return sorted(found, key=lambda v: (-len(v), v))


def _nibble(n: int) -> str:
    """A regex for one hex digit, either case."""
    return f"[{n:X}{n:x}]" if n > 9 else str(n)


def _percent(c: str) -> str:
    """``c`` percent-encoded (its UTF-8 bytes as ``%XX``, hex digits in either case)."""
    return "".join(f"%{_nibble(b >> 4)}{_nibble(b & 15)}" for b in c.encode("utf-8"))


def _char(c: str) -> str:
    """A regex for one character, literal or percent-encoded (``+`` for a space too)."""
    return f"(?:{re.escape(c)}|{_percent(c)}{'|[+]' if c == ' ' else ''})"


def _forms(value: str) -> list[str]:
    """Regexes for ``value`` as text and as hex bytes.

    Text: plain, letter-spaced, percent-encoded. Hex: either case, optionally ``0x``/``\\x``-prefixed or separated.

    Every regex starts with a literal character, so that the alternation of all of them lets the regex engine
    skip, in C, to the positions where one can start.
    """
    rest = "".join(_SEPARATOR + _char(c) for c in value[1:])
    forms = [re.escape(value[0]) + rest, _percent(value[0]) + rest]
    data = value.encode("utf-8")
    rest_hex = "".join(f"{_HEX_SEPARATOR}(?:0x|\\\\x)?{_nibble(b >> 4)}{_nibble(b & 15)}" for b in data[1:])
    high, low = data[0] >> 4, data[0] & 15
    for first in sorted({f"{high:x}", f"{high:X}"}):
        forms.append(f"{first}{_nibble(low)}{rest_hex}")
    forms += [f"0x{_nibble(high)}{_nibble(low)}{rest_hex}", f"\\\\x{_nibble(high)}{_nibble(low)}{rest_hex}"]
    return forms


def base64_fragments(secret: str) -> set[str]:
    """The base64 characters that encode ``secret`` alone, wherever it sits in a longer text.

    For each alignment ``i`` in 0, 1, 2 (bytes before the secret, modulo 3) and each alphabet (RFC 4648 §4 and §5),
    the characters ``ceil(8i/6)`` to ``floor(8(i+n)/6)`` of ``base64(i bytes + secret)`` depend on the secret's
    ``n`` bytes only, so they appear in the base64 of any text that contains the secret at that alignment.

    Args:
        secret: the secret (UTF-8 encoded before encoding).

    Returns:
        Up to six non-empty fragments.
    """
    data = secret.encode("utf-8")
    found = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data + b"\0\0\0").decode("ascii")
        start, stop = -(-8 * offset // 6), 8 * (offset + len(data)) // 6
        fragment = encoded[start:stop]
        if fragment:
            found |= {fragment, fragment.replace("+", "-").replace("/", "_")}
    return found


class Redactor:
    """Replace known secrets, in every encoding listed in the module docstring, by :data:`MASK`.

    Args:
        secrets: the secret values; values shorter than :data:`MIN_SECRET_LENGTH` are ignored.
    """

    def __init__(self, secrets: Iterable[str] = ()):
        self.secrets: tuple[str, ...] = tuple(sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}))

    @classmethod
    def from_environ(
        cls, environ: Mapping[str, str], names: Iterable[str] = (), extra: Iterable[str | None] = ()
    ) -> Redactor:
        """A redactor for the secrets of ``environ`` (see :func:`secret_values`) plus ``extra`` values."""
        return cls([*secret_values(environ, names), *(s for s in extra if s)])

    def __bool__(self) -> bool:
        return bool(self.secrets)

    @cached_property
    def _compiled(self) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
        """(one regex of the base64 fragments, one of the text and hex forms of every secret and of its reverse)."""
        fragments: set[str] = set()
        forms: list[str] = []
        for secret in self.secrets:
            for value in (secret, secret[::-1]):
                fragments |= base64_fragments(value)
                forms += _forms(value)
        if not forms:
            return None, None
        return re.compile("|".join(map(re.escape, sorted(fragments, key=len, reverse=True)))), re.compile(
            "|".join(forms)
        )

    def __call__(self, text: str) -> str:
        """``text`` with every secret, in any known encoding, and every echoed ``Authorization`` value masked."""
        if not text:
            return text
        text = AUTHORIZATION.sub(lambda m: m.group(1) + (m.group(2) or "") + MASK, text)
        fragments, pattern = self._compiled
        if fragments is None or pattern is None:
            return text
        if fragments.search(text):
            text = _BASE64_RUN.sub(lambda run: MASK if fragments.search(run[0]) else run[0], text)
        return pattern.sub(MASK, text)

    def redact(self, value: Any) -> Any:
        """Redact every string in a JSON-like value (dict keys and values, lists, strings); others unchanged."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {self.redact(k): self.redact(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.redact(v) for v in value]
        return value
