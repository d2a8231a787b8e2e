"""fleet.html: the fleet table as one page, one filterable table.

A row per EP device of each run gathered (fleet.json's rows); each cell links into that run's
report (report.html, at the part the cell comes from). The page is self-contained: its style and
its filter (a few lines of script that hide the rows not holding every word typed, or given as
`?q=`) are inline,
and it loads nothing from anywhere. A cell its run could not measure reads "not known", its
title saying why (an EP that get_ep_devices() does not list was never asked for its memory).
"""

from __future__ import annotations

from html import escape
from typing import Any

from conformance.tools.fleet_reader import MEMORIES, UNLISTED

LABELS = {"cpu": "CPU", "default": "DEFAULT", "host_accessible": "HOST_ACCESSIBLE"}
SHORT = {"cpu": "CPU", "default": "DEF", "host_accessible": "HOST"}  # column heads: HOST_ACCESSIBLE in full makes the table twice as wide
DIRECTIONS = [(s, d) for s in MEMORIES for d in MEMORIES]
GOOD = {"supported", "not_required", "conformant", "importer"}
BAD = {"broken", "required_but_missing", "non_conformant"}

STYLE = """
body{font:13px/1.35 system-ui,sans-serif;margin:1.5em;color:#1b1b1b;background:#fff}
h1{font-size:1.4em;margin:0 0 .3em}
p{max-width:70em}
#filter{font-size:1em;padding:.3em .5em;width:28em;margin:.5em 0}
.scroll{overflow-x:auto}
table{border-collapse:collapse}
th,td{border:1px solid #c8c8c8;padding:.25em .45em;vertical-align:top;text-align:left}
th{background:#eef1f5;position:sticky;top:0}
td a{color:inherit;text-decoration:none;display:block}
td a:hover{text-decoration:underline}
.good{background:#dff3e0}
.bad{background:#f8d7d7}
.other{background:#fff4d1}
.none{color:#777}
small{color:#555}
@media (prefers-color-scheme: dark){
 body{background:#161616;color:#e6e6e6} th{background:#2a2f36} th,td{border-color:#444}
 .good{background:#1f3d24} .bad{background:#4a1f1f} .other{background:#4a3f1a} .none,small{color:#aaa}
}
"""

# The filter: rows hidden unless they contain every word typed; `fleet.html?q=words` opens the
# page filtered (a link to "the OpenVINO rows" is fleet.html?q=openvino).
SCRIPT = """
const box=document.getElementById('filter');
function apply(){
 const words=box.value.toLowerCase().split(/\\s+/).filter(Boolean);
 let shown=0;
 for(const row of document.querySelectorAll('#fleet tbody tr')){
  const text=row.textContent.toLowerCase();
  const keep=words.every(w=>text.includes(w));
  row.hidden=!keep; shown+=keep;
 }
 document.getElementById('shown').textContent=shown;
}
box.value=new URLSearchParams(location.search).get('q')||'';
box.addEventListener('input',apply);
apply();
"""


def _e(text: Any) -> str:
    return escape(str(text), quote=True)


def _link(row: dict[str, Any], anchor: str) -> str:
    report = row["run"]["report"]
    return report + (f"#{anchor}" if anchor and report.endswith(".html") else "")


def _cell(row: dict[str, Any], anchor: str, text: str, css: str = "", title: str = "") -> str:
    attributes = (f' class="{css}"' if css else "") + (f' title="{_e(title)}"' if title else "")
    return f'<td{attributes}><a href="{_e(_link(row, anchor))}">{text}</a></td>'


def _status_class(status: str) -> str:
    return "good" if status in GOOD else "bad" if status in BAD else "none" if status in ("", "-", "none", "unknown") else "other"


