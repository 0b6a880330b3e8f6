import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_LINGER } from "../../src/platform/http/lingering-close.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";

// A body over the limit is answered before it has all arrived: 413, or 401 when the request has
// no key (authentication runs before the body is read). The answer must reach a client that is
// still writing: a server that closes the socket with unread bytes makes the kernel send a reset,
// and Node's fetch then fails with EPIPE / ECONNRESET instead of giving the answer. Bodies of
// 8 MiB are streamed as over a network (64 KiB pieces, a millisecond apart), 60 at a time, so the
// client is still writing for a long while after the answer: on code that closes at once nearly
// every request of a round loses its answer.

const CONCURRENT = 60;
const BODY_BYTES = 8 * 1024 * 1024;
const PIECE = 64 * 1024;

let t: TestApp;
let base: string;
let port: number;
let ws: CreatedWorkspace;

beforeAll(async () => {
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "1000000", RATE_LIMIT_LIVE: "1000000" });
  ws = await createWorkspace(t);
  await t.app.http.listen({ port: 0, host: "127.0.0.1" });
  const address = t.app.http.server.address();
  if (address === null || typeof address === "string") throw new Error("not listening on TCP");
  port = address.port;
  base = `http://127.0.0.1:${port}`;
});
afterAll(async () => t?.close());

const encoder = new TextEncoder();
const JSON_BODY = encoder.encode(
  JSON.stringify({ tokenSymbol: "USDC", amount: "1", description: "y".repeat(BODY_BYTES) }),
);
const FORM_BODY = encoder.encode(`email=a%40b.co&password=${"y".repeat(BODY_BYTES)}`);

/** The body as a network upload delivers it: a piece at a time, a millisecond apart. */
function trickle(body: Uint8Array): ReadableStream<Uint8Array> {
  let offset = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      await new Promise((resolve) => setTimeout(resolve, 1));
      if (offset >= body.length) return controller.close();
      controller.enqueue(body.subarray(offset, offset + PIECE));
      offset += PIECE;
    },
  });
}

interface Answer {
  status?: number;
  connection?: string | null;
  error?: string;
}

async function post(path: string, headers: Record<string, string>, body: BodyInit): Promise<Answer> {
  try {
    const res = await fetch(`${base}${path}`, {
      method: "POST",
      headers,
      body,
      duplex: "half",
      signal: AbortSignal.timeout(60_000),
    } as RequestInit);
    await res.arrayBuffer();
    return { status: res.status, connection: res.headers.get("connection") };
  } catch (err) {
    const cause = (err as Error).cause as (Error & { code?: string }) | undefined;
    return { error: cause?.code ?? cause?.message ?? (err as Error).message };
  }
}

describe("bodies over the limit, many at once, with Node's fetch (lingering close)", () => {
  const json = { "content-type": "application/json" };
  const form = { "content-type": "application/x-www-form-urlencoded" };
  const cases: Array<[string, string, () => Record<string, string>, Uint8Array<ArrayBuffer>, number]> = [
    ["with a key → 413", "/api/v1/payments", () => ({ ...json, ...bearer(ws.testKey) }), JSON_BODY, 413],
    ["without a key → 401", "/api/v1/payments", () => json, JSON_BODY, 401],
    ["a dashboard form → 413 (its own error pages)", "/dashboard/login", () => form, FORM_BODY, 413],
  ];

  it.each(cases)(
    `%s: each of ${CONCURRENT} streamed uploads reads its answer, which closes the connection`,
    async (_label, path, headers, body, status) => {
      const answers = await Promise.all(
        Array.from({ length: CONCURRENT }, () => post(path, headers(), trickle(body))),
      );
      const lost = answers.filter((a) => a.status !== status);
      expect(
        lost.map((a) => a.error ?? a.status),
        `${lost.length} of ${CONCURRENT} lost their answer`,
      ).toEqual([]);
      // The client must not send another request after a body the server stopped reading.
      expect(
        answers.filter((a) => a.connection !== "close"),
        "answers without Connection: close",
      ).toEqual([]);
    },
    120_000,
  );

  it.each(cases)(
    `%s: each of ${CONCURRENT} whole-buffer uploads reads its answer`,
    async (_label, path, headers, body, status) => {
      const answers = await Promise.all(
        Array.from({ length: CONCURRENT }, () => post(path, headers(), body)),
      );
      const lost = answers.filter((a) => a.status !== status);
      expect(
        lost.map((a) => a.error ?? a.status),
        `${lost.length} lost`,
      ).toEqual([]);
    },
    120_000,
  );
});

describe("the lingering is bounded", () => {
  it("a client that goes on sending is cut off after the documented bytes, its answer read first", async () => {
    const total = DEFAULT_LINGER.maxBytes * 4;
    const result = await new Promise<{ answer: string; written: number; ended: string }>((resolve) => {
      const socket = connect({ host: "127.0.0.1", port });
      let answer = "";
      let written = 0;
      const done = (ended: string) => {
        clearTimeout(timer);
        socket.destroy();
        resolve({ answer, written, ended });
      };
      const timer = setTimeout(() => done("still open after 30 s"), 30_000);
      socket.on("data", (data: Buffer) => {
        answer += data.toString("latin1");
      });
      socket.on("error", (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
      socket.on("close", () => done("closed"));
      socket.write(
        `POST /api/v1/payments HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${total}\r\n\r\n`,
      );
      const piece = Buffer.alloc(PIECE, 0x20);
      const next = () => {
        while (written < total) {
          written += piece.length;
          if (!socket.write(piece)) return void socket.once("drain", next);
        }
      };
      next();
    });
    expect(result.answer).toMatch(/^HTTP\/1\.1 401 /);
    expect(result.answer.toLowerCase()).toContain("connection: close");
    expect(result.ended).not.toBe("still open after 30 s");
    // Cut off well before the client was done: the server did not read all of it.
    expect(result.written).toBeLessThan(total);
  }, 60_000);
});
