"""The LLM judge's settings: where the server is, which model, the key's variable, the prompt.

Off until configured (`LLMSettings`): a base URL (a local server such as Ollama's
`http://127.0.0.1:11434/v1`, vLLM's or llama.cpp's, or a hosted one; requests go to
`{base_url}/chat/completions`; never a link-local or metadata address unless `allow_link_local`:
`endpoint.py`), a model, and the NAME of the environment variable that holds the
key ('' for none). The key itself is read from the environment at request time and is never
written anywhere. The settings live in the store's `_llm_judge` table (`save_settings`), one row
of JSON; a name without '__' never clashes with a collection or its `_<kind>__<collection>` tables.

The prompt is an editable template with `{query}`, `{passage}` and optionally `{need}` (the
query's information need); `{{` and `}}` write literal braces. It is filled in one pass, so text
in a query or a document is never read as a placeholder. The default is UMBRELA's zero-shot
prompt (`UMBRELA_PROMPT`: Upadhyay, Pradeep, Thakur, Craswell & Lin 2024, "UMBRELA: UMbrela is
the (Open-Source Reproduction of the) Bing RELevance Assessor", arXiv:2406.06519; the text of
castorini/umbrela's `prompts/qrel_zeroshot_bing.txt`, sent after its system message, as there).
The grade is the number after a grade label (`final score: N`, the overall grade, `score: N`),
else the one grade-like number of the answer, if it is 0–3; an answer whose numbers compete is
not guessed at (`parse_grade`). An answer without one is a failure of that pair: nothing is saved for it and it
is not cached, so the next run asks again (a "can't tell" would stop it ever being asked again).
"""

from __future__ import annotations

import json
import math
import os
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from retrieval.judging.llm.endpoint import check_host, request_url
from retrieval.judging.raters import LLM_PREFIX, MAX_RATER_CHARS, RATER_PUNCTUATION
from retrieval.store.side_tables import KeyedTable
from retrieval.store.tables import now_iso
from retrieval.types import RetrievalError

if TYPE_CHECKING:
    from retrieval.search.workbench import Workbench
    from retrieval.store import Store

# UMBRELA's zero-shot prompt, verbatim (spaces at line ends included).
UMBRELA_PROMPT = (
    "Given a query and a passage, you must provide a score on an integer scale of 0 to 3 with the following "
    "meanings:\n"
    "0 = represent that the passage has nothing to do with the query, \n"
    "1 = represents that the passage seems related to the query but does not answer it, \n"
    "2 = represents that the passage has some answer for the query, but the answer may be a bit unclear, or "
    "hidden amongst extraneous information and \n"
    "3 = represents that the passage is dedicated to the query and contains the exact answer.\n"
    "\n"
    "Important Instruction: Assign category 1 if the passage is somewhat related to the topic but not "
    "completely, category 2 if passage presents something very important related to the entire topic but also "
    "has some extra information and category 3 if the passage only and entirely refers to the topic. If none of "
    "the above satisfies give it category 0.\n"
    "\n"
    "Query: {query}\n"
    "Passage: {passage}\n"
    "\n"
    "Split this problem into steps:\n"
    "Consider the underlying intent of the search.\n"
    "Measure how well the content matches a likely intent of the query (M).\n"
    "Measure how trustworthy the passage is (T).\n"
    "Consider the aspects above and the relative importance of each, and decide on a final score (O). Final "
    "score must be an integer value only.\n"
    "Do not provide any code in result. Provide each score in the format of: ##final score: score without "
    "providing any reasoning."
)
SYSTEM_MESSAGE = "You are a helpful assistant."  # UMBRELA's (gpt_judge.py)
PLACEHOLDERS = ("query", "passage", "need")
REQUIRED_PLACEHOLDERS = ("query", "passage")
_PLACEHOLDER_RE = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
MAX_PROMPT_CHARS = 20_000
MAX_PASSAGE_CHARS = 8_000  # a document's title and text are cut here: ~2,000 tokens

NOT_CONFIGURED = ("The LLM judge is not configured: set its base URL and model on the Judge page "
                  "(or --base-url/--model)")
