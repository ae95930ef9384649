"""Session state and URL state.

One `View` object per browser session (in `st.session_state`) holds everything a page shows:
collection, query, config A (sidebar), config B (Compare), the Compare mode and the RRF curve ks.
It is the single source of truth:

* On the session's first run it is read from `st.query_params`, so a shared link restores a view.
* Every widget is *bound* to one field of it (`bind`): before the widget is drawn its session-state
  key is set from the View, and its `on_change` callback writes a user's change back into the
  View before the next run starts. Widgets are re-created on every page, so their values
  survive page switches (Streamlit drops a widget's own state when a page stops drawing it).
* After the controls are drawn, each page writes its part of the View back to `st.query_params`
  (`write_url`), so the address bar always reproduces the page as shown.

`view_from_params` and `params_for` are pure and tested without Streamlit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from retrieval.limits import check_model_from_link
from retrieval.models.embed import BUILTIN_MODELS
from retrieval.search.config import SearchConfig
from retrieval.search.rerank import E5_RERANKER
from retrieval.types import RetrievalError

VIEW_KEY = "_workbench_view"
READS_KEY = "_workbench_reads"  # memo of database reads (`memo_read`)
UI_SOURCES = ("bm25", "dense")
CONFIG_FIELDS = tuple(f.name for f in fields(SearchConfig))
B_PREFIX = "b."
COMPARE_MODES = ("rerank", "configs", "sources", "versions")
RRF_K_CHOICES = (1, 2, 5, 10, 20, 30, 60, 100, 200)
DEFAULT_RRF_KS = [1, 10, 60, 200]
PAGES = ("home", "search", "compare", "distributions", "corpus", "evaluate", "graph", "present", "judge")


def default_config_b() -> SearchConfig:
    """Config B starts as RRF k = 60, BM25 0.5 / vector 0.5 (the classic default, shipped until
    the measured weighted sum replaced it): a useful contrast to A's default."""
    return SearchConfig(fusion="rrf", weights={"bm25": 0.5, "dense": 0.5})


@dataclass
class View:
    collection: str | None = None
    query: str = ""
    config_a: SearchConfig = field(default_factory=SearchConfig)
    config_b: SearchConfig = field(default_factory=default_config_b)
    compare_mode: str = "rerank"
    rrf_ks: list[int] = field(default_factory=lambda: list(DEFAULT_RRF_KS))
    notices: list[str] = field(default_factory=list)  # problems reading the link, shown once
    sample_checked: bool = False
    query_set: str | None = None  # the query set judged and evaluated (None: the default)
    judging: bool = False  # Search page: rating widgets under each result (URL 'judge=1')
    why: str | None = None  # Search page: the document "Why not this document?" explains (URL 'why=ID')
    version: int | None = None  # Search / Compare: an earlier table version of the collection (URL 'version=N')
    rater: str = ""  # Judge: whose ratings (URL 'rater=NAME'; '' the unnamed rater), so each rater gets a link

    def switch_collection(self, collection: str) -> None:
        """Show `collection`; what belongs to the one before (an earlier version's number, the
        "why not?" document) goes with it."""
        if collection != self.collection:
            self.version, self.why = None, None
        self.collection = collection

    def config(self, which: str) -> SearchConfig:
        return self.config_b if which == "b" else self.config_a

    def set_config(self, which: str, config: SearchConfig) -> None:
        """Config `which` becomes `config` (configs are frozen: a control's change is a new one)."""
        if which == "b":
            self.config_b = config
        else:
            self.config_a = config


# ---- URL <-> View (pure) ---------------------------------------------------------------------
def with_ui_sources(config: SearchConfig) -> SearchConfig:
    """Both UI sources present in the weights (a missing one gets weight 0), BM25 first."""
    weights = {name: config.weights.get(name, 0.0) for name in UI_SOURCES}
    weights.update({k: v for k, v in config.weights.items() if k not in weights})
    return config.edited(weights=weights)


def browser_model_check(kind: str, name: str) -> None:
    """`Workbench.model_check` of the browser's Workbench: a reranker must be 'e5', an embedding
    model a built-in alias, or either a folder inside `WORKBENCH_MODEL_DIRS`; anything else is
    refused (RetrievalError) before any load, so a page never says whether a path exists."""
    builtins = (E5_RERANKER,) if kind == "reranker" else BUILTIN_MODELS
    check_model_from_link(name, builtins, kind.capitalize())


def config_from_params(params: Mapping[str, str], default: SearchConfig) -> tuple[SearchConfig, list[str]]:
    """The config a link describes, on top of `default`; bad fields are skipped and reported.
    A reranker outside the built-in alias and `WORKBENCH_MODEL_DIRS` is refused (`browser_model_check`)."""
    relevant = {k: v for k, v in params.items() if k in CONFIG_FIELDS}
    data = default.to_dict()
    problems = []
    for name, raw in relevant.items():
        try:
            if name == "reranker":
                browser_model_check("reranker", raw)
            data[name] = getattr(SearchConfig.from_query_params({name: raw}), name)
        except RetrievalError as exc:
            problems.append(str(exc))
    try:
        config = SearchConfig.from_dict(data)
    except RetrievalError as exc:
        problems.append(str(exc))
        config = default
    return with_ui_sources(config), problems


