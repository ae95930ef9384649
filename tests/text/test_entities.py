"""Entity extraction and normalisation (retrieval/text/entities.py) on real text with the real jieba."""

import json
from pathlib import Path

import pytest

from retrieval.text.entities import (
    EntityConfig,
    EntityExtractor,
    default_extractor,
    load_entity_config,
    normalize_name,
)
from retrieval.types import RetrievalError


def non_empty(found):
    return {kind: set(names) for kind, names in found.items() if names}


def test_known_sentence_gives_people_place_time_and_actions():
    found = default_extractor().extract("公元200年，曹操与袁绍在官渡展开决战")
    assert non_empty(found) == {
        "time": {"200年"},  # 公元 removed by normalisation
        "person": {"曹操", "袁绍"},
        "location": {"官渡"},  # jieba tags 官渡 as a name; "在 X" makes it a place
        "action": {"展开", "决战"},
    }
    assert found["time"]["200年"] == "公元200年"  # the surface form is kept as the display name


def test_synonyms_map_to_one_canonical_person():
    found = default_extractor().extract("曹孟德与刘玄德煮酒，孔明出山")
    assert {"曹操", "刘备", "诸葛亮"} <= set(found["person"])
    assert found["person"]["曹操"] == "曹孟德"


def test_normalisation_rules_in_order():
    assert normalize_name("  曹孟德 ") == "曹操"
    assert normalize_name("公元208年。") == "208年"
    assert normalize_name("《赤壁》") == "赤壁"
    assert normalize_name("Fine-Tuning", {"fine-tuning": "微调"}) == "微调"  # case-insensitive for Latin keys
    assert normalize_name("Red Cliffs") == "red cliffs"
    assert normalize_name("孔明", {}) == "孔明"  # an empty map turns the defaults off


def test_era_years_battle_names_and_time_words():
    found = default_extractor().extract("建安十三年，周瑜在赤壁以火攻击溃曹军。赤壁之战后，东汉末年三分天下。")
    assert {"建安十三年", "末年", "东汉"} <= set(found["time"])
    assert "赤壁" in found["location"]
    assert "赤壁之战" in found["tag"]
    assert "建安" not in found["topic"]  # inside a time span: not a topic


def test_english_rules_years_dates_phrases_and_topics():
    found = default_extractor().extract(
        "In 208 AD Cao Cao marched south. The Battle of Red Cliffs was fought near Chibi on 2024-03-01. "
        "The battle ended the campaign; the battle is famous.")
    assert non_empty(found)["time"] == {"208年", "2024-03-01"}
    assert {"red cliffs", "chibi"} <= set(found["location"])
    assert {"cao cao", "battle of red cliffs"} <= set(found["tag"])
    assert found["topic"] == {"battle": "battle"}  # the only content word used twice or more


def test_user_config_file_flat_or_with_types(tmp_path):
    flat = tmp_path / "syn.json"
    flat.write_text(json.dumps({"阿瞒": "曹操"}), encoding="utf-8")
    config = load_entity_config(flat)
    assert config.synonyms["阿瞒"] == "曹操" and config.synonyms["孔明"] == "诸葛亮"
    typed = tmp_path / "typed.json"
    typed.write_text(json.dumps({"synonyms": {"阿瞒": "曹操"}, "types": {"五丈原": "location"}}), encoding="utf-8")
    extractor = EntityExtractor(load_entity_config(typed))
    found = extractor.extract("阿瞒南下。诸葛亮病逝于五丈原。")
    assert "曹操" in found["person"] and "五丈原" in found["location"]


@pytest.mark.parametrize("content,name,message", [
    ("[1, 2]", "a.json", "must map strings to strings"),
    ('{"types": {"x": "planet"}}', "b.json", "unknown entity type"),
    ("{not json", "c.json", "Cannot read"),
    ("{}", "d.txt", "existing .json file"),
])
def test_bad_config_files_are_clear_errors(tmp_path, content, name, message):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(RetrievalError, match=message):
        load_entity_config(path)


def test_private_dictionary_leaves_bm25_tokenizer_alone():
    from retrieval.text.tokenize import tokenize

    before = tokenize("阿瞒南下")
    extractor = EntityExtractor(EntityConfig(synonyms={"阿瞒": "曹操"}))
    assert "曹操" in extractor.extract("阿瞒南下")["person"]  # its private dictionary is loaded and used
    assert tokenize("阿瞒南下") == before


def test_a_text_without_han_gives_what_jieba_would_without_loading_it(monkeypatch):
    """jieba's tagger loads (seconds) at the first text with a Han character: every rule that
    reads its words keeps Han words only, so the texts before it extract exactly as when every
    text is cut by jieba (the rule before this laziness, forced here by a pattern matching anything)."""
    import re

    from retrieval.text import entities

    corpus = Path(__file__).resolve().parents[2] / "sample_data" / "xquad" / "corpus.jsonl"
    rows = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()]
    texts = [r["text"] for r in rows if not entities._HAN_CHAR.search(r["text"])]
    texts.append("In 208 AD Cao Cao marched south, on 2024-03-01; the battle, the battle.")
    assert len(texts) == 61
    lazy = EntityExtractor()
    found = [lazy.extract(t) for t in texts]
    assert lazy._pos is None  # never loaded
    assert found[-1]["time"] == {"208年": "208年", "2024-03-01": "2024-03-01"}
    monkeypatch.setattr(entities, "_HAN_CHAR", re.compile(r"[\s\S]"))
    eager = EntityExtractor()
    assert [eager.extract(t) for t in texts] == found and eager._pos is not None
    monkeypatch.undo()
    assert non_empty(lazy.extract("公元200年，曹操与袁绍在官渡展开决战"))["person"] == {"曹操", "袁绍"}
    assert lazy._pos is not None
