"""The layering `docs/architecture.md` describes, checked: every module imports in a fresh
interpreter, the project's import graph has no cycle (lazy imports inside functions included, since
a lazy import is often how a circle hides), every import goes down the layer table (`LAYERS`), the
core never imports Streamlit or the UI, the UI reaches the store only through the Workbench (it may
import types and validators from it), and no package or module outgrows a newcomer's reading."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("retrieval", "ui")
# What ui/ may import from retrieval.store (its public names, never a module inside it): types, a
# validator, and (resources.py, which makes the process-wide Workbench) the Store class and the
# default location.
UI_STORE_NAMES = {"CollectionInfo", "CollectionStats", "Progress", "validate_collection_name", "display_name",
                  "collection_versions", "listed_versions", "version_label"}
UI_STORE_CONSTRUCTION = {"Store", "default_db_uri"}
# The write side of indexing/: only the Workbench calls it (the UI and pages may read files with
# its readers, never write around the Workbench).
INDEXING_READERS = {"parse_path", "parse_bytes", "parse_files", "open_stream", "ParseOptions", "ColumnMapping"}
WRITE_SIDE = tuple(f"retrieval.indexing.{m}" for m in ("pipeline", "writer", "derive", "indexes", "plan", "graph"))


def project_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    return modules


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def imports_of(name: str, path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """(module imported, names imported from it) for every import outside `if TYPE_CHECKING:`,
    relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.append((base, tuple(alias.name for alias in node.names)))
            for alias in node.names:  # `from . import x` imports the submodule x
                found.append((f"{base}.{alias.name}", ()))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: {target for target, _ in imports_of(name, path) if target in modules and target != name}
            for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle as a list of modules (first == last), or None; depth-first search."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_find_cycle_finds_one_and_only_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    assert "retrieval.search.config" in graph and "retrieval.sources" in graph["retrieval.search.config"]
    assert find_cycle(graph) is None


