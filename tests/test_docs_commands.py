"""The docs cannot rot: every shell command shown in README.md and docs/ that runs on the bundled
sample is run here, and every relative link there points at an existing file.

- Commands: the fenced `bash`, `sh` and `console` blocks of README.md and docs/**/*.md. A line
  ending in a backslash continues on the next, `# …` comments are dropped; in a `console` block a
  command is a line starting with `$ `, and the lines under it are its output.
- Marks: an HTML comment on the line right before a block's fence (blank lines between allowed).
  `<!-- not run by tests: REASON -->` excuses the block (it starts the app or a server, reads
  the evaluation sets beside the repository or your own files, needs an outside server, takes
  hours); `<!-- run by tests once, before every other block: the shared sample -->` marks the one
  block that makes the sample the other commands run on (docs/cli.md), run once per module and
  its database copied for each file.
- Run: `[.venv/bin/]python -m retrieval ARGS [> FILE]` as `retrieval/__main__.py` runs it
  (`retrieval.cli.main.main(ARGS)`, in this process, so the models load once), in document order within
  a file, in a folder of its own (`sample_data` linked in), on a copy of the shared sample's
  database (`WORKBENCH_DB`, `WORKBENCH_LOCK_DIR`, `HF_HUB_OFFLINE=1`): exit code 0, something
  printed where the doc shows output, something written where it redirects. Anything else in an
  unmarked block — another program, a shell construct, a path outside the repository, a server —
  fails the test: a new command in the docs is either run or explicitly excused.
"""

from __future__ import annotations

import io
import re
import shlex
import shutil
import time
import unicodedata
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import pytest

from retrieval.cli import main as cli

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
SHELL_LANGUAGES = {"bash", "sh", "console"}
EXCUSED = re.compile(r"^not run by tests:\s*(?P<reason>\S.*)$")
SHARED_SAMPLE = "run by tests once, before every other block: the shared sample"
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<language>[\w+-]*)")
COMMENT = re.compile(r"^\s*<!--\s*(?P<text>.*?)\s*-->\s*$")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
PYTHONS = {"python", "python3", ".venv/bin/python", ".venv/bin/python3"}
SHELL_SYNTAX = re.compile(r"^[|;&<>()]+$|[$`]")  # an operator (a word of its own), an expansion
OUTSIDE = re.compile(r"^[/~]|(^|/)\.\.(/|$)")  # an absolute path, the home folder or a parent folder


@dataclass
class Block:
    doc: Path
    line: int  # of the opening fence, 1-based
    language: str
    mark: str | None  # the HTML comment right before the fence
    lines: list[str]


@dataclass
class Command:
    doc: Path
    line: int
    text: str  # as the doc shows it
    argv: list[str] = field(default_factory=list)  # after `python -m retrieval`
    env: dict[str, str] = field(default_factory=dict)
    stdout_to: str | None = None  # `> FILE`
    shows_output: bool = False  # a console block shows output under it

    def where(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}: {self.text}"


def blocks(doc: Path) -> list[Block]:
    """Every fenced block of `doc` (any language: a fence inside another block is its text)."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        closing = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = next((j for j in range(i + 1, len(lines)) if closing.match(lines[j])), len(lines))
        previous = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        comment = COMMENT.match(previous)
        found.append(Block(doc, i + 1, opening["language"].lower(), comment["text"] if comment else None,
                           [line[indent:] if line[:indent].isspace() else line.lstrip() for line in lines[i + 1:end]]))
        i = end + 1
    return found


def shell_blocks(doc: Path) -> list[Block]:
    return [b for b in blocks(doc) if b.language in SHELL_LANGUAGES]


def commands(block: Block) -> list[Command]:
    """The block's commands, continuation lines joined; in a console block only `$ ` lines, each
    noting whether output is shown under it."""
    found: list[Command] = []
    pending: tuple[int, str] | None = None
    for number, raw in enumerate(block.lines, start=block.line + 1):
        if pending is None:
            if block.language == "console":
                if not raw.startswith("$ "):
                    if found and raw.strip():
                        found[-1].shows_output = True
                    continue
                raw = raw[2:]
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
            pending = (number, "")
        start, text = pending
        text = f"{text} {raw.strip()}" if text else raw.strip()
        if text.endswith("\\"):
            pending = (start, text[:-1].rstrip())
            continue
        found.append(Command(block.doc, start, text))
        pending = None
    if pending is not None:
        found.append(Command(block.doc, pending[0], pending[1]))
    return found


def without_comment(text: str) -> str:
    """`text` up to its shell comment: a `#` outside quotes that starts a word."""
    quote = None
    for i, c in enumerate(text):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i]
    return text


def words_of(text: str) -> list[str]:
    """The shell's words of `text`, its operators (`|`, `>`, `(` …) as words of their own."""
    lexer = shlex.shlex(without_comment(text), posix=True, punctuation_chars=True)
    lexer.whitespace_split, lexer.commenters = True, ""
    return list(lexer)


