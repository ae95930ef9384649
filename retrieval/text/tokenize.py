"""Tokenisation for BM25: jieba for Han text, a Snowball English analyser for the rest, one pass.

`tokenize(text)` normalises with NFKC (full-width letters and digits become ASCII), then walks the
text once: each run of Han characters is segmented by jieba (precise mode); each run of other
letters/digits is lowercased, dropped if it is an English stopword, and stemmed with the Snowball
English (Porter2) stemmer. Punctuation and whitespace separate tokens and are dropped.
The same function tokenises documents and queries, so both sides always agree.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

import jieba
import snowballstemmer

TOKENIZER_NAME = "jieba+snowball-english/v1"

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


def tokenize(text: str) -> list[str]:
    """Split `text` into BM25 terms (see module docstring for the rules)."""
    tokens: list[str] = []
    for match in SEGMENT_RE.finditer(unicodedata.normalize("NFKC", text)):
        han = match.group("han")
        if han is not None:
            _ensure_jieba()
            tokens.extend(t for t in jieba.lcut(han, HMM=True) if t.strip())
        else:
            word = match.group("word").lower()
            if word not in ENGLISH_STOPWORDS:
                tokens.append(_stem(word))
    return tokens


def document_language(text: str) -> str:
    """'zh' when Han characters outnumber a quarter of the Latin letters, else 'en'.

    A Han character carries about as much as a short English word, hence the factor 4.
    """
    han = len(_HAN_RE.findall(text))
    latin = len(_LATIN_RE.findall(text))
    return "zh" if han > 0 and han * 4 >= latin else "en"


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
