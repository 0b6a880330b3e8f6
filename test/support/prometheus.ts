import type { TestApp } from "./app.ts";

// Reads the Prometheus text exposition format (version 0.0.4) that /metrics serves, for tests
// that scrape before and after an action and compare: a sample is found by its metric name and
// its exact label set, so `payouts_total{outcome="failed"}` never matches a series with more labels.

export type Labels = Record<string, string>;

export interface Sample {
  name: string;
  labels: Labels;
  value: number;
}

/** One sample line: name, optional {labels}, value, optional timestamp. */
const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$/;
/** One label pair inside the braces; the value may hold \\, \" and \n escapes. */
const LABEL_PAIR = /\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)/y;

function unescapeLabel(raw: string): string {
  return raw.replace(/\\(.)/g, (_m, c: string) => (c === "n" ? "\n" : c));
}

function parseValue(raw: string): number {
  // Prometheus reads these case-insensitively (prom-client writes NaN as "Nan").
  if (/^\+?inf$/i.test(raw)) return Number.POSITIVE_INFINITY;
  if (/^-inf$/i.test(raw)) return Number.NEGATIVE_INFINITY;
  if (/^nan$/i.test(raw)) return Number.NaN;
  const value = Number(raw);
  if (Number.isNaN(value)) throw new Error(`not a sample value: ${raw}`);
  return value;
}

/** Every sample of a scrape, in order; throws on a line that is neither a comment nor a sample. */
export function parsePrometheus(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line.trim() === "" || line.startsWith("#")) continue;
    const match = SAMPLE_LINE.exec(line);
    if (!match) throw new Error(`not a Prometheus sample line: ${JSON.stringify(line)}`);
    const [, name = "", rawLabels = "", rawValue = ""] = match;
    const labels: Labels = {};
    LABEL_PAIR.lastIndex = 0;
    while (LABEL_PAIR.lastIndex < rawLabels.length) {
      const pair = LABEL_PAIR.exec(rawLabels);
      if (!pair) throw new Error(`bad label set in ${JSON.stringify(line)}`);
      labels[pair[1] as string] = unescapeLabel(pair[2] as string);
    }
    let value: number;
    try {
      value = parseValue(rawValue);
    } catch (err) {
      throw new Error(`${(err as Error).message} in ${JSON.stringify(line)}`);
    }
    samples.push({ name, labels, value });
  }
  return samples;
}

const sameLabels = (a: Labels, b: Labels) => {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => b[k] === a[k]);
};

export class Scrape {
  readonly text: string;
  readonly samples: Sample[];
  constructor(text: string) {
    this.text = text;
    this.samples = parsePrometheus(text);
  }

  /** The sample with exactly these labels, if the scrape has it. */
  find(name: string, labels: Labels = {}): Sample | undefined {
    return this.samples.find((s) => s.name === name && sameLabels(s.labels, labels));
  }

  /** A counter's value: a labelled series prom-client has not seen yet is absent, i.e. 0. */
  count(name: string, labels: Labels = {}): number {
    return this.find(name, labels)?.value ?? 0;
  }

  /** Every sample of `name` (any labels). */
  all(name: string): Sample[] {
    return this.samples.filter((s) => s.name === name);
  }

  /** Every label value of every sample. */
  labelValues(): string[] {
    return this.samples.flatMap((s) => Object.values(s.labels));
  }
}

/**
 * How each series of `name` moved between two scrapes, keyed by its labels sorted by name
 * ("environment=sandbox,rail=crypto,status=pending"); series that did not move are left out, so
 * `toEqual` on the result asserts that nothing else moved.
 */
export function moved(before: Scrape, after: Scrape, name: string): Record<string, number> {
  const key = (labels: Labels) =>
    Object.entries(labels)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k}=${v}`)
      .join(",");
  const out: Record<string, number> = {};
  for (const sample of after.all(name)) {
    const delta = sample.value - before.count(name, sample.labels);
    if (delta !== 0) out[key(sample.labels)] = delta;
  }
  for (const sample of before.all(name)) {
    if (!after.find(name, sample.labels)) out[key(sample.labels)] = -sample.value;
  }
  return out;
}

/** GET /metrics of an in-process app with the bearer token; throws unless it answers 200. */
export async function scrape(t: TestApp, token: string): Promise<Scrape> {
  const res = await t.request({
    method: "GET",
    url: "/metrics",
    headers: { authorization: `Bearer ${token}` },
  });
  if (res.statusCode !== 200) throw new Error(`/metrics answered ${res.statusCode}: ${res.body}`);
  return new Scrape(res.body);
}

/** GET a metrics URL (a service process's port or its metrics listener); throws unless 200. */
export async function scrapeUrl(url: string, token?: string): Promise<Scrape> {
  const res = await fetch(url, {
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${text}`);
  return new Scrape(text);
}

/**
 * Polls until `probe` on a fresh scrape holds (counters are incremented right after the commit
 * that made the change visible, and the HTTP histogram once the response has been sent), at most
 * `timeoutMs`; returns that scrape.
 */
export async function scrapeUntil(
  read: () => Promise<Scrape>,
  what: string,
  probe: (s: Scrape) => boolean,
  timeoutMs = 10_000,
): Promise<Scrape> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await read();
    if (probe(s)) return s;
    if (Date.now() > deadline) throw new Error(`metrics: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
