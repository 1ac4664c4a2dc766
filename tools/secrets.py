"""One way to keep secrets in: mask every configured secret, and any piece of one.

A `Redactor` is built from the secrets a settings object holds (every `SecretStr`
field, so a secret added later is covered without a change here). It masks any run of
`MIN_FRAGMENT` or more characters of a secret, as written, URL-encoded, JSON-escaped,
base64-encoded (at any alignment: a `Basic` header encodes `user:key`) or in hex:
upstreams echo credentials whole, cut by a validator, inside a quoted value or encoded.
Every layer uses it: tool results before they enter the history, events before they
are logged or sent, error bodies, thread views and every log record.

A text that arrives in pieces (a streamed answer, a tool call's arguments) goes through
a `StreamMasker`, which holds back the end of what it has seen for as long as it could
still be the start of a secret, so a secret split across pieces is masked whole.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import quote

from pydantic import BaseModel, SecretStr

MASK = "***"
# Keys whose values are identifiers (of threads, runs, messages, tool calls,
# interrupts), never free text: a client chose or was given them, and a thread id that
# happens to share eight characters with a key must come back as it was sent.
IDENTIFIER_KEYS = frozenset(
    {
        "id",
        "threadId",
        "runId",
        "parentRunId",
        "messageId",
        "parentMessageId",
        "toolCallId",
        "interruptId",
        "thread_id",
        "run_id",
    }
)
MIN_FRAGMENT = 8
# A secret shorter than a fragment is masked only where it appears whole, and only
# from this length on: masking every "ab" would garble ordinary text.
MIN_WHOLE = 4


def secrets_of(settings: BaseModel) -> list[str]:
    """The values of every `SecretStr` field of `settings` that is set, nested models'
    (a database URL's password) and tuples of them (an MCP config's) included."""
    found: list[str] = []
    for name in type(settings).model_fields:
        value = getattr(settings, name, None)
        if isinstance(value, SecretStr) and value.get_secret_value().strip():
            found.append(value.get_secret_value())
        elif isinstance(value, BaseModel):
            found.extend(secrets_of(value))
        elif isinstance(value, tuple):  # a list of secrets (an MCP config's)
            found.extend(
                item.get_secret_value()
                for item in value
                if isinstance(item, SecretStr) and item.get_secret_value().strip()
            )
    return found


def redactor_for(settings: BaseModel) -> Redactor:
    """The (cached) redactor of the secrets `settings` hold."""
    return _redactor(tuple(sorted(secrets_of(settings))))


@lru_cache(maxsize=8)
def _redactor(secrets: tuple[str, ...]) -> Redactor:
    return Redactor(secrets)


class Redactor:
    """Masks `secrets` and their fragments in text; a no-op when there are none."""

    def __init__(self, secrets: Iterable[str]) -> None:
        forms: set[str] = set()
        whole: set[str] = set()
        for secret in secrets:
            secret = secret.strip()
            if len(secret) < MIN_WHOLE:
                continue
            variants = {secret, quote(secret, safe=""), json.dumps(secret)[1:-1]}
            (forms if len(secret) >= MIN_FRAGMENT else whole).update(variants)
            forms.update(form for form in _encoded(secret) if len(form) >= MIN_FRAGMENT)
        self._forms = sorted(forms, key=len, reverse=True)
        grams = {form[i : i + MIN_FRAGMENT] for form in forms for i in range(len(form) - 7)}
        needles = grams | whole
        self._pattern = re.compile(_trie_pattern(needles)) if needles else None
        # What a text's end must be to be the start of a secret still to come.
        self._starts = {needle[:k] for needle in needles for k in range(1, len(needle))}

    def __bool__(self) -> bool:
        return self._pattern is not None

    def found(self, text: str) -> bool:
        """Whether `text` holds a secret or a fragment of one (a cheap first check)."""
        return self._pattern is not None and self._pattern.search(text) is not None

    def __call__(self, text: str) -> str:
        """`text` with every secret fragment replaced by MASK."""
        if self._pattern is None or not text or self._pattern.search(text) is None:
            return text
        return _masked(text, self._covered(text))

    def _covered(self, text: str) -> bytearray:
        """1 for each character of `text` that belongs to a secret, else 0."""
        covered = bytearray(len(text))
        if self._pattern is None:
            return covered
        for match in self._pattern.finditer(text):
            start, end = match.span()
            covered[start:end] = b"\x01" * (end - start)
            self._extend(text, match.group(), start, end, covered)
        return covered

    def split(self, text: str) -> tuple[str, str]:
        """(`text`'s start, masked, that no later text can make part of a secret; the
        rest, unmasked, to be seen again with what follows it)."""
        covered = self._covered(text)
        # An end shorter than a fragment may begin a secret not yet in sight: it waits,
        # but only if a secret does begin so (ordinary text is shown at once).
        longest = min(MIN_FRAGMENT - 1, len(text))
        held = next((k for k in range(longest, 0, -1) if text[-k:] in self._starts), 0)
        cut = len(text) - held
        while 0 < cut < len(text) and covered[cut - 1] and covered[cut]:
            cut -= 1  # never inside a secret: it may still go on
        return _masked(text[:cut], covered[:cut]), text[cut:]

    def _extend(self, text: str, piece: str, start: int, end: int, covered: bytearray) -> None:
        """Mark the longest run around text[start:end] that continues a secret."""
        for form in self._forms:
            at = form.find(piece)
            while at != -1:
                left, f = start, at
                while left > 0 and f > 0 and text[left - 1] == form[f - 1]:
                    left, f = left - 1, f - 1
                right, g = end, at + len(piece)
                while right < len(text) and g < len(form) and text[right] == form[g]:
                    right, g = right + 1, g + 1
                covered[left:right] = b"\x01" * (right - left)
                at = form.find(piece, at + 1)

    def value(self, data: object) -> object:
        """`data` (JSON-like: dicts, lists, strings) with every string redacted, but the
        identifiers (`IDENTIFIER_KEYS`): secrets are masked in free text only."""
        if not self:
            return data
        if isinstance(data, str):
            return self(data)
        if isinstance(data, dict):
            return {
                key: item if key in IDENTIFIER_KEYS else self.value(item)
                for key, item in data.items()
            }
        if isinstance(data, list):
            return [self.value(item) for item in data]
        return data


def _masked(text: str, covered: bytearray) -> str:
    """`text` with each run of covered characters replaced by one MASK."""
    out: list[str] = []
    index = 0
    while index < len(text):
        if covered[index]:
            while index < len(text) and covered[index]:
                index += 1
            out.append(MASK)
        else:
            stop = covered.find(1, index)
            stop = len(text) if stop == -1 else stop
            out.append(text[index:stop])
            index = stop
    return "".join(out)


def _encoded(secret: str) -> set[str]:
    """The secret in hex and in base64 (standard and URL-safe), each part of base64 that
    its bytes alone decide, at every alignment it may have inside a longer value."""
    raw = secret.encode()
    forms = {raw.hex(), raw.hex().upper()}
    for offset in range(3):  # bytes before the secret in what was encoded
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(b"\x00" * offset + raw).decode()
            first = -(-offset * 8 // 6)  # the first character all of whose bits are the secret's
            last = (offset + len(raw)) * 8 // 6
            forms.add(text[first:last])
    return forms


class StreamMasker:
    """Masks one text that arrives in pieces, as if it had come whole.

    `feed(piece)` returns what may be shown of it now (perhaps nothing); `flush()` the
    rest, once the text is complete. A secret split across pieces is masked whole.
    """

    def __init__(self, redact: Redactor) -> None:
        self._redact = redact
        self._held = ""

    def feed(self, piece: str) -> str:
        shown, self._held = self._redact.split(self._held + piece)
        return shown

    def flush(self) -> str:
        held, self._held = self._held, ""
        return self._redact(held)


_Trie = dict[str, "_Trie"]


def _trie_pattern(words: Iterable[str]) -> str:
    """One regex matching any of `words`, shared prefixes factored out.

    A flat alternation makes `re` try every word at every position; a trie tries one
    branch per character, which keeps scanning each event cheap on the hot path.
    """
    trie: _Trie = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def pattern(node: _Trie) -> str:
        ends = "" in node
        children = sorted((char, child) for char, child in node.items() if char)
        branches = [re.escape(char) + pattern(child) for char, child in children]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 and not ends else "(?:" + "|".join(branches) + ")"
        # Longest match first: a word that ends here is tried after its longer siblings.
        return body + ("?" if ends else "")

    return pattern(trie)
