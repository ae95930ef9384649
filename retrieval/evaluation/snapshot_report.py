"""A snapshot diff as one self-contained HTML file for people without the tool.

No script, no font, no image and no link leaves the file: styles are inline, the cause waterfall
is inline SVG. Text uses the system's fonts; when the page holds Chinese (or other CJK) text, the
app's bundled Noto Sans SC subset (`static/fonts/`, OFL 1.1) is embedded as a data URL for those
characters only (its unicode-range), so the report reads on a machine without a CJK font (~2.5 MB
added; an English report stays a few kB). Every piece of user text (names, queries, document ids,
config values) is HTML-escaped. The page: the headline change with its 95 % interval and p, what
changed in words, the causes as a waterfall, and the biggest wins and losses with both result
lists side by side.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from html import escape

from retrieval.evaluation.evaluate import metric_label
from retrieval.evaluation.paired import p_text
from retrieval.evaluation.snapshot_diff import result_lists
from retrieval.evaluation.snapshots import Snapshot
from retrieval.paths import REPO_DIR
from retrieval.sources import label

CJK_FONT = REPO_DIR / "static" / "fonts" / "NotoSansSC-subset.woff2"
CJK_RANGE = "U+3000-303F, U+3400-4DBF, U+4E00-9FFF, U+F900-FAFF, U+FF00-FFEF"  # as .streamlit/config.toml
CJK_TEXT = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
STYLE = """
body{font-family:workbench-cjk,system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","Noto Sans CJK SC","PingFang SC",
"Microsoft YaHei",sans-serif;margin:0 auto;max-width:56rem;padding:1rem;color:#0f172a;line-height:1.45}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:1.6rem}.big{font-size:1.3rem;font-weight:600}
.good{color:#15803d}.bad{color:#b91c1c}.muted{color:#64748b}table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #e2e8f0;padding:.25rem .4rem;text-align:left;vertical-align:top;font-size:.9rem}
.pair{display:flex;flex-wrap:wrap;gap:1rem}.pair>div{flex:1 1 16rem}ol{margin:.2rem 0;padding-left:1.4rem}
.rel{font-weight:600}svg{max-width:100%;height:auto}
"""


def cjk_font_face(text: str) -> str:
    """The bundled CJK font as an inline @font-face when `text` holds CJK characters (else '')."""
    if not CJK_TEXT.search(text) or not CJK_FONT.is_file():
        return ""
    data = base64.b64encode(CJK_FONT.read_bytes()).decode("ascii")
    return (f"@font-face{{font-family:workbench-cjk;src:url(data:font/woff2;base64,{data}) format('woff2');"
            f"unicode-range:{CJK_RANGE}}}")


def config_changes(a: Snapshot, b: Snapshot) -> list[str]:
    """'field: old → new' for each config field that differs, in the app's words: per-source
    values by the sources' labels ('weights: BM25 0.4, vector 0.6 → BM25 0.3, vector 0.7'),
    not a Python dict with internal names."""
    old, new = a.config.to_dict(), b.config.to_dict()
    return [f"{field}: {_value(field, old.get(field))} → {_value(field, new.get(field))}"
            for field in new if old.get(field) != new.get(field)]


def _value(field: str, value) -> str:
    if isinstance(value, dict):
        if not value:
            return "none"
        named = (label(k) for k in value) if field in ("weights", "min_raw") else map(str, value)
        return ", ".join(f"{name} {v:g}" if isinstance(v, (int, float)) else f"{name} {v}"
                         for name, v in zip(named, value.values(), strict=True))
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return "none" if value is None else str(value)


def changes_in_words(a: Snapshot, b: Snapshot) -> list[str]:
    lines = []
    changes = config_changes(a, b)
    lines.append("Config: " + ("; ".join(changes) if changes else "unchanged") + ".")
    if (a.table_version, a.doc_count) == (b.table_version, b.doc_count):
        lines.append(f"Corpus: unchanged (version {a.table_version}, {a.doc_count} documents).")
    else:
        lines.append(f"Corpus: version {a.table_version} → {b.table_version}, {a.doc_count} → {b.doc_count} documents.")
    judged_a = sum(len(d) for d in a.qrels.values())
    judged_b = sum(len(d) for d in b.qrels.values())
    if a.judgments_key == b.judgments_key:
        lines.append(f"Judgments: unchanged ({len(a.qrels)} queries, {judged_a} judgments).")
    else:
        lines.append(f"Judgments: {len(a.qrels)} → {len(b.qrels)} judged queries, {judged_a} → {judged_b} judgments.")
    return lines


def waterfall_range(d: Mapping) -> tuple[float, float]:
    """The value axis of a cause waterfall (this report's and the app's): around the levels it
    passes (A, A + each share …, B), not from 0, so that a +0.0176 change on 0.9 fills most of
    the plot instead of a 2-pixel sliver. With s = highest − lowest level (at least 0.01): from
    max(0, lowest − s) to highest + s / 4."""
    levels = [d["a"]["value"]]
    for share in d["causes"].values():
        levels.append(levels[-1] + share)
    levels.append(d["b"]["value"])
    low, high = min(levels), max(levels)
    span = max(high - low, 0.01)
    return max(0.0, low - span), high + span / 4


def waterfall_svg(d: Mapping) -> str:
    """A → each cause's share → B as bars on one scale (inline SVG), the axis from
    `waterfall_range`'s floor (said under the bars), not from 0."""
    floor, top = waterfall_range(d)
    steps = [(d["a"]["name"], floor, d["a"]["value"], "#64748b")]
    level = d["a"]["value"]
    for cause, share in d["causes"].items():
        steps.append((cause, level, level + share, "#16a34a" if share >= 0 else "#dc2626"))
        level += share
    steps.append((d["b"]["name"], floor, d["b"]["value"], "#64748b"))
    width, height, bar = 120 * len(steps), 236, 70
    scale = (height - 76) / ((top - floor) or 1.0)
    parts = [f'<svg viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="{escape(metric_label(d["metric"]))} from A to B by cause">']
    for i, (name, start, end, colour) in enumerate(steps):
        x = i * 120 + 25
        y0, y1 = height - 56 - (max(start, end) - floor) * scale, height - 56 - (min(start, end) - floor) * scale
        value = end - start if 0 < i < len(steps) - 1 else end
        parts.append(f'<rect x="{x}" y="{y0:.1f}" width="{bar}" height="{max(y1 - y0, 1):.1f}" fill="{colour}"/>')
        parts.append(f'<text x="{x + bar / 2}" y="{y0 - 4:.1f}" font-size="12" text-anchor="middle">'
                     f'{value:+.4f}</text>' if 0 < i < len(steps) - 1 else
                     f'<text x="{x + bar / 2}" y="{y0 - 4:.1f}" font-size="12" text-anchor="middle">{value:.4f}</text>')
        parts.append(f'<text x="{x + bar / 2}" y="{height - 38}" font-size="11" text-anchor="middle">'
                     f'{escape(str(name))[:18]}</text>')
    parts.append(f'<text x="4" y="{height - 8}" font-size="11" fill="#64748b">'
                 f'{escape(metric_label(d["metric"]))} axis from {floor:.4f} (not from 0)</text>')
    parts.append("</svg>")
    return "".join(parts)


def _results(rows: list[dict]) -> str:
    """One side of `snapshot_diff.result_lists` as a list: judged documents in bold with their
    grade, and on B's side each document's move against A."""
    items = "".join(f'<li class="{"rel" if (r["grade"] or 0) > 0 else ""}">{escape(r["document"])}'
                    f'{"" if r["grade"] is None else " (grade " + str(r["grade"]) + ")"}'
                    f'{" " + escape(r["change"]) if r.get("change") not in (None, "=") else ""}</li>' for r in rows)
    return f"<ol>{items}</ol>" if items else '<p class="muted">no results</p>'


def _entries(title: str, entries: list[Mapping], a: Snapshot, b: Snapshot) -> str:
    if not entries:
        return ""
    rows = []
    for e in entries:
        causes = "; ".join(f"{escape(c)} {v:+.4f}" for c, v in e["causes"].items())
        left, right = result_lists(a, b, e["query_id"], k=5)
        rows.append(f'<h3>{escape(e["query"] or e["query_id"])} <span class="muted">({escape(e["query_id"])}: '
                    f'{e["a"]:.4f} → {e["b"]:.4f}, Δ {e["delta"]:+.4f}{"; " + causes if causes else ""})</span></h3>'
                    f'<div class="pair"><div><b>{escape(a.name)}</b>{_results(left)}</div>'
                    f'<div><b>{escape(b.name)}</b>{_results(right)}</div></div>')
    return f"<h2>{escape(title)}</h2>" + "".join(rows)


def report_html(d: Mapping, a: Snapshot, b: Snapshot, top: int = 5) -> str:
    """The report for diff `d` (`snapshot_diff.diff(a, b)`): see the module docstring."""
    better = d["delta"] > 0
    verdict = ("better" if better else "worse") if d["delta"] else "unchanged"
    significant = "significant" if d["p_value"] < 0.05 else "not significant"
    low, high = d["delta_ci95"]
    body = [
        f"<h1>{escape(metric_label(d['metric']))}: {escape(a.name)} → {escape(b.name)}</h1>",
        f'<p class="big {"good" if better else "bad" if d["delta"] < 0 else ""}">{d["a"]["value"]:.4f} → '
        f'{d["b"]["value"]:.4f} (Δ {d["delta"]:+.4f}, {verdict})</p>',
        f"<p>95 % interval of Δ: {low:+.4f} … {high:+.4f}; paired randomization test {p_text(d['p_value'])} "
        f"({significant} at 0.05); {d['n_queries']} queries judged in both: {d['wins']} better, "
        f"{d['losses']} worse, {d['ties']} equal.</p>",
        "<h2>What changed</h2><ul>" + "".join(f"<li>{escape(line)}</li>" for line in changes_in_words(a, b)) + "</ul>",
    ]
    if d["causes"]:
        body.append("<h2>Where the change came from</h2>" + waterfall_svg(d) +
                    '<p class="muted">Each cause\'s share of Δ (Shapley values: the shares add up to Δ).</p>' +
                    "".join(f'<p class="muted">{escape(note)}</p>' for note in d.get("notes", ())))
    body.append(_entries("Biggest wins", list(d["winners"][:top]), a, b))
    body.append(_entries("Biggest losses", list(d["losers"][:top]), a, b))
    body.append(f'<p class="muted">Collection {escape(a.collection)}, query set {escape(a.query_set)}; snapshots made '
                f'{escape(a.created[:19])} and {escape(b.created[:19])}. Judged documents in bold; ▲ / ▼ / new: a '
                "document's move in B against A.</p>")
    content = "".join(body)
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(a.name)} → {escape(b.name)}</title><style>{cjk_font_face(content)}{STYLE}</style>"
            f"</head><body>{content}</body></html>")
