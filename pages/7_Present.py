"""Present: a stakeholder view of one change (ui/present.py): no sidebar, large type, the headline
metric before and after, one question's results before and after."""

from ui import page, present, state

context = page.setup("Present")
collection = page.require_collection(context)
state.write_url("present")
present.present(context.workbench, collection)
