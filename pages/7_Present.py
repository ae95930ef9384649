"""Present: a stakeholder view of one change (ui/evaluate/present.py): no sidebar, large type, the headline
metric before and after, one question's results before and after."""

from ui import page, state
from ui.evaluate import present

context = page.context()
collection = page.require_collection(context)
state.write_url("present")
present.present(context.workbench, collection)