def recognise(command: Command) -> str | None:
    """Fill in what the test runs for `command`; None when it can run, else why it cannot."""
    try:
        words = words_of(command.text)
    except ValueError as exc:
        return f"cannot parse it ({exc})"
    while words and ENV_ASSIGNMENT.match(words[0]):
        name, value = words.pop(0).split("=", 1)
        if SHELL_SYNTAX.search(value) or (words and SHELL_SYNTAX.search(words[0])):
            return f"it uses the shell ({name}={value} {' '.join(words[:1])})"
        command.env[name] = value
    if words[:1] in ([".venv/bin/retrieval"], ["retrieval"]):
        words = ["python", "-m", "retrieval", *words[1:]]
    if len(words) < 3 or words[0] not in PYTHONS or words[1:3] != ["-m", "retrieval"]:
        return "it is not `python -m retrieval …`"
    args = words[3:]
    if len(args) >= 2 and args[-2] == ">":
        command.stdout_to = args[-1]
        args = args[:-2]
    for word in [*args, *command.env.values(), command.stdout_to or ""]:
        if SHELL_SYNTAX.search(word):
            return f"it uses the shell ({word!r})"
        if OUTSIDE.search(word):
            return f"it names a path outside the repository or its folder ({word!r})"
    global_options = 2 if args[:1] == ["--db"] else 1 if args[:1] and args[0].startswith("--db=") else 0
    if args[global_options:global_options + 1] == ["serve"]:
        return "it starts a server"
    command.argv = args
    return None


def plan(doc: Path) -> tuple[list[Command], list[str]]:
    """`doc`'s commands to run, in document order (the shared sample's block left out), and the
    problems: unrecognised commands in unmarked blocks, marks without a reason."""
    to_run, problems = [], []
    for block in shell_blocks(doc):
        if block.mark is not None and block.mark.startswith("not run by tests"):
            if not EXCUSED.match(block.mark):
                problems.append(f"{doc.relative_to(REPO)}:{block.line}: say why: <!-- not run by tests: REASON -->")
            continue
        for command in commands(block):
            why_not = recognise(command)
            if why_not:
                problems.append(f"{command.where()}\n    cannot be run: {why_not}; run it, or mark its block "
                                "<!-- not run by tests: REASON -->")
            elif block.mark != SHARED_SAMPLE:
                to_run.append(command)
    return to_run, problems


def shared_sample_commands() -> list[Command]:
    marked = [b for doc in DOCS for b in shell_blocks(doc) if b.mark == SHARED_SAMPLE]
    assert len(marked) == 1, f"exactly one block is marked <!-- {SHARED_SAMPLE} -->, found {len(marked)}"
    found = commands(marked[0])
    assert found and all(recognise(c) is None for c in found)
    return found


