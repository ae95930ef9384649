"""Small corpora written for the tests (our own text), shared by the test modules that need them."""

from __future__ import annotations

import json
from pathlib import Path

from retrieval.search.config import SearchConfig
from retrieval.store import Store

# Six one-sentence animal documents: "mice" is in cat and fox, "night" in cat and owl.
ANIMALS = """id,title,text
cat,Cats,"Cats are small felines that sleep most of the day and hunt mice at night."
dog,Dogs,"Dogs are loyal companions that need daily walks and enjoy playing fetch."
owl,Owls,"Owls are nocturnal birds of prey with silent flight and excellent night vision."
bee,Bees,"Bees pollinate flowers and produce honey in their hives."
fox,Foxes,"Foxes are clever wild canines that hunt small animals such as mice and rabbits."
cow,Cows,"Cows graze on grass and give milk on dairy farms."
"""

# The same six with a `quality` metadata column (a tie-break field).
ANIMALS_WITH_QUALITY = """id,title,text,quality
cat,Cats,"Cats are small felines that sleep most of the day and hunt mice at night.",3
dog,Dogs,"Dogs are loyal companions that need daily walks and enjoy playing fetch.",5
owl,Owls,"Owls are nocturnal birds of prey with silent flight and excellent night vision.",4
bee,Bees,"Bees pollinate flowers and produce honey in their hives.",2
fox,Foxes,"Foxes are clever wild canines that hunt small animals such as mice and rabbits.",1
cow,Cows,"Cows graze on grass and give milk on dairy farms.",3
"""

# The same six with a `category` metadata column (query rules' filters and boosts).
ANIMALS_WITH_CATEGORY = """id,title,text,category
cat,Cats,"Cats are small felines that sleep most of the day and hunt mice at night.",pet
dog,Dogs,"Dogs are loyal companions that need daily walks and enjoy playing fetch.",pet
owl,Owls,"Owls are nocturnal birds of prey with silent flight and excellent night vision.",wild
bee,Bees,"Bees pollinate flowers and produce honey in their hives.",insect
fox,Foxes,"Foxes are clever wild canines that hunt small animals such as mice and rabbits.",wild
cow,Cows,"Cows graze on grass and give milk on dairy farms.",farm
"""


# ---- the bundled three-kingdoms sample (Markdown in Chinese, chunked): the entity graph's tests ----
THREE_KINGDOMS = Path(__file__).resolve().parents[1] / "sample_data" / "three_kingdoms"
GRAPH_QUERY = "曹操和刘备的战役"
GRAPH_CONFIG = SearchConfig(weights={"bm25": 1.0, "graph": 1.0}, graph={"threshold": 0.1})


def graph_tables_as_json(store: Store, name: str) -> dict[str, list[str]] | None:
    """A collection's graph tables, each as its rows in sorted JSON (None when it has none)."""
    tables = store.graph_tables(name)
    return None if tables is None else {k: sorted(json.dumps(r, ensure_ascii=False) for r in t.to_pylist())
                                        for k, t in tables.items()}
