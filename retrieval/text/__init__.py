"""Text analysis: pure functions over strings, no storage and no models.

    tokenize.py       the analyser BM25 and the query features share: jieba for Han text, Lucene
                      stopwords + Snowball for the rest; a text's language by script
    encoding.py       uploaded bytes → text, for the encodings Chinese and English users produce
    json_values.py    JSON text parsed with its nesting bounded (a message, not a RecursionError)
    chunking.py       Markdown into heading-titled chunks, plain text into paragraphs
    highlight.py      which spans of a text match a query, a snippet around the best, Markdown escaping
    entities.py       typed entities of a chunk (rules and jieba) and their normalisation
    pos_tagging.py    jieba's part-of-speech tagger with an exact, faster (pruned, memoised) Viterbi
    entity_tables.py  the entity graph tables' rows (entities, event–entity links, event times)
    records.py        catalogue records (seed 000's data-source shape): their names, tags, domains
    passages.py       the text of a document the encoders, BM25 and the rerankers see (title + text)
    csv_cells.py      CSV for spreadsheets: a cell that would run as a formula made text (OWASP)

Entry points: `tokenize`, `document_language`, `decode_bytes`, `chunk_markdown`, `snippet`.
"""

from retrieval.text.chunking import chunk_markdown
from retrieval.text.encoding import decode_bytes
from retrieval.text.highlight import snippet
from retrieval.text.tokenize import document_language, tokenize

__all__ = ["chunk_markdown", "decode_bytes", "document_language", "snippet", "tokenize"]
