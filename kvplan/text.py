"""Strings from outside, made safe to show: `scrub` removes secrets, `escape` neutralises control characters.

Every renderer and every writer of kvplan's output goes through these two functions (the consoles and
`kvplan.files.write_output` apply `scrub` to all they write; renderers apply `escape` to each string that
came from a user's file, flag or server: plan deployment names, GPU names, served model names, log lines).
"""
from __future__ import annotations

import os
import re
import unicodedata

REDACTED = "***"

# The secrets vLLM can log: its `non-default args` dict and the command line hold `hf_token` and `api_key`;
# any URL may carry `user:password@`; a Hugging Face token has the form hf_… wherever it appears.
_KEYED_SECRET = re.compile(
    r"""(?ix)
    ( (?:["']?)(?:hf[_-]?token|hugging[_-]?face[_-]?hub[_-]?token|api[_-]?key|access[_-]?token|password|secret)
      ["']? \s* [:=] \s* (?:b?["'])? )
    ( [^\s"',}\]]+ )""")
_FLAG_SECRET = re.compile(r"(?i)(--(?:hf-token|api-key|access-token|password)(?:\s+|=))([^\s\"',}\]-][^\s\"',}\]]*)")
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@'\"]+@")
_HF_TOKEN = re.compile(r"\bhf_[A-Za-z0-9]{20,}\b")
_TOKEN_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def scrub(text: str) -> str:
    """`text` without secrets: values of hf_token / api_key (and like keys or flags), URL credentials,
    Hugging Face tokens and the current $HF_TOKEN value each become `***`."""
    for var in _TOKEN_ENV:
        token = os.environ.get(var)
        if token and len(token) >= 4 and token in text:
            text = text.replace(token, REDACTED)
    if not any(c in text for c in ":=@_-"):
        return text
    text = _KEYED_SECRET.sub(lambda m: m.group(1) + REDACTED, text)
    text = _FLAG_SECRET.sub(lambda m: m.group(1) + REDACTED, text)
    text = _URL_CREDENTIALS.sub(lambda m: m.group(1) + REDACTED + "@", text)
    return _HF_TOKEN.sub("hf_" + REDACTED, text)


# Format characters that reorder or hide text (bidirectional overrides and isolates, Trojan Source).
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def _escaped(ch: str) -> str:
    return ascii(ch)[1:-1]


def escape(text: object, *, keep_newlines: bool = False) -> str:
    """`text` as inert characters for a terminal, a JUnit file or a GitHub annotation: each control
    character (ESC, BEL, CR, LF, DEL, C1…) and each bidirectional override becomes its escape (`\\x1b`), so
    a name from outside can neither move the cursor, clear the screen, set the window title nor reorder
    the line. Printable text, including non-ASCII letters, is unchanged; `keep_newlines` keeps line ends."""
    s = str(text)
    if s.isprintable():
        return s
    if keep_newlines:
        return "\n".join(escape(line) for line in s.split("\n"))
    return "".join(_escaped(ch) if unicodedata.category(ch) == "Cc" or ch in _BIDI else ch for ch in s)