def run(command: Command, folder: Path, db: Path, locks: Path) -> None:
    """`command` as `python -m retrieval` runs it (`retrieval.cli.main.main`, which
    `retrieval/__main__.py` calls), in this process: the models and compiled metrics load once
    for every command, not once per command (the console script and `python -m retrieval`
    themselves are run by tests/test_package.py)."""
    env = {**command.env, "WORKBENCH_DB": str(db), "WORKBENCH_LOCK_DIR": str(locks),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with pytest.MonkeyPatch.context() as patch, redirect_stdout(out), redirect_stderr(err):
        for name, value in env.items():
            patch.setenv(name, value)
        patch.chdir(folder)
        try:
            code = cli.main(command.argv)
        except SystemExit as exc:  # argparse's refusals, and commands that exit with a code
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    stdout, stderr = out.getvalue(), err.getvalue()
    print(f"{time.perf_counter() - started:5.1f} s  {command.where()}")
    report = f"{command.where()}\nexit code {code}\nstdout:\n{stdout[-3000:]}\nstderr:\n{stderr[-3000:]}"
    assert code == 0, report
    if command.shows_output:
        assert stdout.strip(), "the doc shows output, the command printed none:\n" + report
    if command.stdout_to is not None:
        written = folder / command.stdout_to
        written.write_text(stdout, encoding="utf-8")
        assert stdout.strip(), f"the doc writes {command.stdout_to}, the command printed nothing:\n" + report


def workspace(root: Path) -> tuple[Path, Path, Path]:
    """A folder to run in (the doc's relative paths: sample_data/ linked in, files written stay
    here), its database and lock folder."""
    folder = root / "work"
    folder.mkdir(parents=True)
    (folder / "sample_data").symlink_to(REPO / "sample_data", target_is_directory=True)
    return folder, root / "db", root / "locks"


@pytest.fixture(scope="module")
def shared_sample(tmp_path_factory) -> Path:
    """The database the shared sample's block makes (docs/cli.md), once for the module."""
    folder, db, locks = workspace(tmp_path_factory.mktemp("shared_sample"))
    for command in shared_sample_commands():
        run(command, folder, db, locks)
    return db


def test_every_command_in_the_docs_is_run_or_excused():
    problems = [problem for doc in DOCS for problem in plan(doc)[1]]
    assert not problems, "\n".join(problems)
    shared_sample_commands()


def test_the_recogniser_runs_the_project_and_excuses_nothing_else():
    def why(text: str, language: str = "bash") -> str | None:
        block = Block(REPO / "README.md", 1, language, None, text.splitlines())
        return recognise(commands(block)[0])

    assert why('.venv/bin/python -m retrieval search sample-xquad "Panthers defense" --top-k 3  # a comment') is None
    assert why("$ python -m retrieval collections list\nsample-xquad …", "console") is None
    assert why("python -m retrieval queryset export sample-xquad sample > sample.jsonl") is None
    assert why(".venv/bin/python -m retrieval search x \\\n    y --json") is None
    assert why("python -m retrieval search x 'C# and F#' --filter 'date<2024-01-01'") is None
    assert "not `python -m retrieval" in why("./run.sh app")
    assert "not `python -m retrieval" in why(".venv/bin/python benchmarks/bench_core.py")
    assert "outside the repository" in why(".venv/bin/python -m retrieval evaluate ../elsewhere/nfcorpus")
    assert "outside the repository" in why(".venv/bin/python -m retrieval ingest /data/big.jsonl --collection big")
    assert "the shell" in why("WORKBENCH_MCP_TOKEN=$(openssl rand -hex 24) .venv/bin/python -m retrieval serve")
    assert "the shell" in why("python -m retrieval collections list | head")
    assert "a server" in why(".venv/bin/python -m retrieval serve --collection sample-xquad")
    assert "a server" in why("python -m retrieval --db elsewhere serve --collection sample-xquad")
    assert "the shell" in why("python -m retrieval search x tags=a|b")
    shown = commands(Block(REPO / "README.md", 1, "console", None, ["$ python -m retrieval collections list", "x"]))
    assert shown[0].shows_output


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_the_commands_of_a_doc_run_on_the_sample(doc, request, tmp_path):
    to_run, problems = plan(doc)
    assert not problems, "\n".join(problems)
    if not to_run:
        return
    folder, db, locks = workspace(tmp_path)
    shutil.copytree(request.getfixturevalue("shared_sample"), db)
    for command in to_run:
        run(command, folder, db, locks)


LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?(?P<target>[^()\s<>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*<?(?P<target>\S+?)>?(?:\s|$)", re.MULTILINE)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose(doc: Path, code_spans: bool = False) -> str:
    """`doc` without its fenced blocks, and without its code spans unless `code_spans` (in both,
    brackets are code, not links)."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    inside = set()
    for block in blocks(doc):
        inside.update(range(block.line - 1, block.line + len(block.lines) + 1))
    text = "\n".join(line for i, line in enumerate(lines) if i not in inside)
    return text if code_spans else re.sub(r"(`+)(?:(?!\1).)+?\1", "", text, flags=re.DOTALL)


def anchors(doc: Path) -> set[str]:
    """The heading anchors GitHub makes for `doc`: lowercase, punctuation dropped, spaces as
    hyphens, a repeated one numbered."""
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", prose(doc, code_spans=True), flags=re.MULTILINE):
        text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
        slug = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN").replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
    made = set()
    for slug, repeats in seen.items():
        made.add(slug)
        made.update(f"{slug}-{n}" for n in range(1, repeats + 1))
    return made


def test_every_relative_link_points_at_an_existing_file():
    broken = []
    for doc in DOCS:
        text = prose(doc)
        for target in [m["target"] for m in LINK.finditer(text)] + [m["target"] for m in REFERENCE.finditer(text)]:
            if SCHEME.match(target) or target.startswith("/"):
                continue
            path, _, anchor = unquote(target).partition("#")
            resolved = (doc.parent / path).resolve() if path else doc
            if not resolved.exists():
                broken.append(f"{doc.relative_to(REPO)}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{doc.relative_to(REPO)}: {target} (no heading #{anchor} in {resolved.name})")
    assert not broken, "\n".join(broken)
