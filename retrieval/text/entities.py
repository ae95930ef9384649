"""Typed entities of a chunk, found by rules and jieba (no LLM), and their normalisation.

Seed 002 has an LLM split each chunk into events and name their entities. Here **each chunk is
one event** (no event splitting happens) and its entities come from deterministic rules, so an
ingest is reproducible and needs no network:

Chinese (jieba's part-of-speech tagger on a private tokenizer, so BM25's segmentation is untouched)

- time: date patterns in the raw text (`公元前?N年`, `N年M月D日`, `M月D日`, ISO `YYYY-MM-DD`, an era
  name tagged nz/t followed by a Chinese-numeral year such as 建安十三年), then words tagged `t`
  that hold a time character (年, 月, 末, 汉 …; jieba also tags 前往 or 隆中 `t`);
- location: words tagged `ns`; the place of a battle name (`官渡` in 官渡之战 / 官渡之役); a noun
  right after a locative preposition (在/至/到/往/赴/屯/驻/从 X, and 于 X unless X is tagged a person);
- person: words tagged `nr`, `nrfg`, `nrt` (unless a rule above made them a place);
- tag (organisation / other proper noun): words tagged `nt`, `nz`, and battle names (官渡之战);
- action: verbs (`v`, `vn`) of two or more characters, minus a short list of light verbs (进行, 成为 …),
  the `action_k` (5) of highest TF-IDF (count × jieba's bundled idf);
- topic: the top `topic_k` (5) TF-IDF keywords of the chunk (jieba.analyse with its bundled idf
  file; nouns, idioms and abbreviations such as 北伐) not already a person, place or time of it.

English (simple rules): years (`in 208`, `208 AD`, `1066`, …) and dates (ISO, `March 3, 2020`) are
time; capitalised phrases are tags, or places right after in/at/near/from/to (a lone capitalised
word opening a sentence is skipped); the most frequent content words (≥ 2 occurrences) are
topics. English has no action rule.

Normalisation (`normalize_name`), in this order: NFKC, strip whitespace and edge punctuation; the
synonym map (case-insensitive for Latin text; default 曹孟德→曹操, 刘玄德→刘备, 孔明→诸葛亮,
extended by `$WORKBENCH_SYNONYMS` or an argument); remove "公元" (公元200年 → 200年); Latin text
lowercased. English years become `N年` (BC: `前N年`) so both languages share time entities.
An entity's identity is `(type, normalized_name)`; its id is `f"{type}:{normalized_name}"`.

A user file (JSON, `load_entity_config`) is either a flat synonym map `{"曹孟德": "曹操"}` or
`{"synonyms": {...}, "types": {"许昌": "location"}}`; `types` forces a word's type and adds it to
the private dictionary so jieba keeps it whole.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from retrieval.types import RetrievalError

ENTITY_TYPES = ("time", "location", "person", "topic", "action", "tag")
DEFAULT_SYNONYMS: dict[str, str] = {"曹孟德": "曹操", "刘玄德": "刘备", "孔明": "诸葛亮"}
SYNONYMS_ENV = "WORKBENCH_SYNONYMS"
TOPIC_K = 5
ACTION_K = 5

# type -> {normalized name -> name as first written}
Extraction = dict[str, dict[str, str]]

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_HAN_CHAR = re.compile(f"[{_HAN}]")
_EDGE_PUNCT = re.compile(r"^[\s\W_]+|[\s\W_]+$")
_LATIN = re.compile(r"[A-Za-z]")
_CN_NUM = "〇零一二三四五六七八九十百千元"
_TIME_PATTERNS = [
    re.compile(r"公元前?\s*\d{1,4}\s*年(?:\d{1,2}月(?:\d{1,2}日)?)?"),
    re.compile(r"(?<!\d)\d{1,4}年(?:\d{1,2}月(?:\d{1,2}日)?)?"),
    re.compile(r"(?<!\d)\d{1,2}月\d{1,2}日"),
    re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),
]
_ERA_YEAR = re.compile(rf"([{_HAN}]{{2}})([{_CN_NUM}]{{1,4}})年")
_BATTLE = re.compile(rf"^([{_HAN}]{{2,3}})之(?:战|役)$")
_LOCATIVE_ANY = frozenset("在至到往赴屯驻从")
_LOCATIVE_NOT_PERSON = frozenset("于")
# jieba tags some places and verbs `t` (隆中, 前往): a time word must hold one of these.
_TIME_CHARS = re.compile("[年月日时代朝末初春夏秋冬期夜晨晚汉晋唐宋元明清]")
_NOUNISH = ("n", "nr", "ns", "nz", "nt", "s", "t", "nrfg", "nrt")
_PERSON_FLAGS = ("nr", "nrfg", "nrt")
_TOPIC_POS = ("n", "nz", "nt", "ns", "vn", "l", "i", "nr", "an", "j")
_LIGHT_VERBS = frozenset(
    "进行 成为 没有 可以 能够 开始 使得 认为 表示 发生 出现 包括 需要 获得 得到 作为 导致 具有 存在 通过 以为 "
    "觉得 知道 称为 形成 继续 使用 不能 不是 就是 还是 所谓".split()
)

# English rules
_MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|December")
_EN_DATE = re.compile(rf"\b(?:{_MONTHS})\s+\d{{1,2}},\s*\d{{4}}\b|\b\d{{4}}-\d{{2}}-\d{{2}}\b")
_EN_YEAR = re.compile(r"\b(?:(?:in|since|by|until|of|year|AD|CE)\s+(\d{2,4})(\s*(?:BC|BCE))?"
                      r"|(\d{2,4})\s*(AD|CE|BC|BCE)\b|((?:1\d|20)\d{2}))\b")
_EN_PHRASE = re.compile(r"\b[A-Z][a-z]+(?:\s+(?:of\s+(?:the\s+)?)?[A-Z][a-z]+)*\b")
_EN_LOCATIVE = re.compile(r"\b(?:in|at|near|from|to)\s+$")
_EN_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{3,}")
_EN_STOP = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these they "
    "this to was will with were from after before which when while also had has have his her its than over under "
    "between during against about into more most other some only same very would could should been being "
    "many much what which who whom how why where also first second one two three four five new".split()
)
_EN_SENTENCE_START_SKIP = frozenset(
    "The A An In At On After Before When While During This That These Those It He She They We His Her Its Their "
    "Then There By From With For Of As But And Or".split()
)


def opens_sentence(text: str, start: int) -> bool:
    r"""Whether `text[start:]` opens a sentence: nothing before it, or only whitespace after a line
    break, one of . ! ? : ; or an opening quote or bracket (" ' ( ). The regex
    `(?:^|[.!?:;\n]\s*|["'(]\s*)$` searched in `text[:start]` says the same, but tries every
    position of the prefix: quadratic in a document's length when asked at every capitalised word."""
    if start == 0:
        return True
    end = start
    while end > 0 and text[end - 1].isspace():  # \s is str.isspace()
        end -= 1
    return "\n" in text[end:start] or (end > 0 and text[end - 1] in ".!?:;\"'(")


def clean(name: str) -> str:
    """NFKC, then strip whitespace and punctuation at both edges."""
    return _EDGE_PUNCT.sub("", unicodedata.normalize("NFKC", name))


def normalize_name(name: str, synonyms: Mapping[str, str] | None = None) -> str:
    """The canonical form of an entity name (rules in the module docstring):

    clean → synonym (exact, then case-insensitive) → remove "公元" → lowercase if it has Latin letters.
    """
    synonyms = DEFAULT_SYNONYMS if synonyms is None else synonyms
    text = clean(name)
    if text in synonyms:
        text = clean(synonyms[text])
    else:
        folded = {k.casefold(): v for k, v in synonyms.items() if _LATIN.search(k)}
        if text.casefold() in folded:
            text = clean(folded[text.casefold()])
    if "公元" in text:
        text = text.replace("公元", "").strip()
    if _LATIN.search(text):
        text = text.casefold()
    return text


@dataclass
class EntityConfig:
    """Synonyms (surface → canonical) and forced types (word → entity type)."""

    synonyms: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_SYNONYMS))
    types: dict[str, str] = field(default_factory=dict)


