"""The Corpus page.

    actions.py  its steps as plain functions (no Streamlit): preview uploads, ingest, the table
    views.py    its sections: upload → preview → map → ingest, versions, delete and clear
    outside.py  its "Outside engines" section: register and remove outside search engines
"""
