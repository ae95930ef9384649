"""Evaluate: query sets and judgments, config A's metrics per source and fused, the sweep, the
optimiser, the A/B test between saved configs, snapshots and their diff, and saved configs."""

import streamlit as st

from ui import page, state
from ui.evaluate import (
    ab as eval_ab,
)
from ui.evaluate import (
    configs as eval_configs,
)
from ui.evaluate import (
    optimize as eval_optimize,
)
from ui.evaluate import (
    run as eval_run,
)
from ui.evaluate import (
    sets as eval_sets,
)
from ui.evaluate import (
    snapshots as eval_snapshots,
)
from ui.evaluate import (
    sweep as eval_sweep,
)
from ui.search.config_controls import config_controls

context = page.context()
collection = page.require_collection(context)
st.title("Evaluate")
config = config_controls("a", title="Config A")
eval_sets.flash()
st.subheader("Query set")
qset = eval_sets.query_set_section(context.workbench, collection)
state.write_url("evaluate")

tab_eval, tab_sweep, tab_optimize, tab_ab, tab_snapshots, tab_configs = st.tabs(
    ["Evaluate", "Sweep", "Optimise", "A/B test", "Snapshots", "Configs"])
ready = qset is not None and bool(qset.judged)
if qset is not None and not ready:
    st.info("This query set has no judged query yet: rate results on the Search page or upload judgments.")
with tab_eval:
    if ready:
        eval_run.evaluate_section(context.workbench, collection, qset, config)
with tab_sweep:
    if ready:
        eval_sweep.sweep_section(context.workbench, collection, qset, config)
with tab_optimize:
    if ready:
        eval_optimize.optimize_section(context.workbench, collection, qset, config)
with tab_ab:
    if ready:
        eval_ab.ab_section(context.workbench, collection, qset)
with tab_snapshots:
    if ready:
        eval_snapshots.snapshots_section(context.workbench, collection, qset, config)
with tab_configs:
    eval_configs.configs_section(context.workbench)
