"""Tokenisation for BM25: jieba for Han text, a Snowball English analyser for the rest, one pass.

`tokenize(text)` normalises with NFKC (full-width letters and digits become ASCII), then walks the
text once: each run of Han characters is segmented by jieba (precise mode) and its Chinese
function words dropped (`CHINESE_STOPWORDS`); a fraction ("½", "1/2", "6½" → `6` `1/2`) is one
token; each run of other letters/digits is lowercased, dropped if it is an English stopword or a
single Latin letter ("I", the "e" and "g" of "e.g.": rare in documents, so heavily weighted, and
never what a query means), and stemmed with the Snowball English (Porter2) stemmer. Punctuation
and whitespace separate tokens and are dropped. Digits and single Han characters stay.
The same function tokenises documents and queries, so both sides always agree.

Analysers are versioned: a collection records the one it was built with (`CollectionInfo.tokenizer`,
`TOKENIZER_NAME` when created) and is searched and appended to with that one (`analyser`), so a
collection built before a change keeps matching its stored tokens until it is re-indexed.
`TOKENIZER_V1` is the analyser before one-letter words, Chinese stopwords and fractions were handled.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable
from functools import lru_cache

import jieba
import snowballstemmer

TOKENIZER_V1 = "jieba+snowball-english/v1"
TOKENIZER_NAME = "jieba+snowball-english/v2"

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# Runs of Han characters (group "han") and runs of other letters/digits (group "word").
SEGMENT_RE = re.compile(rf"(?P<han>[{_HAN}]+)|(?P<word>[^\W_{_HAN}]+)")
_HAN_RE = re.compile(f"[{_HAN}]")
_LATIN_RE = re.compile(r"[A-Za-z]")

# Lucene's English stopword set (the list Elasticsearch and Anserini use by default): short, so
# that content words such as "will" or "may" stay searchable.
ENGLISH_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)

# Chinese function words: stopwords-iso's stopwords-zh.txt (github.com/stopwords-iso/stopwords-zh,
# MIT licence, © Gene Diaz; 119 single characters), vendored here unchanged. Single characters
# only, so a word jieba keeps whole (在于, 是否) is untouched; measured in docs/experiments/.
CHINESE_STOPWORDS = frozenset(
    "一上下不与且个为乃么之也了于些亦人今仍从他以们但何你使儿其再几凡凭则别到即却去又及另只可各同后向吧和"
    "咱哇哟哪啥啦嗡嘛因在她好如它小尔已并当往很得怎您我或所打把拿据无既是曾最有来某此每比沿用由的看着给而自"
    "至致若虽被让该诸谁起趁距跟还这那随靠"
)

# A vulgar fraction character (½, ⅞ …): NFKC makes it "1⁄2", which would run into a digit before it.
_VULGAR_FRACTION_RE = re.compile(
    "([" + "".join(chr(c) for c in range(0x80, 0x2200)
                   if unicodedata.decomposition(chr(c)).startswith("<fraction>")) + "])")
# v2's segments: a fraction "N/M" or "N⁄M" (not part of a date such as 2020/01/02) first.
SEGMENT_V2_RE = re.compile(rf"(?P<fraction>(?<![\d/\u2044])\d+[/\u2044]\d+(?![\d/\u2044]))|{SEGMENT_RE.pattern}")

_jieba_lock = threading.Lock()
_jieba_ready = False
_stemmer_local = threading.local()


def _ensure_jieba() -> None:
    """Load jieba's dictionary once per process, quietly (it logs to stderr by default)."""
    global _jieba_ready
    if _jieba_ready:
        return
    with _jieba_lock:
        if not _jieba_ready:
            jieba.setLogLevel(logging.WARNING)
            jieba.initialize()
            _jieba_ready = True


def _stemmer():
    # Snowball stemmer objects are not thread-safe: one per thread.
    stemmer = getattr(_stemmer_local, "stemmer", None)
    if stemmer is None:
        stemmer = _stemmer_local.stemmer = snowballstemmer.stemmer("english")
    return stemmer


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _stemmer().stemWord(word)


_DROPPED = ""  # a word the analyser leaves out (stopword, one Latin letter)
_WORD_TOKENS: dict[str, str] = {}  # a word as written -> its token or _DROPPED: one lookup per word
_WORD_TOKENS_MAX = 200_000  # words remembered (then new words are analysed each time)


