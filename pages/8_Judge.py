"""Judge: a blind judging queue with keyboard shortcuts (what to judge next, or the pool), raters and
their agreement, adjudication, ratings import/export, and the LLM judge (ui/judge_page.py)."""

from ui import judge_page, page, state

context = page.setup("Judge")
collection = page.require_collection(context)
state.write_url("judge")
judge_page.judge_page(context.workbench, collection)
