"""The read side of indexing: files, folders and BEIR collections into documents (no storage here).

    options.py    `ParseOptions` and its `ColumnMapping`: how a file is read
    formats.py    one reader per format (CSV, TSV, JSON, JSONL, Excel, text, Markdown): bytes to
                  `Records` (or, for prose, documents); `SUPPORTED_EXTENSIONS`
    documents.py  records to documents: column detection (`detected_columns`), the checks,
                  catalogue records
    parse.py      the one-shot parse into a `ParsedCorpus`: `parse_bytes`, `parse_files`,
                  `parse_path` (BEIR folders too), `preview`, `skipped_note`
    stream.py     the streaming read: `open_stream` surveys the files into a `DocumentStream`, read
                  in batches (`STREAM_BATCH`)

Nothing is imported here: the modules import each other directly.
"""
