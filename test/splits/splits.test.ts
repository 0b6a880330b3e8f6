import type { InjectOptions } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";

// GET and PUT /api/v1/splits (decision D15) against the real app on a real database: the
// configuration per workspace and environment, replaced whole, every rule a 400 naming the field
// that changes nothing, ids kept by label.

type Json = Record<string, unknown>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const A = "0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B = "0xbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C = "0xcccccccccccccccccccccccccccccccccccccccc";
const ZERO = `0x${"0".repeat(40)}`;

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" });
});
afterAll(async () => t.close());

function getSplits(key: string) {
  return t.request({ method: "GET", url: "/api/v1/splits", headers: bearer(key) });
}

function putSplits(key: string, payload: unknown, headers: Record<string, string> = {}) {
  return t.request({
    method: "PUT",
    url: "/api/v1/splits",
    headers: { ...bearer(key), ...headers },
    payload: payload as InjectOptions["payload"],
  });
}

async function config(key: string): Promise<Json> {
  const res = await getSplits(key);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

async function putOk(key: string, payload: Json): Promise<Json> {
  const res = await putSplits(key, payload);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

const split = (label: string, percentBps: number, destination: string, extra: Json = {}) => ({
  label,
  percentBps,
  destination,
  ...extra,
});

describe("GET /api/v1/splits", () => {
  it("is {enabled: false, splits: []} before anything is configured", async () => {
    const ws = await createWorkspace(t);
    expect(await config(ws.testKey)).toEqual({ enabled: false, splits: [] });
    expect(await config(ws.liveKey)).toEqual({ enabled: false, splits: [] });
  });

  it("needs an API key", async () => {
    const res = await t.request({ method: "GET", url: "/api/v1/splits" });
    expect(res.statusCode).toBe(401);
    const put = await t.request({
      method: "PUT",
      url: "/api/v1/splits",
      payload: { enabled: false, splits: [] },
    });
    expect(put.statusCode).toBe(401);
  });
});

describe("PUT /api/v1/splits", () => {
  it("stores a valid configuration and GET shows exactly it", async () => {
    const ws = await createWorkspace(t);
    const before = Date.now();
    const body = await putOk(ws.testKey, {
      enabled: true,
      splits: [
        split("Partner", 2500, A),
        split("Charity", 333, "0xABCDEFabcdefABCDEFabcdefABCDEFabcdefABCD", { enabled: true }),
        split("Paused", 5000, B, { enabled: false }),
      ],
    });
    expect(body.enabled).toBe(true);
    const splits = body.splits as Json[];
    expect(splits.map((s) => Object.keys(s).sort())).toEqual(
      Array(3).fill(["createdAt", "destination", "enabled", "id", "label", "percentBps"]),
    );
    expect(splits.map(({ id: _id, createdAt: _at, ...rest }) => rest)).toEqual([
      { label: "Partner", percentBps: 2500, destination: A, enabled: true },
      {
        label: "Charity",
        percentBps: 333,
        destination: "0xabcdefabcdefabcdefabcdefabcdefabcdefabcd",
        enabled: true,
      },
      { label: "Paused", percentBps: 5000, destination: B, enabled: false },
    ]);
    for (const s of splits) {
      expect(s.id).toMatch(UUID);
      const at = Date.parse(s.createdAt as string);
      expect(new Date(at).toISOString()).toBe(s.createdAt);
      expect(at).toBeGreaterThanOrEqual(before - 1000);
      expect(at).toBeLessThanOrEqual(Date.now() + 1000);
    }
    expect(new Set(splits.map((s) => s.id)).size).toBe(3);
    expect(await config(ws.testKey)).toEqual(body);
  });

  it("accepts 10 splits and enabled ones summing to exactly 10000 with disabled ones beyond", async () => {
    const ws = await createWorkspace(t);
    const ten = [
      ...Array.from({ length: 8 }, (_, i) => split(`s${i}`, 1250, A)),
      split("off1", 10000, B, { enabled: false }),
      split("off2", 1, C, { enabled: false }),
    ];
    const body = await putOk(ws.testKey, { enabled: true, splits: ten });
    expect((body.splits as Json[]).map((s) => s.label)).toEqual(ten.map((s) => s.label));
    expect(await config(ws.testKey)).toEqual(body);
  });

  it("turns splits off and empties them", async () => {
    const ws = await createWorkspace(t);
    await putOk(ws.testKey, { enabled: true, splits: [split("x", 100, A)] });
    const off = await putOk(ws.testKey, { enabled: false, splits: [split("x", 100, A)] });
    expect(off.enabled).toBe(false);
    expect(await config(ws.testKey)).toEqual(off);
    expect(await putOk(ws.testKey, { enabled: false, splits: [] })).toEqual({ enabled: false, splits: [] });
    expect(await config(ws.testKey)).toEqual({ enabled: false, splits: [] });
  });

  it("keeps the id (and creation time) of each unchanged label and gives new labels new ids", async () => {
    const ws = await createWorkspace(t);
    const first = (await putOk(ws.testKey, {
      enabled: true,
      splits: [split("Keep", 100, A), split("Drop", 200, B), split("Edit", 300, C)],
    })) as { splits: Json[] };
    const id = (label: string, list: Json[]) => list.find((s) => s.label === label)?.id;
    const second = (await putOk(ws.testKey, {
      enabled: false,
      splits: [split("New", 50, A), split("Edit", 999, A, { enabled: false }), split("Keep", 100, A)],
    })) as { splits: Json[] };
    expect(second.splits.map((s) => s.label)).toEqual(["New", "Edit", "Keep"]);
    expect(id("Keep", second.splits)).toBe(id("Keep", first.splits));
    expect(id("Edit", second.splits)).toBe(id("Edit", first.splits));
    const created = (label: string, list: Json[]) => list.find((s) => s.label === label)?.createdAt;
    expect(created("Keep", second.splits)).toBe(created("Keep", first.splits));
    expect(created("Edit", second.splits)).toBe(created("Edit", first.splits));
    const newId = id("New", second.splits);
    expect(newId).toMatch(UUID);
    expect(first.splits.map((s) => s.id)).not.toContain(newId);
    expect(second.splits.find((s) => s.label === "Edit")).toMatchObject({
      percentBps: 999,
      destination: A,
      enabled: false,
    });
    expect(await config(ws.testKey)).toEqual(second);

    // A label dropped and configured again later is a new split: a new id.
    const third = (await putOk(ws.testKey, {
      enabled: true,
      splits: [split("Drop", 200, B)],
    })) as { splits: Json[] };
    expect(id("Drop", third.splits)).toMatch(UUID);
    expect(id("Drop", third.splits)).not.toBe(id("Drop", first.splits));
    // A label differing only in case is another label.
    const fourth = (await putOk(ws.testKey, {
      enabled: true,
      splits: [split("drop", 200, B)],
    })) as { splits: Json[] };
    expect(id("drop", fourth.splits)).not.toBe(id("Drop", third.splits));
  });

  it("keeps the ids when the same configuration is put concurrently", async () => {
    const ws = await createWorkspace(t);
    const first = (await putOk(ws.testKey, {
      enabled: true,
      splits: [split("A", 100, A), split("B", 200, B)],
    })) as { splits: Json[] };
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        putOk(ws.testKey, { enabled: true, splits: [split("B", 200 + i, B), split("A", 100, A)] }),
      ),
    );
    const ids = first.splits.map((s) => s.id).reverse();
    for (const answer of answers) expect((answer.splits as Json[]).map((s) => s.id)).toEqual(ids);
    const final = (await config(ws.testKey)) as { splits: Json[] };
    expect(final.splits.map((s) => s.id)).toEqual(ids);
    expect(answers).toContainEqual(final);
  });

  it("concurrent first PUTs of one label agree on its id: every answer names the id that is stored", async () => {
    // Each replacement is serialised with the others, so whichever commits second finds the label
    // configured by the first and keeps its id. Several rounds: the interleaving varies.
    for (let round = 0; round < 8; round++) {
      const ws = await createWorkspace(t);
      const answers = await Promise.all(
        Array.from({ length: 4 }, (_, i) =>
          putOk(ws.testKey, { enabled: true, splits: [split("X", 1 + i, A)] }),
        ),
      );
      const ids = answers.map((a) => (a.splits as Json[])[0]?.id);
      const stored = ((await config(ws.testKey)).splits as Json[])[0]?.id;
      expect(new Set(ids).size, `round ${round}: ids ${ids.join(", ")}`).toBe(1);
      expect(ids[0]).toBe(stored);
    }
  });

  describe("every rule refuses with 400 naming the field, and nothing changes", () => {
    let ws: CreatedWorkspace;
    let before: Json;
    beforeAll(async () => {
      ws = await createWorkspace(t);
      before = await putOk(ws.testKey, {
        enabled: true,
        splits: [split("Existing", 1000, A), split("Other", 500, B, { enabled: false })],
      });
    });

    const eleven = Array.from({ length: 11 }, (_, i) => split(`s${i}`, 1, A));
    const cases: Array<[string, unknown, RegExp]> = [
      ["enabled missing", { splits: [] }, /\benabled\b/],
      ["enabled a string", { enabled: "true", splits: [] }, /\benabled\b/],
      ["enabled null", { enabled: null, splits: [] }, /\benabled\b/],
      ["splits missing", { enabled: true }, /\bsplits\b/],
      ["splits an object", { enabled: true, splits: {} }, /\bsplits\b/],
      ["splits null", { enabled: true, splits: null }, /\bsplits\b/],
      ["11 splits", { enabled: true, splits: eleven }, /\bsplits\b.*10/],
      ["an unknown field", { enabled: true, splits: [], colour: "red" }, /\bcolour\b/],
      ["a split that is a string", { enabled: true, splits: ["x"] }, /splits\[0\]/],
      ["a split that is null", { enabled: true, splits: [split("a", 1, A), null] }, /splits\[1\]/],
      [
        "an unknown field of a split",
        { enabled: true, splits: [split("a", 1, A, { percent: 1 })] },
        /splits\[0\]\.percent\b/,
      ],
      ["label missing", { enabled: true, splits: [{ percentBps: 1, destination: A }] }, /splits\[0\]\.label/],
      ["label empty", { enabled: true, splits: [split("", 1, A)] }, /splits\[0\]\.label/],
      ["label blank", { enabled: true, splits: [split("  ", 1, A)] }, /splits\[0\]\.label/],
      [
        "label of 101 characters",
        { enabled: true, splits: [split("L".repeat(101), 1, A)] },
        /splits\[0\]\.label/,
      ],
      [
        "label a number",
        { enabled: true, splits: [split(5 as unknown as string, 1, A)] },
        /splits\[0\]\.label/,
      ],
      [
        "label used twice",
        { enabled: true, splits: [split("Same", 1, A), split("Same", 2, B, { enabled: false })] },
        /splits\[1\]\.label.*unique/,
      ],
      [
        "percentBps missing",
        { enabled: true, splits: [{ label: "a", destination: A }] },
        /splits\[0\]\.percentBps/,
      ],
      ["percentBps 0", { enabled: true, splits: [split("a", 0, A)] }, /splits\[0\]\.percentBps/],
      ["percentBps negative", { enabled: true, splits: [split("a", -5, A)] }, /splits\[0\]\.percentBps/],
      ["percentBps 10001", { enabled: true, splits: [split("a", 10001, A)] }, /splits\[0\]\.percentBps/],
      ["percentBps 12.5", { enabled: true, splits: [split("a", 12.5, A)] }, /splits\[0\]\.percentBps/],
      [
        "percentBps a string",
        { enabled: true, splits: [split("a", "100" as unknown as number, A)] },
        /splits\[0\]\.percentBps/,
      ],
      ["percentBps huge", { enabled: true, splits: [split("a", 1e300, A)] }, /splits\[0\]\.percentBps/],
      [
        "destination missing",
        { enabled: true, splits: [{ label: "a", percentBps: 1 }] },
        /splits\[0\]\.destination/,
      ],
      ["destination short", { enabled: true, splits: [split("a", 1, "0x1234")] }, /splits\[0\]\.destination/],
      ["destination 41 hex", { enabled: true, splits: [split("a", 1, `${A}a`)] }, /splits\[0\]\.destination/],
      [
        "destination without 0x",
        { enabled: true, splits: [split("a", 1, A.slice(2))] },
        /splits\[0\]\.destination/,
      ],
      [
        "destination not hex",
        { enabled: true, splits: [split("a", 1, `0x${"z".repeat(40)}`)] },
        /splits\[0\]\.destination/,
      ],
      [
        "destination the zero address",
        { enabled: true, splits: [split("a", 1, ZERO)] },
        /splits\[0\]\.destination.*zero/,
      ],
      [
        "a split's enabled a string",
        { enabled: true, splits: [split("a", 1, A, { enabled: "no" })] },
        /splits\[0\]\.enabled/,
      ],
      [
        "a split's enabled null",
        { enabled: true, splits: [split("a", 1, A, { enabled: null })] },
        /splits\[0\]\.enabled/,
      ],
      [
        "enabled splits summing to 10001",
        { enabled: true, splits: [split("a", 5000, A), split("b", 5001, B)] },
        /\bsplits\b.*percentBps.*10001/,
      ],
      [
        "enabled splits summing to 10001 while the configuration is off",
        { enabled: false, splits: [split("a", 10000, A), split("b", 1, B)] },
        /\bsplits\b.*percentBps/,
      ],
      [
        "a valid split after an invalid one",
        { enabled: true, splits: [split("Existing", 1000, A), split("bad", 1, ZERO)] },
        /splits\[1\]\.destination/,
      ],
    ];

    it.each(cases)("%s", async (_, payload, field) => {
      const res = await putSplits(ws.testKey, payload);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.headers["content-type"]).toMatch(/^application\/json/);
      const error = res.json().error;
      expect(typeof error).toBe("string");
      expect(error).toMatch(field);
      expect(await config(ws.testKey)).toEqual(before);
    });
  });

  describe("malformed bodies are 4xx, never 500, and change nothing", () => {
    let ws: CreatedWorkspace;
    let before: Json;
    beforeAll(async () => {
      ws = await createWorkspace(t);
      before = await putOk(ws.testKey, { enabled: true, splits: [split("Existing", 1000, A)] });
    });

    const raw: Array<[string, string, string | undefined]> = [
      ["invalid JSON", "{enabled: true", "application/json"],
      ["a JSON null", "null", "application/json"],
      ["a JSON array", "[]", "application/json"],
      ["a JSON string", '"hello"', "application/json"],
      ["a JSON number", "42", "application/json"],
      ["an empty body", "", "application/json"],
      ["plain text", "enabled=true", "text/plain"],
      ["a form", "enabled=true&splits=x", "application/x-www-form-urlencoded"],
      ["no content type", '{"enabled":true,"splits":[]}', undefined],
      [
        "a NUL in a label",
        `{"enabled":true,"splits":[{"label":"a\\u0000b","percentBps":1,"destination":"${A}"}]}`,
        "application/json",
      ],
      [
        "a lone surrogate in a label",
        `{"enabled":true,"splits":[{"label":"\\ud800","percentBps":1,"destination":"${A}"}]}`,
        "application/json",
      ],
      ["a __proto__ key", '{"enabled":true,"splits":[],"__proto__":{"x":1}}', "application/json"],
      [
        "a deep nesting",
        `{"enabled":true,"splits":${"[".repeat(100)}${"]".repeat(100)}}`,
        "application/json",
      ],
      [
        "a label of 1 MiB",
        JSON.stringify({ enabled: true, splits: [split("x".repeat(1024 * 1024 + 10), 1, A)] }),
        "application/json",
      ],
    ];

    it.each(raw)("%s", async (_, body, contentType) => {
      const res = await t.request({
        method: "PUT",
        url: "/api/v1/splits",
        headers: { ...bearer(ws.testKey), ...(contentType ? { "content-type": contentType } : {}) },
        body,
      });
      expect(res.statusCode, res.body).toBeGreaterThanOrEqual(400);
      expect(res.statusCode, res.body).toBeLessThan(500);
      expect(typeof res.json().error).toBe("string");
      expect(await config(ws.testKey)).toEqual(before);
    });

    it("wrong types in every field: 400 each, never 500", async () => {
      const wrong = [null, 0, -1, 1.5, "", "x", [], {}, [1], { a: 1 }, true];
      // `true` is a valid enabled, [] valid splits, "x" a valid label: left out where they fit.
      const payloads = wrong.flatMap((value) => [
        ...(value === true ? [] : [{ enabled: value, splits: [] }]),
        ...(Array.isArray(value) && value.length === 0 ? [] : [{ enabled: true, splits: value }]),
        { enabled: true, splits: [value] },
        ...(value === "x"
          ? []
          : [{ enabled: true, splits: [{ label: value, percentBps: 1, destination: A }] }]),
        { enabled: true, splits: [{ label: "a", percentBps: value, destination: A }] },
        { enabled: true, splits: [{ label: "a", percentBps: 1, destination: value }] },
        ...(value === true
          ? []
          : [{ enabled: true, splits: [{ label: "a", percentBps: 1, destination: A, enabled: value }] }]),
      ]);
      for (const payload of payloads) {
        const res = await putSplits(ws.testKey, payload);
        expect(res.statusCode, `${JSON.stringify(payload)} → ${res.body}`).toBe(400);
        expect(typeof res.json().error).toBe("string");
      }
      expect(await config(ws.testKey)).toEqual(before);
    });
  });
});