def _memory_cell(row: dict[str, Any], kind: str) -> str:
    memory = row["memory"][kind]
    if not row["ep_device"]:
        return _cell(row, "version-chain-heading", "not known <small>not listed by get_ep_devices()</small>", "none", UNLISTED)
    if memory is None:
        text = "plain CPU memory" if kind == "default" else "none"
        why = "its EP device advertises no DEFAULT memory of its own" if kind == "default" else "its EP device advertises no HOST_ACCESSIBLE memory"
        return _cell(row, "version-chain-heading", _e(text), "none", why)
    return _cell(row, "version-chain-heading", f"{_e(memory['name'])} <small>{_e(memory['device_type'])}</small>", title=memory["label"])


def _copy_cell(row: dict[str, Any], source: str, destination: str) -> str:
    pair = next((p for p in row["copies"] if (p["source"], p["destination"]) == (source, destination)), None)
    if pair is None:
        text, why = _absent_pair(row, source, destination)
        return _cell(row, "capabilities", text, "none", why)
    plain = "" if row["ep_device"] else f"between plain CPU memory: {UNLISTED}. "
    return _cell(row, "capabilities", _e(pair["status"]) + (" <small>(required)</small>" if pair["required"] else ""),
                 _status_class(pair["status"]), plain + pair["detail"])


def _absent_pair(row: dict[str, Any], source: str, destination: str) -> tuple[str, str]:
    """(the cell's text, its title) for a direction the row's copy matrix lacks: not known when
    the run could not measure it, a dash when the EP device has no such memory to copy."""
    if not row["ep_device"]:
        return "not known", UNLISTED
    if row["probe_error"]:
        return "not known", f"its copy probe was lost: {row['probe_error']}"
    if row["memory"]["host_accessible"] is None and "host_accessible" in (source, destination):
        return "&mdash;", "its EP device advertises no HOST_ACCESSIBLE memory"
    default = row["memory"]["default"]
    if "default" in (source, destination) and (default is None or default["device_type"] == "cpu"):
        return "&mdash;", "its DEFAULT memory is CPU memory: the CPU columns stand for it"
    return "not known", "the run's copy matrix has no such pair"


def _others_cell(row: dict[str, Any]) -> str:
    others = [p for p in row["copies"] if p["source"] not in MEMORIES or p["destination"] not in MEMORIES]
    if not others:
        return _cell(row, "capabilities", "&mdash;", "none")
    lines = "<br>".join(f"{_e(p['source'])} &rarr; {_e(p['destination'])}: {_e(p['status'])}" for p in others)
    worst = "bad" if any(p["status"] in BAD for p in others) else "good" if all(p["status"] in GOOD for p in others) else "other"
    return _cell(row, "capabilities", lines, worst)


def _importer_cells(row: dict[str, Any]) -> list[str]:
    importer = row["importer"]
    status = importer["status"]
    text = {"importer": "yes", "none": "no", "not_run": "not probed", "unknown": "not recorded"}.get(status, status)
    memory = importer.get("tensor_memory")
    imported = f"{_e(memory.get('memory_type'))} <small>{_e(memory.get('name'))}</small>" if memory else "&mdash;"
    return [_cell(row, "capabilities", _e(text), _status_class(status), importer["reason"]),
            _cell(row, "capabilities", _e(", ".join(importer["handle_types"])) or "&mdash;", "" if importer["handle_types"] else "none"),
            _cell(row, "capabilities", imported, "" if memory else "none")]


def _session_cell(row: dict[str, Any], which: str) -> str:
    places = row["session"][which]
    anchor = "contract-memory-info.session-" + which
    if not places:
        return _cell(row, anchor, "not measured", "none", row["session"]["reason"])
    lines = "<br>".join(f"{_e(p['memory'].split(' (')[0])} <small>{p['cases']} case{'s' if p['cases'] != 1 else ''}"
                        + (f", {p['failed']} not passed" if p["failed"] else "") + "</small>" for p in places)
    titles = "; ".join(p["memory"] for p in places)
    return _cell(row, anchor, lines, "bad" if any(p["failed"] for p in places) else "", titles)


