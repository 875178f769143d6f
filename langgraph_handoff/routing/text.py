"""Text normalisation shared by the rule and the semantic routers.

Routing must not depend on case, accents, Unicode width, Hebrew niqqud or runs of whitespace:
"REFUND", "refund", "réfund" and full-width "ｒｅｆｕｎｄ" are the same request.
"""

from __future__ import annotations

import functools
import re
import unicodedata

_SPACE = re.compile(r"\s+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_HEBREW = re.compile(r"[\u05d0-\u05ea]")


def normalize(text: str) -> str:
    """Casefold, drop combining marks (accents, niqqud), fold compatibility forms, squeeze spaces.

    >>> normalize("  Réfund   ＮＯＷ ")
    'refund now'
    """
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", stripped).casefold()).strip()


def has_cjk(text: str) -> bool:
    """True if ``text`` contains Chinese, Japanese or Korean characters (no spaces between words)."""
    return bool(_CJK.search(text))


def has_hebrew(text: str) -> bool:
    """True if ``text`` contains Hebrew letters (which take one-letter prefixes such as ל, ה, ו)."""
    return bool(_HEBREW.search(text))


_CJK_RUN = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+)")


def char_ngrams(text: str, low: int, high: int, cjk: tuple[int, int] = (1, 2)) -> list[str]:
    """Character n-grams: ``low``..``high`` inside word boundaries (each word padded with one
    space), and ``cjk`` (default 1-2) for runs of Chinese, Japanese or Korean characters.

    CJK text has no spaces and one character often carries a word's meaning (退 "return",
    货 "goods"), so short grams work best there (measured in ``bench/routing.py``: 3-5 grams
    over whole Chinese sentences routed 18 % of held-out Chinese messages correctly, 1-2 grams 63 %).

    >>> char_ngrams("ab", 2, 3)
    [' a', 'ab', 'b ', ' ab', 'ab ']
    >>> char_ngrams("退货", 3, 5)
    ['退', '货', '退货']
    """
    grams: list[str] = []
    for part in _CJK_RUN.split(text):
        if not part:
            continue
        if _CJK_RUN.fullmatch(part):
            for n in range(cjk[0], cjk[1] + 1):
                grams.extend(part[i : i + n] for i in range(len(part) - n + 1))
            continue
        for word in part.split():
            padded = f" {word} "
            for n in range(low, high + 1):
                if n > len(padded):
                    break
                grams.extend(padded[i : i + n] for i in range(len(padded) - n + 1))
    return grams


# Scripts whose characters each carry about a syllable or a word count this many times when
# deciding a text's script, so that "my order 还没到" is Chinese as much as it is English
_DENSE_SCRIPTS = {"cjk": 3, "hangul": 2}
_SCRIPT_OF_NAME = {"CJK": "cjk", "HIRAGANA": "cjk", "KATAKANA": "cjk", "HANGUL": "hangul"}


@functools.lru_cache(maxsize=4096)
def _letter_script(ch: str) -> str:
    name = unicodedata.name(ch, "")
    head = name.split(" ", 1)[0]
    return _SCRIPT_OF_NAME.get(head, head.lower())


def script_of(text: str) -> str:
    """The writing system most of ``text``'s letters are in ("latin", "cjk", "hebrew",
    "cyrillic", "arabic", ...), or ``""`` for a text without letters.

    The semantic router calibrates its thresholds per script: a multilingual encoder scores two
    unrelated sentences of the same language higher than two of different languages, so the
    bar that rejects off-topic English is too low for off-topic Chinese (``bench/routing.py``).
    Chinese, Japanese and Korean characters count several times each, since one stands for
    about a syllable or a word.

    >>> script_of("Where is my order?"), script_of("我的订单到哪了？"), script_of("איפה ההזמנה שלי?")
    ('latin', 'cjk', 'hebrew')
    >>> script_of("my order 还没到"), script_of("12345 ?!")
    ('cjk', '')
    """
    counts: dict[str, int] = {}
    for ch in text:
        if ch.isalpha():
            script = _letter_script(ch)
            counts[script] = counts.get(script, 0) + _DENSE_SCRIPTS.get(script, 1)
    if not counts:
        return ""
    return max(sorted(counts), key=counts.__getitem__)


def require_text(text: object) -> str:
    """The message text a router is asked about; anything but a string is a caller bug."""
    if not isinstance(text, str):
        from langgraph_handoff.errors import InvalidRouteError

        raise InvalidRouteError(f"routers route text (str), got {type(text).__name__}")
    return text


def require_strings(value: object, what: str) -> tuple[str, ...]:
    """A list of strings, refusing a bare string (which would become one entry per character)."""
    from langgraph_handoff.errors import InvalidRouteError

    if isinstance(value, str) or not hasattr(value, "__iter__"):
        raise InvalidRouteError(f"{what} must be a list of strings, got {type(value).__name__} {value!r}")
    items = tuple(value)
    bad = [x for x in items if not isinstance(x, str)]
    if bad:
        raise InvalidRouteError(f"{what} must be strings, got {bad[:3]!r}")
    return items