MAX_CONCURRENCY = 32
MAX_RETRIES = 10
MAX_TIMEOUT_S = 3600.0
# The key variable's name: the server sends that variable's value to the configured URL, which a
# browser user may set, so only a name made for an API key qualifies (never AWS_SECRET_ACCESS_KEY,
# WORKBENCH_MCP_TOKEN or any other secret the process holds).
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*_API_KEY")

SETTINGS_TABLE = "_llm_judge"
SETTINGS_ROW = "default"
SETTINGS_SCHEMA = pa.schema([
    pa.field("name", pa.string(), nullable=False),
    pa.field("settings", pa.string(), nullable=False),  # LLMSettings.to_dict as JSON
    pa.field("saved", pa.string(), nullable=False),
])


# ---- the prompt and the answer ---------------------------------------------------------------
def validate_prompt(template: str) -> str:
    """A template with `{query}` and `{passage}`, optionally `{need}`, and no other placeholder."""
    if not isinstance(template, str) or not template.strip():
        raise RetrievalError("The prompt template is empty")
    if len(template) > MAX_PROMPT_CHARS:
        raise RetrievalError(f"The prompt template is {len(template):,} characters long; the limit is "
                             f"{MAX_PROMPT_CHARS:,}")
    names = {m.group(1) for m in _PLACEHOLDER_RE.finditer(template) if m.group(1)}
    unknown = sorted(names - set(PLACEHOLDERS))
    if unknown:
        shown = ", ".join("{" + n + "}" for n in unknown)
        raise RetrievalError(f"The prompt template has unknown placeholder(s) {shown}: use {{query}}, {{passage}} "
                             "and optionally {need} (write {{ and }} for literal braces)")
    missing = [n for n in REQUIRED_PLACEHOLDERS if n not in names]
    if missing:
        shown = " and ".join("{" + n + "}" for n in missing)
        raise RetrievalError(f"The prompt template must contain {{query}} and {{passage}}; {shown} is missing")
    return template


def render_prompt(template: str, query: str, passage: str, need: str = "") -> str:
    """The template filled in, in one pass: braces in the texts are kept as they are."""
    values = {"query": query, "passage": passage, "need": need}

    def fill(match: re.Match) -> str:
        name = match.group(1)
        return match.group(0)[0] if name is None else values[name]

    return _PLACEHOLDER_RE.sub(fill, template)


_THINK_RE = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)  # reasoning models' thoughts
PARSER_VERSION = 2  # bump when `parse_grade` reads an answer differently: cached grades are read again
_NUMBER = r"(-?\d+(?:\.\d+)?)"
_LABEL_END = r"(?:\s*\(O\))?[\s*:=#]*(?:(?:is|of)\b[\s*:=#]*)?"  # "score (O): ", "**Score:** ", "grade of "
# Grade labels, strongest first: the format the prompt asks for, the overall grade (UMBRELA's "O"
# beside its aspects M and T), then a plain score or grade.
_LABELS = (
    re.compile(r"final[\s_]*score" + _LABEL_END + _NUMBER, re.I),
    re.compile(r"(?:(?i:\boverall(?:[\s_]*(?:score|grade|rating|relevance))?" + _LABEL_END + r")|(?<![\w(])O\s*[:=]\s*)"
               + _NUMBER),
    re.compile(r"\b(?:score|grade|rating)" + _LABEL_END + _NUMBER, re.I),
)
_RANGE_AFTER = re.compile(r"\s*(?:-|–|to|or)\s*\d")  # "score: 2-3", "2 or 3": no single grade
_SCALE_RE = re.compile(r"(?:scale|range)\s*(?:of|from)?\s*\d+\s*(?:-|–|to)\s*\d+|\(\s*\d+\s*(?:-|–)\s*\d+\s*\)"
                       r"|\bfrom\s+\d+\s+to\s+\d+", re.I)