def _streams_cell(row: dict[str, Any]) -> str:
    streams = row.get("streams") or {"stream_aware": None, "outcome": None, "reason": "not recorded"}
    aware = streams["stream_aware"]
    text = "unknown" if aware is None else "yes" if aware else "no"
    outcome = f" <small>({_e(streams['outcome'])})</small>" if aware is not None and streams["outcome"] not in (None, "pass") else ""
    css = "none" if aware is None else "bad" if streams["outcome"] == "fail" else ""
    return _cell(row, "results", _e(text) + outcome, css, streams["reason"])


def _row(row: dict[str, Any], directions: list[tuple[str, str]]) -> str:
    run = row["run"]
    scope = "" if run["complete"] else " <small>(partial)</small>"
    shard = run.get("shard")
    scope += f" <small>(shard {_e(shard.get('text', shard) if isinstance(shard, dict) else shard)})</small>" if shard else ""
    cells = [
        _cell(row, "version-chain-heading", f"{_e(row['ep'])}<br><small>{_e(run['name'])}</small>", title=run["source"]),
        _cell(row, "version-chain-heading", _e(row["ep_version"] or "-")),
        _cell(row, "version-chain-heading", _e(f"{row['onnxruntime'] or '-'}") + f" <small>{_e(row['onnxruntime_package'] or '')}</small>"),
        _cell(row, "version-chain-heading", _e(row["device"]) + (f" <small>{_e(row['hardware'])}</small>" if row["hardware"] else "")),
        _memory_cell(row, "default"),
        _memory_cell(row, "host_accessible"),
        *(_copy_cell(row, s, d) for s, d in directions),
        _others_cell(row),
        *_importer_cells(row),
        _session_cell(row, "inputs"),
        _session_cell(row, "outputs"),
        _streams_cell(row),
        _cell(row, "verdict", _e(run["verdict"]) + scope, _status_class(run["verdict"]), "; ".join(run["verdict_reasons"])),
        _cell(row, "verdict", _e(run["date"] or "-")),
    ]
    return f'<tr id="{_e(row["id"])}">' + "".join(cells) + "</tr>"


def render(data: dict[str, Any]) -> str:
    rows = data["rows"]
    # Only the directions some row has: a table of CPU EPs alone has no HOST_ACCESSIBLE columns.
    present = {(p["source"], p["destination"]) for row in rows for p in row["copies"]}
    directions = [d for d in DIRECTIONS if d in present] or [("cpu", "cpu")]
    heads = ["EP", "EP version", "onnxruntime", "device", "DEFAULT memory", "HOST_ACCESSIBLE memory",
             *(f'<abbr title="copy_tensors {LABELS[s]} to {LABELS[d]}">{SHORT[s]}&rarr;{SHORT[d]}</abbr>' for s, d in directions), "copies with other devices",
             "importer", "handle types", "imported tensors report", "session inputs live in", "session outputs live in",
             '<abbr title="create_sync_stream() gives a stream (streams.sync-stream)">stream-aware</abbr>', "verdict", "date"]
    body = "\n".join(_row(row, directions) for row in rows)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Fleet table: {len(rows)} EP devices of {data['runs']} runs</title><style>{STYLE}</style></head>
<body>
<h1>Fleet table</h1>
<p>What {data['runs']} conformance run{'s' if data['runs'] != 1 else ''} measured, one row per EP device: the memory it advertises,
each <code>copy_tensors</code> direction tried with real bytes, its importer, where session inputs and outputs lived, whether it
gives sync streams, and the run's verdict. Each cell links to the run's report. A cell reading <em>not known</em> is one its run could
not measure: its title says why. Written by <code>ort-conformance fleet</code> (kit {_e(data['kit_version'])})
at {_e(data['generated'])}; the same rows are in <code>fleet.json</code>, which <code>conformance.fleet.load()</code> reads.</p>
<input type="search" id="filter" placeholder="filter: words every shown row contains (e.g. openvino supported)" aria-label="filter the rows">
<span><span id="shown">{len(rows)}</span> of {len(rows)} rows</span>
<div class="scroll"><table id="fleet">
<thead><tr>{''.join(f'<th scope="col">{h}</th>' for h in heads)}</tr></thead>
<tbody>
{body}
</tbody></table></div>
<script>{SCRIPT}</script>
</body></html>
"""