def _word_token(raw: str) -> str:
    """The token of a run of letters/digits `raw` as written: lowercased, _DROPPED if an English
    stopword or a single Latin letter, else stemmed. Remembered per spelling (a word recurs in
    every document: 850k words of 20k abstracts are 12k spellings), so the common case is one
    dict lookup instead of lowercasing, two tests and the stemmer's cache."""
    token = _WORD_TOKENS.get(raw)
    if token is None:
        word = raw.lower()
        token = _DROPPED if word in ENGLISH_STOPWORDS or (len(word) == 1 and not word.isdigit()) else _stem(word)
        if len(_WORD_TOKENS) < _WORD_TOKENS_MAX:
            _WORD_TOKENS[raw] = token
    return token


def segment_han(run: str) -> list[str]:
    """jieba's segmentation (precise mode, HMM) of a run of Han characters: a partition of it."""
    _ensure_jieba()
    return [t for t in jieba.lcut(run, HMM=True) if t.strip()]


def tokenize(text: str) -> list[str]:
    """Split `text` into BM25 terms with the current analyser (see module docstring for the rules)."""
    tokens: list[str] = []
    text = _VULGAR_FRACTION_RE.sub(r" \1", text)
    # Each alternative of SEGMENT_V2_RE is one whole group: the match is the group's text.
    for match in SEGMENT_V2_RE.finditer(unicodedata.normalize("NFKC", text)):
        kind = match.lastgroup
        if kind == "word":
            token = _word_token(match[0])
            if token:
                tokens.append(token)
        elif kind == "han":
            tokens.extend(t for t in segment_han(match[0]) if t not in CHINESE_STOPWORDS)
        else:  # a fraction
            tokens.append(match[0].replace("\u2044", "/"))
    return tokens


def tokenize_v1(text: str) -> list[str]:
    """`TOKENIZER_V1`: as `tokenize` but one-letter words and Chinese function words kept, and a
    fraction split by NFKC ("6½" → `61` `2`). Collections built with it are searched with it."""
    tokens: list[str] = []
    for match in SEGMENT_RE.finditer(unicodedata.normalize("NFKC", text)):
        han = match.group("han")
        if han is not None:
            tokens.extend(segment_han(han))
        else:
            word = match.group("word").lower()
            if word not in ENGLISH_STOPWORDS:
                tokens.append(_stem(word))
    return tokens


ANALYSERS: dict[str, Callable[[str], list[str]]] = {TOKENIZER_V1: tokenize_v1, TOKENIZER_NAME: tokenize}


def analyser(name: str) -> Callable[[str], list[str]]:
    """The analyser a collection recorded (`CollectionInfo.tokenizer`); an unknown name (a
    catalogue row written by hand or a test) gets the current one."""
    return ANALYSERS.get(name, tokenize)


def reindex_note(name: str) -> str | None:
    """A sentence for a collection built with an older analyser than `TOKENIZER_NAME`, else None."""
    if name not in ANALYSERS or name == TOKENIZER_NAME:
        return None
    return (f"the collection's analyser is {name}, and queries use it too; re-ingest it for "
            f"{TOKENIZER_NAME} (one-letter words and Chinese function words not indexed, fractions whole)")


def document_language(text: str) -> str:
    """'zh' when Han characters outnumber a quarter of the Latin letters, else 'en'.

    A Han character carries about as much as a short English word, hence the factor 4.
    """
    han = len(_HAN_RE.findall(text))
    if not han:  # most documents: no need to count the letters
        return "en"
    return "zh" if han * 4 >= len(_LATIN_RE.findall(text)) else "en"


LANGUAGE_NAMES = {"en": "English", "zh": "Chinese"}


def crosses_languages(query: str, collection_language: str | None) -> bool:
    """True when the collection is all one language ('en' or 'zh') and the query (labelled by
    `document_language`) is the other. A 'mixed' collection is never crossed."""
    return collection_language in LANGUAGE_NAMES and query.strip() != "" \
        and document_language(query) != collection_language


def corpus_language(texts: Iterable[str]) -> str:
    """'zh' when ≥ 90% of texts are Chinese, 'en' when under 1% are, else 'mixed'.

    Any real share of Chinese makes a corpus 'mixed' because the English model cannot read Han
    text at all, while the multilingual one reads both.
    """
    return language_from_mix(document_language(t) for t in texts)


def language_from_mix(languages: Iterable[str]) -> str:
    """The corpus language from per-document labels ('zh'/'en'), by the rule of corpus_language."""
    mix = {"zh": 0, "en": 0}
    for language in languages:
        mix[language] += 1
    total = mix["zh"] + mix["en"]
    if total == 0:
        return "en"
    zh_share = mix["zh"] / total
    if zh_share >= 0.9:
        return "zh"
    if zh_share < 0.01:
        return "en"
    return "mixed"
