"""Judge: a blind judging queue with keyboard shortcuts (what to judge next, or the pool), raters and
their agreement, adjudication, ratings import/export, and the LLM judge (ui/judging/)."""

from ui import page, state
from ui.judging import page as judge_page

context = page.context()
collection = page.require_collection(context)
state.write_url("judge")
judge_page.judge_page(context.workbench, collection)