def view_from_params(params: Mapping[str, str]) -> View:
    """A View from URL query parameters (see `params_for` for the names)."""
    view = View()
    view.collection = params.get("collection") or None
    view.query = params.get("q", "")
    view.query_set = params.get("set") or None
    # A link that names a query set (e.g. Evaluate's worst queries) comes to judge.
    view.judging = params.get("judge") == "1" or view.query_set is not None
    view.why = params.get("why") or None
    view.rater = (params.get("rater") or "").strip()[:64]
    view.config_a, problems = config_from_params(params, SearchConfig())
    version = params.get("version")
    if version is not None:
        if version.isascii() and version.isdigit() and 0 < int(version) < 2**63:
            view.version = int(version)
        else:
            problems.append(f"version {version!r} is not a version number")
    b_params = {k[len(B_PREFIX):]: v for k, v in params.items() if k.startswith(B_PREFIX)}
    view.config_b, b_problems = config_from_params(b_params, default_config_b())
    problems += [f"config B: {p}" for p in b_problems]
    mode = params.get("mode")
    if mode in COMPARE_MODES:
        view.compare_mode = mode
    elif mode is not None:
        problems.append(f"Unknown compare mode {mode!r} in the link (use {' or '.join(COMPARE_MODES)})")
    if "ks" in params:
        ks, bad = set(), []
        for part in filter(None, (p.strip() for p in params["ks"].split(","))):
            if part.isdigit() and int(part) in RRF_K_CHOICES:
                ks.add(int(part))
            else:
                bad.append(part)
        view.rrf_ks = sorted(ks)
        if bad:
            problems.append(f"Ignored RRF k values {', '.join(map(str, bad))} in the link "
                            f"(choices: {', '.join(map(str, RRF_K_CHOICES))})")
    view.notices = [f"Ignored part of the link: {p}" for p in problems]
    return view


def params_for(view: View, page: str) -> dict[str, str]:
    """The query parameters that reproduce `page` as it is shown."""
    if page not in PAGES:
        raise ValueError(f"unknown page {page!r}")
    params: dict[str, str] = {}
    if view.collection:
        params["collection"] = view.collection
    if page in ("search", "evaluate", "judge") and view.query_set:
        params["set"] = view.query_set
    if page == "search" and view.judging:
        params["judge"] = "1"
    if page == "judge" and view.rater:
        params["rater"] = view.rater
    if page == "search" and view.why:
        params["why"] = view.why
    if page == "evaluate":  # the config evaluated is config A
        params.update(view.config_a.to_query_params())
    if page in ("search", "compare", "distributions", "graph"):
        params["q"] = view.query
        params.update(view.config_a.to_query_params())
    if view.version is not None and (page == "search" or (page == "compare" and view.compare_mode == "versions")):
        params["version"] = str(view.version)
    if page == "compare":
        params["mode"] = view.compare_mode
        if view.compare_mode == "configs":
            params.update({B_PREFIX + k: v for k, v in view.config_b.to_query_params().items()})
    if page == "distributions":
        params["ks"] = ",".join(map(str, view.rrf_ks))
    return params


# ---- Streamlit side --------------------------------------------------------------------------
def view() -> View:
    """This session's View; read from the URL on the session's first run."""
    import streamlit as st

    if VIEW_KEY not in st.session_state:
        st.session_state[VIEW_KEY] = view_from_params(st.query_params.to_dict())
    return st.session_state[VIEW_KEY]


def write_url(page: str) -> None:
    """Mirror the page's state in the address bar (called on every run, after the controls)."""
    import streamlit as st

    st.query_params.from_dict(params_for(view(), page))


def bind(key: str, read: Callable[[], Any], write: Callable[[Any], None]) -> dict[str, Any]:
    """Widget kwargs binding session-state `key` to a View field.

    `read()` gives the widget value from the View; `write(value)` stores a widget value into it.
    Usage: `st.slider(..., **bind("a.rrf_k", read, write))`.
    """
    import streamlit as st

    st.session_state[key] = read()
    return {"key": key, "on_change": _changed, "args": (key, write)}


def _changed(key: str, write: Callable[[Any], None]) -> None:
    import streamlit as st

    write(st.session_state[key])


def bound(widget: Callable[..., Any], label: str, key: str, read: Callable[[], Any],
          write: Callable[[Any], None], **kwargs: Any) -> Any:
    """Draw a bound widget and return its value; the View then holds exactly what is shown
    (a value from a link that the widget had to clamp or round is stored clamped)."""
    value = widget(label, **kwargs, **bind(key, read, write))
    write(value)
    return value


def memo_read(workbench, key: tuple, read):
    """`read()`'s result, kept in the session until the next write through the Workbench
    (`Workbench.writes`: ratings, uploads, saved configs, ingests …), so a rerun of this page,
    e.g. a sidebar slider move, reads nothing from the database."""
    import streamlit as st

    memo = st.session_state.setdefault(READS_KEY, {})
    full_key = (workbench.store.uri, workbench.writes) + key
    if full_key not in memo:
        if len(memo) >= 64:
            memo.clear()
        memo[full_key] = read()
    return memo[full_key]
