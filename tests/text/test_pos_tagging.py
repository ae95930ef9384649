"""pos_tagging.py: the faster Viterbi finds jieba's own path on every run of characters jieba's
tagger hands it from the bundled Chinese samples, and on random runs of their characters; the
tagger built on it tags the samples exactly as jieba's does."""

import random
from pathlib import Path

import jieba
import jieba.posseg
from jieba.posseg import char_state_tab_P, emit_P, start_P, trans_P
from jieba.posseg.viterbi import viterbi as jieba_viterbi

from retrieval.indexing.readers.parse import parse_path
from retrieval.text.pos_tagging import FastPOSTokenizer, viterbi

REPO = Path(__file__).resolve().parents[2]


def chinese_texts() -> list[str]:
    texts = []
    for name in ("three_kingdoms", "xquad", "catalogue/records.json"):
        texts += [d.text for d in parse_path(REPO / "sample_data" / name).documents]
    return [t for t in texts if any("\u4e00" <= c <= "\u9fff" for c in t)]


def test_viterbi_finds_jiebas_path_on_every_run_of_the_samples_and_random_runs(monkeypatch):
    runs: list[str] = []
    cut = jieba.posseg.POSTokenizer._POSTokenizer__cut
    monkeypatch.setattr(jieba.posseg.POSTokenizer, "_POSTokenizer__cut",
                        lambda self, sentence: (runs.append(sentence), cut(self, sentence))[1])
    tokenizer = jieba.Tokenizer()
    tokenizer.initialize()
    tagger = jieba.posseg.POSTokenizer(tokenizer)
    texts = chinese_texts()
    for text in texts:
        list(tagger.cut(text))
    characters = sorted(set("".join(texts)))
    rng = random.Random(7)
    runs += ["".join(rng.choice(characters) for _ in range(rng.randint(1, 10))) for _ in range(300)]
    assert len(runs) > 500
    viterbi.cache_clear()
    differing = [r for r in runs
                 if viterbi(r) != tuple(jieba_viterbi(r, char_state_tab_P, start_P, trans_P, emit_P)[1])]
    assert differing == []


def test_the_fast_tagger_tags_the_samples_as_jiebas_tagger():
    tokenizer = jieba.Tokenizer()
    tokenizer.initialize()
    slow, fast = jieba.posseg.POSTokenizer(tokenizer), FastPOSTokenizer(tokenizer)
    for text in chinese_texts():
        assert [(w.word, w.flag) for w in fast.cut(text)] == [(w.word, w.flag) for w in slow.cut(text)]
