/**
 * The dashboard's page frame and shared pieces: the layout with its navigation and styles
 * (Polaris' spacing, type scale and colours), cards, chart cards with their data tables.
 *
 * @module
 */
import type { Child } from "hono/jsx";
import { FONT_STACK, PALETTE } from "../../lib/dashboard/charts.ts";
import type { PageContext } from "./page_context.ts";

const _STYLES = `
*{box-sizing:border-box}
body{margin:0;background:#f1f1f1;color:${PALETTE.text};font:13px/20px ${FONT_STACK}}
a{color:${PALETTE.primary};text-decoration:none}a:hover{text-decoration:underline}
header.top{background:#1a1a1a;color:#e3e3e3;padding:10px 24px;display:flex;gap:24px;align-items:center}
header.top strong{color:#fff;font-size:14px}
nav a{color:#e3e3e3;padding:6px 10px;border-radius:8px}nav a.active{background:#303030;color:#fff}
main{max-width:1200px;margin:0 auto;padding:20px 24px 48px}
h1{font-size:20px;line-height:28px;font-weight:700;margin:0 0 4px}
.subdued{color:${PALETTE.subdued}}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:16px;margin-top:16px}
.card{background:#fff;border-radius:12px;padding:16px;box-shadow:0 1px 0 rgba(26,26,26,.07),0 0 0 1px rgba(26,26,26,.05)}
.card h2{font-size:14px;line-height:20px;font-weight:650;margin:0}
.card .formula{color:${PALETTE.subdued};margin:2px 0 8px;font-size:12px}
figure.chart{margin:0 0 8px;overflow-x:auto}figure.chart svg{max-width:100%;height:auto}
table{border-collapse:collapse;width:100%;font-size:12px}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid ${PALETTE.border};vertical-align:top}
th{background:#f7f7f7;font-weight:600;color:${PALETTE.subdued}}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
details summary{cursor:pointer;color:${PALETTE.subdued};margin:4px 0}
.stats{display:flex;gap:16px;flex-wrap:wrap;margin-top:16px}
.stat{background:#fff;border-radius:12px;padding:12px 16px;min-width:180px;box-shadow:0 1px 0 rgba(26,26,26,.07)}
.stat .value{font-size:20px;font-weight:700;line-height:28px}
.banner{border-radius:12px;padding:12px 16px;margin-top:16px}
.banner.success{background:#cdfee1}.banner.critical{background:#fedad9}.banner.info{background:#eaf4ff}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
button{font:inherit;font-weight:600;border:0;border-radius:8px;padding:6px 12px;cursor:pointer;background:#303030;color:#fff}
button.secondary{background:#fff;color:${PALETTE.text};box-shadow:0 0 0 1px #c9c9c9}
button.critical{background:#c70a24}
input[type=text]{font:inherit;padding:6px 10px;border:1px solid #8a8a8a;border-radius:8px;min-width:240px}
form.inline{display:inline}
.pager{display:flex;gap:12px;margin-top:8px;align-items:center}
ul.condition{margin:4px 0;padding-left:18px}
`;

const _NAV = [
  ["insights", "Insights", "/app/insights"],
  ["segments", "Segments", "/app/segments"],
  ["destinations", "Destinations", "/app/destinations"],
  ["keys", "API keys", "/app/keys"],
  ["privacy", "Privacy", "/app/privacy"],
  ["health", "Health", "/app/health"],
] as const;

/** A page section of the navigation, or none. */
export type NavSection = (typeof _NAV)[number][0] | null;

/** The page frame: title, navigation (links keep the session) and styles. */
export function Layout(
  props: { title: string; page: PageContext | null; active?: NavSection; children?: Child },
) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{props.title} · Customer data</title>
        <style dangerouslySetInnerHTML={{ __html: _STYLES }} />
      </head>
      <body>
        <header class="top">
          <strong>Customer data</strong>
          {props.page && (
            <nav>
              {_NAV.map(([id, label, path]) => (
                <a href={props.page!.link(path)} class={id === props.active ? "active" : ""}>
                  {label}
                </a>
              ))}
            </nav>
          )}
          {props.page && <span class="subdued">{props.page.session.shop}</span>}
        </header>
        <main>{props.children}</main>
      </body>
    </html>
  );
}

/** A white card with a title. */
export function Card(props: { title: string; id?: string; children?: Child }) {
  return (
    <section class="card" data-card={props.id}>
      <h2>{props.title}</h2>
      {props.children}
    </section>
  );
}

/** A table's columns: header text and whether the column is numeric. */
export type Column = { label: string; numeric?: boolean };

/** A data table; `id` names it for tests and the browser check. */
export function DataTable(
  props: { id: string; caption: string; columns: Column[]; rows: Child[][] },
) {
  return (
    <table data-table={props.id}>
      <caption class="subdued" style="text-align:left">{props.caption}</caption>
      <thead>
        <tr>
          {props.columns.map((col) => <th class={col.numeric ? "num" : ""}>{col.label}</th>)}
        </tr>
      </thead>
      <tbody>
        {props.rows.map((row) => (
          <tr>
            {row.map((cell, i) => <td class={props.columns[i]?.numeric ? "num" : ""}>{cell}</td>)}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** A chart card: title, the one-line formula or source, the SVG chart, then its data table. */
export function ChartCard(
  props: { id: string; title: string; formula: string; svg: string; children?: Child },
) {
  return (
    <section class="card" data-chart={props.id}>
      <h2>{props.title}</h2>
      <p class="formula">{props.formula}</p>
      <figure
        class="chart"
        role="img"
        aria-label={props.title}
        dangerouslySetInnerHTML={{ __html: props.svg }}
      />
      {props.children}
    </section>
  );
}