def test_every_module_imports_in_a_fresh_interpreter():
    names = [n for n in project_modules() if n != "retrieval.__main__"]
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\nprint('ok')"
    done = subprocess.run([sys.executable, "-c", code, *names], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")


# The layer table of docs/architecture.md: a module may import its own package (any depth) and the
# units of a lower layer, never a higher one nor another unit of its own layer (so the front ends
# never import each other), except the pairs in LAYER_EXCEPTIONS. A unit is a top-level module of
# `retrieval` or a package of it; `ui` is one unit.
LAYERS: dict[str, int] = {
    "retrieval": 0, "retrieval.types": 0,                       # plain data and errors; the package itself
    "retrieval.limits": 1, "retrieval.cache": 1,                # every bound; every cache and its LRU
    "retrieval.addresses": 1,                                   # which hosts outgoing requests may call
    "retrieval.paths": 1,                                       # where the checkout's own folders are
    "retrieval.store": 2, "retrieval.text": 2,                  # LanceDB tables, locks, versions; text analysis
    "retrieval.models": 3,                                      # encoders and their backends
    "retrieval.sources": 4, "retrieval.judging": 4,             # one module per source; judgments and raters
    "retrieval.indexing": 5,                                    # files in, the one write path
    "retrieval.search": 6,                                      # config, plan, fusion, retriever, Workbench
    "retrieval.evaluation": 7,                                  # metrics, sweep, A/B, snapshots, optimiser
    "retrieval.rule_tuning": 8,                                 # query rules measured and suggested
    "retrieval.cli": 9, "retrieval.serve": 9, "ui": 9,          # the front ends
    "retrieval.__main__": 10,
}
LAYER_EXCEPTIONS = {
    ("retrieval.cli", "retrieval.serve"),  # `retrieval serve` starts the MCP server
    ("ui", "retrieval.serve.launch"),      # the Evaluate page shows how to start it (imports no server)
}


def unit_of(module: str) -> str:
    if module.startswith("ui"):
        return "ui"
    parts = module.split(".")
    return ".".join(parts[:2])


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in graph.items():
        unit = unit_of(module)
        for target in targets:
            other = unit_of(target)
            if other == unit or other == "retrieval":
                continue
            excepted = any(unit == a and (target == b or target.startswith(b + ".") or other == b)
                           for a, b in LAYER_EXCEPTIONS)
            if LAYERS[other] >= LAYERS[unit] and not excepted:
                found.append(f"{module} ({unit}, layer {LAYERS[unit]}) imports {target} (layer {LAYERS[other]})")
    return sorted(found)


def test_every_unit_has_a_layer():
    assert {unit_of(m) for m in project_modules()} <= set(LAYERS)


def test_layer_violations_are_found():
    assert layer_violations({"retrieval.store.database": {"retrieval.search.config"}}) == [
        "retrieval.store.database (retrieval.store, layer 2) imports retrieval.search.config (layer 6)"]
    assert layer_violations({"retrieval.cli.main": {"retrieval.serve.server"}}) == []
    assert layer_violations({"retrieval.serve.server": {"retrieval.cli.main"}}) != []
    assert layer_violations({"ui.page": {"retrieval.serve.server"}}) != []
    assert layer_violations({"ui.page": {"retrieval.serve.launch"}}) == []


def test_every_import_goes_down_the_layer_table():
    assert layer_violations(import_graph()) == []


def test_no_package_holds_more_than_fifteen_modules():
    folders: dict[Path, int] = {}
    for path in project_modules().values():
        if path.name != "__init__.py":
            folders[path.parent] = folders.get(path.parent, 0) + 1
    assert {str(f.relative_to(REPO)): n for f, n in folders.items() if n > 15} == {}


MAX_LINES = 400
# A module over MAX_LINES lines says why in its docstring, with this phrase.
LONG_REASON = "Longer than 400 lines because"


def test_no_module_over_400_lines_without_a_stated_reason():
    long = {}
    for name, path in project_modules().items():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_LINES and LONG_REASON not in (ast.get_docstring(ast.parse(text)) or ""):
            long[name] = text.count("\n")
    assert long == {}


def test_the_core_imports_neither_streamlit_nor_the_ui():
    for name, path in project_modules().items():
        if name.startswith("retrieval"):
            targets = {target.split(".")[0] for target, _ in imports_of(name, path)}
            assert not targets & {"streamlit", "ui"}, name


def test_the_ui_reaches_the_store_only_through_the_workbench():
    modules = project_modules()
    for name, path in modules.items():
        if not name.startswith("ui"):
            continue
        allowed = UI_STORE_NAMES | (UI_STORE_CONSTRUCTION if name == "ui.resources" else set())
        for target, names in imports_of(name, path):
            if target == "retrieval.store":
                assert set(names) <= allowed, f"{name} imports {sorted(set(names) - allowed)} from the store"
            assert not (target.startswith("retrieval.store.") and target in modules), \
                f"{name} reaches into the storage layer"
            assert not target.startswith(WRITE_SIDE), f"{name} writes around the Workbench"
            if target == "retrieval.indexing":  # its re-exports: the readers' names only
                assert set(names) <= INDEXING_READERS, f"{name} writes around the Workbench: {names}"


def test_pages_import_nothing_from_the_store():
    for path in [REPO / "app.py", *sorted((REPO / "pages").glob("*.py"))]:
        targets = {target for target, _ in imports_of(path.stem, path)}
        assert not {t for t in targets if t.startswith(("retrieval.store", *WRITE_SIDE))}, path.name


def test_fusion_methods_are_decided_only_in_their_registry():
    """A fusion method is one entry of `retrieval/search/fusion/methods.py` (formula, display factor,
    parameters, help, sweep points): no other module compares a config's method or combination
    with a name, so a new method needs no edit elsewhere (DBSF was added so)."""
    import re

    compares = re.compile(r"\.(fusion|combination)\s*(==|!=)|(==|!=)\s*[\w.]*\.(fusion|combination)\b"
                          r"|\[\"fusion\"\]\s*(==|!=)|get\(\"fusion\"\)\s*(==|!=)")
    paths = {**project_modules(), "app": REPO / "app.py",
             **{f"pages.{p.stem}": p for p in (REPO / "pages").glob("*.py")}}
    for name, path in paths.items():
        if name == "retrieval.search.fusion.methods":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            where = f"{path.relative_to(REPO)}:{number}"
            assert not compares.search(line), f"{where} decides by method name: {line.strip()}"
    method_names = re.compile(r"""["'](rrf|weighted|dbsf)["']\s*(==|!=)|(==|!=)\s*["'](rrf|weighted|dbsf)["']""")
    for name, path in paths.items():
        if name != "retrieval.search.fusion.methods":
            assert not method_names.search(path.read_text(encoding="utf-8")), path


def test_every_package_lists_its_modules():
    """A package's `__init__.py` docstring is its table of contents: it names each of its modules
    (`plan.py`) and subpackages (`fusion/`), so the tree and the text cannot drift apart."""
    missing = {}
    for package in PACKAGES:
        for init in sorted((REPO / package).rglob("__init__.py")):
            folder = init.parent
            doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
            names = [p.name for p in folder.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
            names += [f"{p.name}/" for p in folder.iterdir() if (p / "__init__.py").is_file()]
            if absent := sorted(n for n in names if n not in doc):
                missing[str(folder.relative_to(REPO))] = absent
    assert missing == {}