def load_entity_config(path: str | Path | None = None) -> EntityConfig:
    """Default synonyms, extended by a JSON file (argument, else `$WORKBENCH_SYNONYMS`, else none).

    The file must be an existing `.json` file holding a flat `{name: canonical}` object or
    `{"synonyms": {...}, "types": {word: type}}`; anything else is a `RetrievalError`.
    """
    config = EntityConfig()
    path = path if path is not None else os.environ.get(SYNONYMS_ENV) or None
    if path is None:
        return config
    path = Path(path)
    if path.suffix.lower() != ".json" or not path.is_file():
        raise RetrievalError(f"Synonym file must be an existing .json file, got {str(path)!r}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RetrievalError(f"Cannot read synonym file {path.name!r}: {exc}") from exc
    if isinstance(data, dict) and set(data) <= {"synonyms", "types"} and data:
        synonyms, types = data.get("synonyms", {}), data.get("types", {})
    else:
        synonyms, types = data, {}
    for what, mapping in (("synonyms", synonyms), ("types", types)):
        if not isinstance(mapping, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                    for k, v in mapping.items()):
            raise RetrievalError(f"Synonym file {path.name!r}: {what} must map strings to strings")
    bad = sorted(v for v in types.values() if v not in ENTITY_TYPES)
    if bad:
        raise RetrievalError(f"Synonym file {path.name!r}: unknown entity type(s) {', '.join(bad)}; "
                             f"known: {', '.join(ENTITY_TYPES)}")
    config.synonyms.update(synonyms)
    config.types.update(types)
    return config


class EntityExtractor:
    """Rule-based typed entity extraction (see the module docstring). Thread-safe."""

    def __init__(self, config: EntityConfig | None = None, topic_k: int = TOPIC_K, action_k: int = ACTION_K):
        self.config = config or load_entity_config()
        self.topic_k = topic_k
        self.action_k = action_k
        self._lock = threading.Lock()
        # jieba's tagger and idf table, loaded at the first text with a Han character: loading them
        # takes seconds, and a text without one gets nothing from them (every rule that reads
        # them keeps Han words only).
        self._pos = self._tfidf = None

    def _load_jieba(self) -> None:
        import jieba
        import jieba.analyse

        jieba.setLogLevel(logging.WARNING)
        tokenizer = jieba.Tokenizer()  # private: words added here never change BM25's jieba
        tokenizer.initialize()
        from retrieval.text.pos_tagging import FastPOSTokenizer  # imports jieba.posseg's tables: seconds

        pos = FastPOSTokenizer(tokenizer)
        for word in set(self.config.synonyms) | set(self.config.synonyms.values()) | set(self.config.types):
            if _HAN_CHAR.search(word):
                tokenizer.add_word(word, freq=100_000)
        tfidf = jieba.analyse.TFIDF()
        tfidf.tokenizer, tfidf.postokenizer = tokenizer, pos
        self._pos, self._tfidf = pos, tfidf

    def normalize(self, name: str) -> str:
        return normalize_name(name, self.config.synonyms)

    def _tag_of(self, word: str, flag: str) -> str:
        """A synonym takes its canonical word's dictionary tag (曹孟德 is tagged like 曹操)."""
        canonical = self.config.synonyms.get(word)
        if canonical is not None:
            return self._pos.word_tag_tab.get(canonical, flag)
        return flag

    def extract(self, text: str, title: str = "") -> Extraction:
        """Typed entities of a chunk (title and text): type -> {normalized name: first surface form}."""
        full = f"{title}\n{text}" if title else text
        found: Extraction = {t: {} for t in ENTITY_TYPES}

        def add(kind: str, name: str) -> None:
            name = clean(name)
            if not name:
                return
            forced = self.config.types.get(name) or self.config.types.get(self.config.synonyms.get(name, ""))
            normalized = self.normalize(name)
            if normalized:
                found[forced or kind].setdefault(normalized, name)

        with self._lock:
            if self._pos is None and _HAN_CHAR.search(full):
                self._load_jieba()
            blanked, words = self._chinese(full, add)  # time spans blanked: 建安十三年 is no topic
            self._english(blanked, add)
            self._topics(words, found, add)
        # One name, one type per chunk: person/place/time win over tag, tag over topic/action.
        claimed: set[str] = set()
        for kind in ("time", "location", "person", "tag", "action", "topic"):
            found[kind] = {n: s for n, s in found[kind].items() if n not in claimed}
            claimed.update(found[kind])
        return found

    def _chinese(self, text: str, add) -> tuple[str, list[tuple[str, str]]]:
        """Chinese rules; returns the text with time spans blanked (for the English pass) and its
        (word, part-of-speech) pairs (for the topics)."""
        spans: list[tuple[int, int]] = []
        for pattern in _TIME_PATTERNS:
            for match in pattern.finditer(text):
                if not any(s <= match.start() < e for s, e in spans):
                    spans.append(match.span())
                    add("time", match.group())
        han = _HAN_CHAR.search(text) is not None  # else only the numeric dates apply, no word is cut
        for match in _ERA_YEAR.finditer(text) if han else ():
            era = list(self._pos.cut(match.group(1)))
            if len(era) == 1 and era[0].flag in ("nz", "t") and not any(s <= match.start() < e for s, e in spans):
                spans.append(match.span())
                add("time", match.group())
        blanked = list(text)
        for start, end in spans:
            blanked[start:end] = "，" * (end - start)
        blanked = "".join(blanked)
        if not han:
            return blanked, []
        words = [(w.word, self._tag_of(w.word, w.flag)) for w in self._pos.cut(blanked) if w.word.strip()]
        verbs: Counter = Counter()
        for i, (word, flag) in enumerate(words):
            if not re.search(f"[{_HAN}]", word):
                continue
            previous = words[i - 1][0] if i else ""
            battle = _BATTLE.match(word)
            if word in self.config.types:
                add(self.config.types[word], word)
            elif battle:
                add("location", battle.group(1))
                add("tag", word)
            elif len(word) >= 2 and flag in _NOUNISH and (
                    previous in _LOCATIVE_ANY or (previous in _LOCATIVE_NOT_PERSON and flag not in _PERSON_FLAGS)):
                add("location", word)
            elif flag == "ns" and len(word) >= 2:
                add("location", word)
            elif flag in _PERSON_FLAGS and len(word) >= 2:
                add("person", word)
            elif flag == "t" and len(word) >= 2 and _TIME_CHARS.search(word):
                add("time", word)
            elif flag in ("nt", "nz") and len(word) >= 2:
                add("tag", word)
            elif flag in ("v", "vn") and len(word) >= 2 and word not in _LIGHT_VERBS:
                verbs[word] += 1
        # The action_k verbs of highest TF-IDF (count × jieba's idf), ties in order of appearance.
        idf, median = self._tfidf.idf_freq, self._tfidf.median_idf
        ranked = sorted(verbs, key=lambda v: -verbs[v] * idf.get(v, median))
        for word in ranked[: self.action_k]:
            add("action", word)
        return blanked, words

    def _english(self, text: str, add) -> None:
        for match in _EN_DATE.finditer(text):
            add("time", match.group())
        for match in _EN_YEAR.finditer(text):
            number = match.group(1) or match.group(3) or match.group(5)
            era = (match.group(2) or match.group(4) or "").strip().upper()
            add("time", f"{'前' if era.startswith('B') else ''}{int(number)}年")
        for match in _EN_PHRASE.finditer(text):
            phrase = match.group()
            words = phrase.split()
            if len(words) == 1 and (phrase in _EN_SENTENCE_START_SKIP or phrase in _MONTHS.split("|")
                                    or phrase.lower() in _EN_STOP or opens_sentence(text, match.start())):
                continue  # a lone capitalised word opening a sentence is usually no name
            if words[0] in _EN_SENTENCE_START_SKIP:
                phrase = " ".join(words[1:])
                if not phrase:
                    continue
            before = text[max(0, match.start() - 8):match.start()]
            if phrase.startswith("Battle of "):
                add("tag", phrase)
                add("location", phrase[len("Battle of "):])
            else:
                add("location" if _EN_LOCATIVE.search(before) else "tag", phrase)
        counts = Counter(w.lower() for w in _EN_WORD.findall(text) if w.lower() not in _EN_STOP and w.islower())
        for word, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[: self.topic_k]:
            if n >= 2:
                add("topic", word)

    def _topics(self, words: list[tuple[str, str]], found: Extraction, add) -> None:
        """TF-IDF keywords as jieba.analyse.extract_tags computes them (tf · idf over the words of
        the allowed parts of speech, its stop words out, ties in order of appearance), from the
        words already cut: cutting again would double the cost of an ingest."""
        if not words:
            return
        taken = set(found["person"]) | set(found["location"]) | set(found["time"])
        counts: Counter = Counter()
        for word, flag in words:
            if flag in _TOPIC_POS and len(word) >= 2 and word.lower() not in self._tfidf.stop_words:
                counts[word] += 1
        idf, median = self._tfidf.idf_freq, self._tfidf.median_idf
        ranked = sorted(counts, key=lambda w: -counts[w] * idf.get(w, median))
        kept = [w for w in ranked if re.search(f"[{_HAN}]", w) and self.normalize(w) not in taken]
        for word in kept[: self.topic_k]:
            add("topic", word)


_default: EntityExtractor | None = None
_default_lock = threading.Lock()


def default_extractor() -> EntityExtractor:
    """The process-wide extractor with the default (or `$WORKBENCH_SYNONYMS`) configuration."""
    global _default
    with _default_lock:
        if _default is None:
            _default = EntityExtractor()
        return _default