_OUT_OF_RE = re.compile(r"(-?\d+(?:\.\d+)?)\s*(?:/|out\s+of)\s*\d+(?:\.\d+)?", re.I)
_BARE_NUMBER_RE = re.compile(r"(?<![\w.])" + _NUMBER + r"(?![\w]|\.\d)")
MIN_GRADE, MAX_GRADE = 0, 3


def _grade_of(number: str) -> int | None:
    value = float(number)
    return int(value) if value.is_integer() and MIN_GRADE <= value <= MAX_GRADE else None


def parse_grade(answer: str) -> int | None:
    """The grade in an answer (reasoning in `<think>` ignored), an integer 0–3, or None when the
    answer gives none or is ambiguous:

    - a labelled number, strongest label first: `final score: N` (the last one: a later one is
      the model's revision), then the overall grade (`overall: N`, UMBRELA's `O: N` beside its
      aspects `M:` and `T:`), then `score`/`grade`/`rating: N`; several different values under
      that label, a range (`score: 2-3`) or a value out of 0–3 (`final score: -1`) is None,
      never a fall-back to another number;
    - else the answer's numbers once a scale is taken out (`on a scale of 0-3`, `(0-3)`) and
      "N/M" or "N out of M" read as N: the grade when they name exactly one value 0–3, None when
      different ones compete (`M: 2, T: 3`) or none is a grade.

    `PARSER_VERSION` names these rules: a cached grade read by other rules is read again."""
    text = _THINK_RE.sub(" ", answer or "")
    for rank, label in enumerate(_LABELS):
        found = list(label.finditer(text))
        if not found:
            continue
        if any(_RANGE_AFTER.match(text, m.end()) for m in found):
            return None
        values = {m.group(1) for m in found} if rank else {found[-1].group(1)}
        grades = {_grade_of(v) for v in values}
        return grades.pop() if len(grades) == 1 else None
    bare = _OUT_OF_RE.sub(lambda m: m.group(1), _SCALE_RE.sub(" ", text))
    grades = {_grade_of(n) for n in _BARE_NUMBER_RE.findall(bare)} - {None}
    return grades.pop() if len(grades) == 1 else None


def rater_name(model: str) -> str:
    """The LLM's rater name: "llm:" + the model name, characters a rater name cannot have
    (`raters.validate_rater`) turned into '-', cut to the rater name's length."""
    def allowed(char: str) -> bool:
        return char in RATER_PUNCTUATION or unicodedata.category(char)[0] in "LMN"

    clean = "".join(c if allowed(c) else "-" for c in model.strip())
    return (LLM_PREFIX + clean)[:MAX_RATER_CHARS].rstrip() or LLM_PREFIX


def passage_of(row: Mapping[str, Any]) -> str:
    """What the LLM reads of a document: its title and text, cut at `MAX_PASSAGE_CHARS`."""
    title = str(row.get("title") or "").strip()
    text = str(row.get("text") or "").strip()
    passage = f"{title}\n{text}" if title and not text.startswith(title) else text or title
    return passage if len(passage) <= MAX_PASSAGE_CHARS else passage[:MAX_PASSAGE_CHARS - 1] + "…"


