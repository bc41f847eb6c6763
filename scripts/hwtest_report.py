"""The hardware test runner's page for people (scripts/hwtest.py): OUT/hwtest.html, one
self-contained file rebuilt with the other reports after every step. Each device's laws are
a table with their statuses coloured; the bench figures stand beside their floors and
baselines as small bar charts (inline SVG); the kernel log's notable lines since the run
started, and the run's errors, close it. Python standard library only."""
import html

# A colour per status: green holds, red broke, amber neither.
COLOURS = {"Pass": "#2e7d32", "Fail": "#c62828", "Crash": "#6a1b9a", "Timeout": "#ad1457", "Hang": "#b71c1c",
           "Skip": "#757575", "Flake": "#ef6c00", "KnownFlake": "#f9a825", "ExpectedFail": "#5d7b8a",
           "UnexpectedPass": "#d84315"}

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.4em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.status { color: #fff; font-weight: 600; white-space: nowrap; }
.verdict { display: inline-block; padding: 0.3em 0.8em; color: #fff; font-weight: 700; border-radius: 3px; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: 0.6em; overflow-x: auto; font-size: 12px; }
.muted { color: #666; }
"""


def esc(value):
    return html.escape("" if value is None else str(value))


def status_cell(status):
    return f'<td class="status" style="background:{COLOURS.get(status, "#444")}">{esc(status)}</td>'


def bars(figure):
    """A small SVG of the figure, its floor and its baseline as horizontal bars on one scale;
    empty when the figure has no number."""
    rows = [(label, figure.get(key)) for label, key in (("rig", "value"), ("floor", "floor"),
                                                        ("baseline", "baseline"))]
    rows = [(label, float(v)) for label, v in rows if isinstance(v, (int, float))]
    if not rows or rows[0][0] != "rig":
        return ""
    top = max(v for _, v in rows) or 1.0
    colours = {"rig": "#1565c0", "floor": "#9e9e9e", "baseline": "#8d6e63"}
    parts = []
    for i, (label, v) in enumerate(rows):
        width = max(1.0, 160.0 * v / top)
        y = 2 + 14 * i
        parts.append(f'<text x="0" y="{y + 10}" font-size="10">{label}</text>'
                     f'<rect class="bar" data-of="{label}" x="52" y="{y}" width="{width:.1f}" height="11" '
                     f'fill="{colours[label]}"/>'
                     f'<text x="{56 + width:.1f}" y="{y + 10}" font-size="10">{v:g}</text>')
    return (f'<svg class="chart" width="280" height="{4 + 14 * len(rows)}" role="img" '
            f'aria-label="{esc(figure.get("name"))}">' + "".join(parts) + "</svg>")


def page(summary):
    """The page for the runner's summary (summarize's dict)."""
    exit_code = summary.get("exit_code")
    verdict, colour = {0: ("passed", "#2e7d32"), 1: ("tests failed", "#c62828"),
                       3: ("infrastructure error: retry elsewhere", "#6d4c41")}.get(exit_code, ("?", "#444"))
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>rig hwtest: {esc(summary.get('host'))}</title><style>{STYLE}</style></head><body>",
           f"<h1>rig hardware tests on {esc(summary.get('host'))}</h1>",
           f'<p><span class="verdict" id="verdict" style="background:{colour}">{esc(verdict)}</span> '
           f'<span class="muted">exit {esc(exit_code)} · started {esc(summary.get("started"))} · updated '
           f'{esc(summary.get("updated"))}</span></p>']
    build, kernel = summary.get("build") or {}, summary.get("kernel") or {}
    out.append("<table><tr><th>rig</th><td>" + esc(build.get("commit")) + (" (changed)" if build.get("dirty") else "")
               + " · " + esc(build.get("buildtype")) + "</td></tr><tr><th>kernel</th><td>"
               + esc(kernel.get("release")) + "</td></tr><tr><th>lock</th><td>"
               + esc((summary.get("lock") or {}).get("holder")) + "</td></tr><tr><th>statuses</th><td>"
               + esc(", ".join(f"{k} {v}" for k, v in sorted((summary.get("statuses") or {}).items())))
               + "</td></tr></table>")

    cases = summary.get("cases") or []
    for device in dict.fromkeys(c["device"] for c in cases):
        mine = [c for c in cases if c["device"] == device]
        out.append(f'<h2>{esc(device)}</h2><table class="laws" data-device="{esc(device)}">'
                   "<tr><th>law</th><th>status</th><th>seconds</th><th>message</th></tr>")
        for c in mine:
            out.append(f"<tr><td>{esc(c['law'])}</td>{status_cell(c['status'])}"
                       f"<td>{esc(c.get('seconds', ''))}</td><td>{esc(c.get('message', ''))}</td></tr>")
        out.append("</table>")

    bench = summary.get("bench")
    if bench and bench.get("figures"):
        out.append('<h2>Benchmarks</h2><table class="figures"><tr><th>figure</th><th>status</th>'
                   "<th>rig, floor, baseline</th><th>unit</th><th>message</th></tr>")
        for f in bench["figures"]:
            out.append(f"<tr><td>{esc(f.get('name'))}</td>{status_cell(f.get('status'))}<td>{bars(f)}</td>"
                       f"<td>{esc(f.get('unit', ''))}</td><td>{esc(f.get('message', ''))}</td></tr>")
        out.append("</table>")
        if bench.get("message"):
            out.append(f'<p class="muted">{esc(bench["message"])}</p>')

    slowest = summary.get("slowest") or []
    if slowest:
        out.append('<h2>Slowest steps</h2><table class="slowest"><tr><th>step</th><th>seconds</th></tr>')
        out += [f"<tr><td>{esc(s['step'])}</td><td>{esc(s['seconds'])}</td></tr>" for s in slowest]
        out.append("</table>")

    lost = summary.get("lost") or []
    if lost or summary.get("errors"):
        out.append("<h2>Losses and errors</h2><ul>")
        out += [f"<li>{esc(r.get('device'))} lost: {esc(r.get('message'))}</li>" for r in lost]
        out += [f"<li>{esc(e)}</li>" for e in summary.get("errors") or []]
        out.append("</ul>")
    for r in lost:
        dmesg = r.get("dmesg") or {}
        lines = dmesg.get("notable") if dmesg.get("readable") else None
        out.append(f"<h2>Kernel log after {esc(r.get('device'))}'s loss</h2>")
        out.append(f'<pre class="dmesg">{esc(chr(10).join(lines))}</pre>' if lines is not None else
                   f'<p class="muted">{esc(dmesg.get("message") or "the kernel log was not readable")}</p>')
    out.append("</body></html>")
    return "\n".join(out) + "\n"
