"""The workbench's entry, `streamlit run app.py` (`./run.sh app`): the frame around every page.

The frame runs once per script run, before the page: the page's title and layout, the first-run
sample ingest and the sidebar's collection picker, which every page shares (`ui.page.frame`).
Then it runs the page the URL names. The sidebar lists the pages by their titles (`ui.page.PAGES`:
Home, Search, Compare, Distributions, Corpus, Evaluate, Graph, Present, Judge); their URLs are /,
/Search, /Compare, … as before."""

import streamlit as st

from ui import page

# The tab's icon before st.navigation: otherwise the browser takes the page's Material icon as the
# tab's and fetches it from a font CDN (the frame sets it again, with the page's title).
st.set_page_config(page_icon=page.FAVICON)
current = st.navigation([st.Page(path, title=title, icon=icon, default=path == page.PAGES[0][0])
                         for path, title, icon in page.PAGES])
page.frame(current.title)
current.run()