# ---- settings --------------------------------------------------------------------------------
@dataclass(frozen=True)
class LLMSettings:
    """How to reach the LLM judge and what to ask it (see the module docstring). Never the key:
    `api_key_env` names the environment variable that holds it."""

    base_url: str = ""
    model: str = ""
    api_key_env: str = ""
    prompt: str = UMBRELA_PROMPT
    concurrency: int = 4
    retries: int = 3  # further attempts after the first
    timeout_s: float = 60.0
    price_per_1k_input_tokens: float = 0.0
    price_per_1k_output_tokens: float = 0.0
    temperature: float = 0.0
    allow_link_local: bool = False  # a link-local or cloud metadata address as the server (endpoint.py)

    @property
    def configured(self) -> bool:
        return bool(self.base_url.strip() and self.model.strip())

    @property
    def rater(self) -> str:
        """The rater its judgments are saved under: "llm:<model>" (`rater_name`)."""
        return rater_name(self.model)

    @property
    def endpoint(self) -> str:
        return request_url(self.base_url, "/chat/completions")

    def validate(self, check_key: bool = True) -> LLMSettings:
        """Refuse settings that cannot work, with a message that says what to set; `check_key`:
        also that the named key variable is set in this process."""
        if not self.configured:
            raise RetrievalError(NOT_CONFIGURED)
        check_host(self.base_url, self.allow_link_local)
        if len(self.model) > 200 or any(c.isspace() for c in self.model.strip()):
            raise RetrievalError(f"Invalid model name {self.model!r}: the name the server knows, without spaces")
        validate_prompt(self.prompt)
        _check_number(self.concurrency, "concurrency", 1, MAX_CONCURRENCY, whole=True)
        _check_number(self.retries, "retries", 0, MAX_RETRIES, whole=True)
        _check_number(self.timeout_s, "timeout", 1, MAX_TIMEOUT_S)
        _check_number(self.price_per_1k_input_tokens, "price per 1,000 input tokens", 0, math.inf)
        _check_number(self.price_per_1k_output_tokens, "price per 1,000 output tokens", 0, math.inf)
        _check_number(self.temperature, "temperature", 0, 2)
        if self.api_key_env.strip() and not _ENV_NAME_RE.fullmatch(self.api_key_env.strip()):
            # Never echo the value: it may be a key pasted into the wrong field.
            raise RetrievalError("The key's environment variable must be a name of letters, digits and '_' ending in "
                                 "_API_KEY (such as OPENAI_API_KEY): give the name of the variable that holds the key, "
                                 "never the key (only such a variable is ever sent to the LLM server)")
        if check_key:
            self.api_key()
        return self

    def api_key(self) -> str:
        """The key, read from the named environment variable now ('' when none is named)."""
        name = self.api_key_env.strip()
        if not name:
            return ""
        value = os.environ.get(name, "") if _ENV_NAME_RE.fullmatch(name) else ""
        if not value:
            raise RetrievalError(f"The environment variable ${name}, named to hold the LLM's key, is not set (or is "
                                 "empty) in the process running the workbench")
        return value

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe; holds the key variable's name, never a key."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LLMSettings:
        """Settings from `to_dict`'s output; unknown fields are ignored (a later version's), a
        value of the wrong type is a `RetrievalError`."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                continue
            value, kind = data[f.name], type(f.default)
            if kind is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if type(value) is not kind:
                raise RetrievalError(f"LLM settings: {f.name} must be {kind.__name__}, got {value!r}")
            values[f.name] = value
        return cls(**values)


def _check_number(value: Any, what: str, low: float, high: float, whole: bool = False) -> None:
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not low <= value <= high:
        span = f"from {low:g} to {high:g}" if high != math.inf else f"of at least {low:g}"
        raise RetrievalError(f"The LLM judge's {what} must be a {'whole ' if whole else ''}number {span}, "
                             f"got {value!r}")


def _store_of(store: Store | Workbench) -> Store:
    return getattr(store, "store", store)


def _settings_table(store: Store) -> KeyedTable:
    return KeyedTable(store, SETTINGS_TABLE, SETTINGS_SCHEMA, "name")


def save_settings(store: Store | Workbench, settings: LLMSettings) -> None:
    """Keep the settings in the store's `_llm_judge` table (one row, one commit). They must be
    complete and valid; the key variable need not be set in this process."""
    settings.validate(check_key=False)
    store = _store_of(store)
    row = {"name": SETTINGS_ROW, "settings": json.dumps(settings.to_dict(), ensure_ascii=False), "saved": now_iso()}
    try:
        _settings_table(store).put(row)
    finally:
        store.note_write()


def load_settings(store: Store | Workbench) -> LLMSettings | None:
    """The saved settings, or None when none were saved."""
    row = _settings_table(_store_of(store)).get(SETTINGS_ROW, ["settings"])
    if row is None:
        return None
    try:
        data = json.loads(row["settings"])
    except ValueError as exc:
        raise RetrievalError(f"The saved LLM settings are not readable JSON: {exc}") from None
    return LLMSettings.from_dict(data)
