import { type HtmlSafeString, html } from "./html.ts";

// Daily payments drawn by the server as inline SVG (no chart library, no script): one bar chart
// of the count and one of the volume per token. Each chart has a title and a description, and the
// numbers are also in a table for screen readers and for reading without the picture.

export interface DailyPoint {
  /** YYYY-MM-DD (UTC). */
  day: string;
  count: number;
  /** Volume per token of that day's paid payments, as decimal strings (D4), and as numbers to draw. */
  volumes: Record<string, { text: string; value: number }>;
}

const WIDTH = 600;
const HEIGHT = 120;

function bars(label: string, values: Array<{ day: string; value: number; text: string }>): HtmlSafeString {
  const max = Math.max(0, ...values.map((v) => v.value));
  const slot = WIDTH / Math.max(1, values.length);
  const rects = values.map((v, i) => {
    const h = max > 0 ? Math.max(v.value > 0 ? 2 : 0, (v.value / max) * (HEIGHT - 4)) : 0;
    return html`<rect x="${(i * slot + 1).toFixed(1)}" y="${(HEIGHT - h).toFixed(1)}" width="${Math.max(1, slot - 2).toFixed(1)}" height="${h.toFixed(1)}"><title>${v.day}: ${v.text}</title></rect>`;
  });
  const first = values[0]?.day ?? "";
  const last = values.at(-1)?.day ?? "";
  return html`<figure class="chart"><figcaption>${label} <span class="muted">(max ${max > 0 ? values.find((v) => v.value === max)?.text : "0"})</span></figcaption>
<svg viewBox="0 0 ${WIDTH} ${HEIGHT}" preserveAspectRatio="none" role="img" aria-label="${label} per day from ${first} to ${last}">${rects}</svg>
<div class="chart-axis"><span>${first}</span><span>${last}</span></div></figure>`;
}

export function dailyChart(points: DailyPoint[]): HtmlSafeString {
  const tokens = [...new Set(points.flatMap((p) => Object.keys(p.volumes)))].sort();
  const charts = [
    bars(
      "Payments created",
      points.map((p) => ({ day: p.day, value: p.count, text: String(p.count) })),
    ),
    ...tokens.map((token) =>
      bars(
        `${token} paid`,
        points.map((p) => {
          const v = p.volumes[token];
          return { day: p.day, value: v?.value ?? 0, text: `${v?.text ?? "0"} ${token}` };
        }),
      ),
    ),
  ];
  return html`<div class="charts" id="daily-chart" data-total="${points.reduce((n, p) => n + p.count, 0)}">${charts}</div>
<details class="chart-table"><summary>Daily figures</summary><table class="compact"><thead><tr><th scope="col">Day (UTC)</th><th scope="col" class="num">Payments</th>${tokens.map((t) => html`<th scope="col" class="num">${t} paid</th>`)}</tr></thead><tbody>${points
    .filter((p) => p.count > 0)
    .map(
      (p) =>
        html`<tr><td>${p.day}</td><td class="num">${p.count}</td>${tokens.map((t) => html`<td class="num">${p.volumes[t]?.text ?? "0"}</td>`)}</tr>`,
    )}</tbody></table></details>`;
}
