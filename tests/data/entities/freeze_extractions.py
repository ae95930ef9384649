"""Writes tests/data/entities/sample_extractions.json (README.md beside it): run once, from the
repository root, with the extractor whose output is to be frozen."""

import json
from pathlib import Path

from retrieval.indexing.readers.parse import parse_path
from retrieval.text.entities import EntityConfig, EntityExtractor

SAMPLES = ("xquad", "three_kingdoms", "catalogue/records.json")
SYNONYMS = {"曹孟德": "曹操", "刘玄德": "刘备", "孔明": "诸葛亮", "Big Apple": "New York", "NYC": "New York"}
TRICKY = {
    "tricky|0": ["", "Paris is big. London too! Rome? Yes: Madrid; Berlin\nVienna and (Prague) and \"Oslo\" "
                     "and 'Bern' went to Big Apple. He met NYC in Boston."],
    "tricky|1": ["A Title", "In 1066 the Battle of Hastings took place near York. After Harold died, William of "
                            "Normandy ruled from London. The King of the Franks"],
    "tricky|2": ["", "March 3, 2020 and 2021-05-06 in 208 BC, 300 AD; since 1999. Nobody came. Then Alice met Bob "
                     "at Cambridge.   Carol left."],
    "tricky|3": ["A Title", "建安十三年，曹孟德率军至赤壁，孔明在隆中。官渡之战后，刘玄德屯新野。公元200年8月3日 "
                            "Paris and the Battle of Red Cliffs."],
}


def texts() -> dict[str, tuple[str, str]]:
    """key → (title, text) of every document frozen."""
    found = {}
    for name in SAMPLES:
        for doc in parse_path(Path("sample_data") / name).documents:
            found[f"{name}|{doc.id}"] = (doc.title or "", doc.text)
    return {**found, **{k: tuple(v) for k, v in TRICKY.items()}}


def main() -> None:
    extractor = EntityExtractor(EntityConfig(synonyms=dict(SYNONYMS)))
    extractions = {key: {kind: list(names.items()) for kind, names in extractor.extract(text, title).items()}
                   for key, (title, text) in texts().items()}
    frozen = {"samples": SAMPLES, "synonyms": SYNONYMS, "tricky": TRICKY, "extractions": extractions}
    text = json.dumps(frozen, ensure_ascii=False, separators=(",", ":")).replace('},"', '},\n"')
    Path("tests/data/entities/sample_extractions.json").write_text(text, "utf-8")
    print(len(extractions), "documents")


if __name__ == "__main__":
    main()
