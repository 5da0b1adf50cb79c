"""The redactor: every encoding of a secret a leaking pipeline might use is masked, ordinary text is left alone."""

from __future__ import annotations

import base64
import string
import urllib.parse

from helpers import readable_form
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.redact import MASK, Redactor, base64_fragments, secret_values

TOKEN = "ghs_dummytoken123"

secrets = st.text(alphabet=string.ascii_letters + string.digits + "_-.", min_size=8, max_size=60)
noise = st.text(max_size=40)


def encodings(secret: str, prefix: str, suffix: str) -> dict[str, str]:
    """The leaks of ``secret`` embedded between ``prefix`` and ``suffix``, one per encoding."""
    raw = (prefix + secret + suffix).encode()
    return {
        "plain": prefix + secret + suffix,
        "reversed": suffix[::-1] + secret[::-1] + prefix[::-1],
        "letter-spaced": " ".join(secret),
        "base64": base64.b64encode(raw).decode(),
        "base64 urlsafe": base64.urlsafe_b64encode(raw).decode(),
        "base64 of reversed": base64.b64encode(secret[::-1].encode()).decode(),
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
        "hex bytes": " ".join(f"0x{b:02x}" for b in secret.encode()),
        "url": urllib.parse.quote(prefix + secret + suffix, safe=""),
        "url every byte": "".join(f"%{b:02X}" for b in secret.encode()),
        "url plus": urllib.parse.quote_plus(secret),
    }


@settings(max_examples=150, deadline=None)
@given(secret=secrets, prefix=noise, suffix=noise)
def test_no_encoding_of_the_secret_survives(secret, prefix, suffix):
    redact = Redactor([secret])
    for name, leak in encodings(secret, prefix, suffix).items():
        assert readable_form(secret, leak), name  # the oracle sees the secret before redaction
        masked = redact(f"answer: {leak} (end)")
        assert MASK in masked, name
        assert not readable_form(secret, masked.removeprefix("answer: ").removesuffix(" (end)")), (name, masked)


@settings(max_examples=100, deadline=None)
@given(text=st.text(alphabet=string.printable, max_size=300))
def test_text_without_the_secret_is_unchanged(text):
    assert Redactor([TOKEN, "sk-dummyjudgekey456"])(text) == text


def test_known_leaks_of_the_case_are_masked():
    hidden = base64.b64encode(TOKEN[::-1].encode()).decode() + " " + " ".join(TOKEN)
    assert Redactor([TOKEN])(f"Sorry. Debug: {hidden}") == f"Sorry. Debug: {MASK} {MASK}"


def test_a_repetitive_secret_cannot_be_decoded_from_what_is_left_around_its_mask():
    """The base64 of "\\x80" + 18 zeros holds the 9-zero secret at ten offsets: masking one fragment left "w" and
    "MDAwMDAwMDA=", which decode together (base64 decoders skip the mask) to the secret again."""
    secret = "0" * 9
    leak = base64.b64encode(("\x80" + secret * 2).encode()).decode()
    masked = Redactor([secret])(f"answer: {leak} (end)")
    assert masked == f"answer: {MASK} (end)"
    assert not readable_form(secret, masked)


def test_base64_fragments_cover_every_alignment():
    fragments = base64_fragments(TOKEN)
    for offset in range(3):
        encoded = base64.b64encode(b"x" * offset + TOKEN.encode() + b"yz").decode()
        assert any(f in encoded for f in fragments), offset
    assert len({f for f in fragments if "-" not in f and "_" not in f}) == 3


def test_short_values_and_ordinary_variables_are_not_secrets():
    environ = {
        "GITHUB_TOKEN": TOKEN,
        "OPENAI_API_KEY": "sk-dummyjudgekey456",
        "INPUT_GITHUB-TOKEN": TOKEN,
        "MY_PASSWORD": "hunter22hunter",
        "JUDGE_CREDS": "credentials-value",
        "HOME": "/home/someone-with-a-long-name",
        "SHORT_TOKEN": "abc",
    }
    assert secret_values(environ) == ["sk-dummyjudgekey456", "ghs_dummytoken123", "hunter22hunter"]
    assert "credentials-value" in secret_values(environ, ["JUDGE_CREDS"])
    redact = Redactor.from_environ(environ)
    assert redact("/home/someone-with-a-long-name abc") == "/home/someone-with-a-long-name abc"
    assert redact.redact({"a": [TOKEN, 3, None], TOKEN: "x"}) == {"a": [MASK, 3, None], MASK: "x"}
    assert not Redactor(["short"]) and Redactor(["short"])("short") == "short"