describe("scope: workspace and environment", () => {
  it("keeps separate configurations for the sandbox and live keys of one workspace", async () => {
    const ws = await createWorkspace(t);
    const sandbox = await putOk(ws.testKey, { enabled: true, splits: [split("Sandbox only", 100, A)] });
    expect(await config(ws.liveKey)).toEqual({ enabled: false, splits: [] });
    const live = await putOk(ws.liveKey, {
      enabled: false,
      splits: [split("Sandbox only", 200, B), split("Live", 300, C)],
    });
    // The same label in live is another split: its own id.
    const liveSplits = live.splits as Json[];
    expect(liveSplits[0]?.id).not.toBe((sandbox.splits as Json[])[0]?.id);
    expect(await config(ws.testKey)).toEqual(sandbox);
    expect(await config(ws.liveKey)).toEqual(live);
    // Emptying one leaves the other.
    await putOk(ws.testKey, { enabled: false, splits: [] });
    expect(await config(ws.liveKey)).toEqual(live);
  });

  it("another workspace never sees nor changes the configuration", async () => {
    const mine = await createWorkspace(t);
    const other = await createWorkspace(t);
    const configured = await putOk(mine.testKey, { enabled: true, splits: [split("Mine", 100, A)] });
    expect(await config(other.testKey)).toEqual({ enabled: false, splits: [] });
    expect(await config(other.liveKey)).toEqual({ enabled: false, splits: [] });
    const theirs = await putOk(other.testKey, { enabled: true, splits: [split("Mine", 100, A)] });
    expect((theirs.splits as Json[])[0]?.id).not.toBe((configured.splits as Json[])[0]?.id);
    expect(await config(mine.testKey)).toEqual(configured);
    await putOk(other.testKey, { enabled: false, splits: [] });
    expect(await config(mine.testKey)).toEqual(configured);
  });
});
