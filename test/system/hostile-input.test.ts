import { connect } from "node:net";
import { describe, expect, it } from "vitest";
import { ADMIN_SECRET, bearer } from "../support/app.ts";
import {
  DESTINATION,
  expectJsonError,
  expectRefused,
  fixtures,
  MERCHANT,
  Raw,
  send,
  t,
  UINT256_MAX,
  UNKNOWN_UUID,
  useHostileInputApp,
  ws,
  X402_PAY,
} from "../support/hostile-input.ts";

// One example of each class of hostile input; generated values at every route:
// hostile-input-generated.test.ts; shared setup: support/hostile-input.ts.

useHostileInputApp();

/**
 * A client that writes the whole request before reading the answer (as many do), with the body
 * trickling in as over a real network. A server that answers early and closes the socket with
 * unread bytes sends a reset: the write fails and the client never sees the answer.
 */
function uploadThenRead(
  port: number,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
  framing: "content-length" | "chunked",
): Promise<{ status?: number; body: string; error?: string }> {
  const head = [
    `POST ${path} HTTP/1.1`,
    "Host: 127.0.0.1",
    "Content-Type: application/json",
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    framing === "content-length" ? `Content-Length: ${body.length}` : "Transfer-Encoding: chunked",
    "",
    "",
  ].join("\r\n");
  const CHUNK = 64 * 1024;
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    let received = Buffer.alloc(0);
    let settled = false;
    const finish = (result: { status?: number; body: string; error?: string }) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    const timer = setTimeout(() => finish({ body: received.toString(), error: "timed out" }), 20_000);
    socket.on("error", (err: NodeJS.ErrnoException) => finish({ body: "", error: err.code ?? err.message }));
    socket.on("close", () => finish({ body: received.toString(), error: "closed before a complete answer" }));
    socket.on("data", (data: Buffer) => {
      received = Buffer.concat([received, data]);
      const text = received.toString("latin1");
      const end = text.indexOf("\r\n\r\n");
      if (end < 0) return;
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end))?.[1] ?? Number.NaN);
      if (received.length < end + 4 + length) return;
      finish({
        status: Number(text.slice(9, 12)),
        body: received.subarray(end + 4, end + 4 + length).toString("utf8"),
      });
    });
    socket.pause();
    socket.write(head);
    let offset = 0;
    const writeNext = () => {
      if (settled) return;
      if (offset >= body.length) {
        if (framing === "chunked") socket.write("0\r\n\r\n");
        socket.resume(); // the whole request is written: now read the answer
        return;
      }
      const piece = body.subarray(offset, offset + CHUNK);
      offset += piece.length;
      const framed =
        framing === "chunked"
          ? Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from("\r\n")])
          : piece;
      if (socket.write(framed)) setTimeout(writeNext, 2);
      else socket.once("drain", () => setTimeout(writeNext, 2));
    };
    writeNext();
  });
}

describe("hostile input, one example per class (issue 20)", () => {
  it("amounts beyond what a token transfer and the amount columns hold → 400 'Amount must be a positive number'", async () => {
    const beyondUint256 = (UINT256_MAX + 1n).toString();
    const cases: Array<[string, object]> = [
      // 61 digits of ETH are 79 digits of wei: more than numeric(78, 0) holds.
      ["/api/v1/payments", { tokenSymbol: "ETH", amount: "9".repeat(61) }],
      ["/api/v1/payments", { tokenSymbol: "USDC", amount: `${"9".repeat(73)}.5` }],
      ["/api/v1/payments", { tokenSymbol: "ETH", amount: `${beyondUint256}.0` }],
      ["/api/v1/payments", { tokenSymbol: "USDC", amount: "1".repeat(200_000) }],
      ["/api/v1/payouts", { tokenSymbol: "USDC", amount: "9".repeat(79), destinationAddress: DESTINATION }],
      ["/api/v1/payouts", { tokenSymbol: "ETH", amount: "2".repeat(60), destinationAddress: DESTINATION }],
      ["/api/v1/sandbox/faucet", { tokenSymbol: "USDC", amount: "9".repeat(79) }],
    ];
    for (const [url, body] of cases) {
      expect(await expectRefused({ method: "POST", url, body }, "amount")).toBe(
        "Amount must be a positive number",
      );
    }
    // A swap's amount names its field and token (D16).
    for (const sellAmount of ["9".repeat(61), `${beyondUint256}.0`, "1".repeat(200_000)]) {
      const body = { sellToken: "ETH", buyToken: "USDC", sellAmount };
      expect(await expectRefused({ method: "POST", url: "/api/v1/swap", body }, "sellAmount")).toBe(
        "sellAmount must be a positive number with at most 18 decimals for ETH",
      );
    }
    // The largest amount a uint256 transfer carries is still an amount (no 500 from the column).
    const largest = await send("POST", "/api/v1/payments", "key", {
      tokenSymbol: "ETH",
      amount: `${UINT256_MAX / 10n ** 18n}.${(UINT256_MAX % 10n ** 18n).toString().padStart(18, "0")}`,
    });
    expect(largest.statusCode, largest.body).toBe(201);
    // Card amounts stop at the card provider's maximum (999,999.99 USD) instead of failing there.
    const card = await expectRefused(
      {
        method: "POST",
        url: "/api/v1/payments",
        body: { paymentMethod: "card", tokenSymbol: "USD", amount: "9".repeat(40) },
      },
      "amount",
    );
    expect(card).toBe("Amount must be at most 999999.99 USD for card payments");
    const cardMax = await send("POST", "/api/v1/payments", "key", {
      paymentMethod: "card",
      tokenSymbol: "USD",
      amount: "999999.99",
    });
    expect(cardMax.statusCode, cardMax.body).toBe(201);
  });

  it("on-ramp amounts beyond a uint256, in dollars or in the crypto bought → 400 naming the field (D17)", async () => {
    // Also a sourceAmount whose crypto, at the sandbox's rates, is more than a uint256 or the columns hold.
    const onramp = "/api/v1/onramp/session";
    for (const [currency, sourceAmount] of [
      ["USDC", "9".repeat(79)],
      ["USDC", `1${"0".repeat(74)}`],
      ["USDC", `2${"0".repeat(71)}`], // 2e77 units of USDC: beyond a uint256, within numeric(78, 0)
      ["ETH", `1${"0".repeat(65)}`],
    ]) {
      const body = { destinationCurrency: currency, sourceAmount };
      await expectRefused({ method: "POST", url: onramp, body }, "sourceAmount");
    }
    for (const destinationAmount of ["9".repeat(61), `${UINT256_MAX + 1n}.0`, "1".repeat(200_000)]) {
      const body = { destinationCurrency: "ETH", destinationAmount };
      expect(await expectRefused({ method: "POST", url: onramp, body }, "destinationAmount")).toBe(
        "destinationAmount must be a positive amount of ETH, at most 1000, with at most 18 decimals",
      );
    }
  });

  it("offset and page beyond any list (1e20, 1e309, 2^53 + 1) → 400 naming the parameter, never clamped", async () => {
    for (const value of ["1e20", "1e309", "100000000000000000000", "9007199254740993", "2147483648"]) {
      for (const url of [
        `/api/v1/payments?offset=${value}`,
        `/api/v1/payouts?offset=${value}`,
        `/api/v1/transfers/unmatched?offset=${value}`,
        `/api/v1/swaps?offset=${value}`,
        `/api/v1/onramp/sessions?offset=${value}`,
        `/api/v1/webhooks/${fixtures.webhookId}/deliveries?offset=${value}`,
      ]) {
        expect(await expectRefused({ method: "GET", url }, "offset")).toBe("offset must be <= 2147483647");
      }
      for (const url of [`/api/agents?page=${value}`, `/api/wallets?page=${value}`]) {
        expect(await expectRefused({ method: "GET", url }, "page")).toBe("page must be <= 2147483647");
      }
    }
    const largest = await send("GET", "/api/v1/payments?offset=2147483647", "key");
    expect(largest.statusCode).toBe(200);
    expect(largest.json()).toEqual({ payments: [], total: expect.any(Number) });
  });

  it("lone UTF-16 surrogates and NUL in body strings, metadata keys and values → 400 naming the field", async () => {
    const payment = { tokenSymbol: "USDC", amount: "1.00", merchantWallet: MERCHANT };
    const payout = { tokenSymbol: "USDC", amount: "0.01", destinationAddress: DESTINATION };
    const swap = { sellToken: "USDC", buyToken: "ETH", sellAmount: "0.01" };
    const cases: Array<[string, string, object, string]> = [
      ["POST", "/api/v1/payments", { ...payment, description: "a\ud800b" }, "description"],
      ["POST", "/api/v1/payments", { ...payment, metadata: { "order\udfff": "1" } }, "metadata"],
      ["POST", "/api/v1/payments", { ...payment, metadata: { order: "\udc00\ud800" } }, "metadata.order"],
      ["POST", "/api/v1/payments", { ...payment, metadata: { order: "a\u0000" } }, "metadata.order"],
      ["POST", "/api/v1/payments", { ...payment, unknownField: "\ud800" }, "unknownField"],
      ["POST", "/api/v1/payouts", { ...payout, description: "\ud800" }, "description"],
      ["POST", "/api/v1/payouts", { ...payout, metadata: { k: "\udfff" } }, "metadata.k"],
      ["POST", "/api/v1/payouts", { ...payout, idempotencyKey: "key-\ud800" }, "idempotencyKey"],
      ["POST", "/api/agents/create", { name: "a\ud800" }, "name"],
      ["POST", "/api/agents/create", { name: "a", metadata: { nested: { deep: ["\ud800"] } } }, "metadata"],
      ["POST", "/api/agents/create", { name: "a", metadata: { "\ud800": 1 } }, "metadata"],
      ["PATCH", `/api/agents/${fixtures.agentId}`, { description: "\u0000" }, "description"],
      ["POST", "/api/wallets/create", { ownerId: "\ud800", type: "user", currencies: ["ETH"] }, "ownerId"],
      ["POST", "/api/v1/keys", { name: "k\ud800" }, "name"],
      ["POST", "/api/v1/webhooks", { url: "http://127.0.0.1:9/\ud800", events: ["*"] }, "url"],
      ["POST", "/api/v1/swap", { ...swap, sellToken: "USDC\ud800" }, "sellToken"],
      ["POST", "/api/v1/swap", { ...swap, idempotencyKey: "key-\u0000" }, "idempotencyKey"],
      ["POST", "/api/v1/swap", { quoteId: "\udfff" }, "quoteId"],
      ["POST", "/api/v1/onramp/session", { destinationCurrency: "USDC\ud800" }, "destinationCurrency"],
      ["POST", "/onramp/session", { destinationCurrency: "ETH", sourceAmount: "1\u0000" }, "sourceAmount"],
      [
        "PUT",
        `/api/wallets/${fixtures.policyWalletId}/policy`,
        { allowedOrigins: ["\ud800"] },
        "allowedOrigins",
      ],
      [
        "POST",
        `/api/wallets/${fixtures.agentWalletId}/x402/pay`,
        { ...X402_PAY, resource: "a\u0000" },
        "resource",
      ],
      [
        "POST",
        `/api/wallets/${fixtures.agentWalletId}/x402/pay`,
        { ...X402_PAY, paymentRequired: Buffer.from('{"x402Version":"\\ud800"}').toString("base64") },
        "paymentRequired",
      ],
    ];
    for (const [method, url, body, field] of cases) await expectRefused({ method, url, body }, field);
    await expectRefused(
      { method: "POST", url: "/api/v1/workspaces", auth: "admin", body: { name: "\ud800" } },
      "name",
    );
  });

  it("NUL bytes in query filters and path segments → 400 naming the parameter", async () => {
    const cases: Array<[string, string]> = [
      ["/api/agents?search=a%00b", "search"],
      ["/api/wallets?ownerId=a%00b", "ownerId"],
      ["/api/wallets?currency=%00", "currency"],
      ["/api/v1/payments?status=pending%00", "status"],
      [`/api/wallets/${fixtures.walletId}/balance/ETH%00`, "currency"],
      ["/api/agents/%00", "agentId"],
      ["/pay/assets/page.js%00", "file"],
      ["/api/v1/swap/quote?sellToken=USDC&buyToken=ETH%00&sellAmount=1", "buyToken"],
      ["/swap/quote?sellToken=USDC&buyToken=ETH&buyAmount=1%00", "buyAmount"],
      ["/api/v1/swaps/%00", "id"],
      ["/api/v1/onramp/sessions/%00", "id"],
      ["/api/v1/onramp/sessions?limit=1%00", "limit"],
    ];
    for (const [url, field] of cases) await expectRefused({ method: "GET", url }, field);
  });

  it("JSON nested deeper than 32 levels → 400 naming the field, never a stack overflow", async () => {
    const deep = (levels: number) => new Raw(`${"[".repeat(levels)}${"]".repeat(levels)}`);
    await expectRefused(
      { method: "POST", url: "/api/agents/create", body: { name: "a", metadata: { k: deep(200_000) } } },
      "metadata.k",
    );
    await expectRefused(
      {
        method: "POST",
        url: "/api/v1/payments",
        body: { tokenSymbol: "USDC", amount: "1", extra: deep(100_000) },
        headers: { "idempotency-key": "deep-1" },
      },
      "extra",
    );
    const fine = await send("POST", "/api/agents/create", "key", { name: "a", metadata: { k: deep(30) } });
    expect(fine.statusCode, fine.body).toBe(201);
  });

  it("names of Object.prototype members in paths and keys → 404 or a 400 naming the field, not 500", async () => {
    for (const name of ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf", "prototype"]) {
      const res = await send("GET", `/pay/assets/${name}`, "none");
      expect(res.statusCode, `/pay/assets/${name}: ${res.body}`).toBe(404);
      expect(res.json()).toEqual({ error: "Not found" });
      for (const url of [
        `/api/v1/payments/${name}`,
        `/api/agents/${name}`,
        `/api/wallets/${name}`,
        `/api/wallets/${fixtures.walletId}/balance/${name}`,
        `/api/wallets/${name}/policy`,
        `/api/wallets/${fixtures.agentWalletId}/x402/authorizations/${name}`,
        `/pay/${name}/status`,
        `/api/v1/swaps/${name}`,
        `/api/v1/onramp/sessions/${name}`,
        `/api/v1/swap/quote?sellToken=${name}&buyToken=ETH&sellAmount=1`,
      ]) {
        const answer = await send("GET", url, "key");
        expect([400, 404], `${url}: ${answer.body}`).toContain(answer.statusCode);
        expectJsonError(answer, url, url);
      }
    }
    const assetStillServed = await send("GET", "/pay/assets/page.js", "none");
    expect(assetStillServed.statusCode).toBe(200);
    // A key named __proto__ is refused by name (prototype poisoning), not as "Invalid JSON body".
    const poisoned = JSON.parse('{"tokenSymbol":"USDC","amount":"1","metadata":{"__proto__":"x"}}');
    await expectRefused({ method: "POST", url: "/api/v1/payments", body: poisoned }, "metadata");
    const ctor = JSON.parse('{"name":"a","metadata":{"constructor":{"prototype":{"polluted":true}}}}');
    await expectRefused({ method: "POST", url: "/api/agents/create", body: ctor }, "metadata.constructor");
    // A quoteId smuggled in through a swap body's __proto__ is refused by name, never read.
    const swapPoison = JSON.parse(`{"__proto__":{"quoteId":"${UNKNOWN_UUID}"},"buyToken":"ETH"}`);
    expect(await expectRefused({ method: "POST", url: "/api/v1/swap", body: swapPoison }, "__proto__")).toBe(
      "body must not have a key named __proto__",
    );
    const onrampPoison = JSON.parse('{"__proto__":{"destinationCurrency":"USDC"}}');
    expect(
      await expectRefused({ method: "POST", url: "/api/v1/onramp/session", body: onrampPoison }, "__proto__"),
    ).toBe("body must not have a key named __proto__");
  });

  it("a 2 MiB body over a real socket → a readable 413 JSON answer on every route, never a reset", async () => {
    await t.app.http.listen({ port: 0, host: "127.0.0.1" });
    const address = t.app.http.server.address();
    if (address === null || typeof address === "string") throw new Error("not listening on TCP");
    const body = Buffer.from(JSON.stringify({ name: "x", description: "y".repeat(2 * 1024 * 1024) }));
    const cases: Array<[string, Record<string, string>, number]> = [
      ["/api/v1/payments", bearer(ws.testKey), 413],
      ["/api/v1/workspaces", bearer(ADMIN_SECRET), 413],
      ["/api/agents/create", bearer(ws.testKey), 413],
      ["/api/webhooks/card", {}, 413],
      ["/api/v1/no-such-route", {}, 413],
      [`/api/v1/payments/${fixtures.paymentId}/cancel`, bearer(ws.testKey), 413],
      ["/api/v1/payments", {}, 401],
    ];
    for (const [path, headers, status] of cases) {
      for (const framing of ["content-length", "chunked"] as const) {
        const label = `${path} (${framing})`;
        const answer = await uploadThenRead(address.port, path, headers, body, framing);
        expect(answer.error, `${label}: the client lost the answer`).toBeUndefined();
        expect(answer.status, `${label}: ${answer.body}`).toBe(status);
        const json = JSON.parse(answer.body) as { error?: unknown; success?: unknown };
        expect(typeof json.error, label).toBe("string");
        if (status === 413) expect(json.error, label).toBe("Request body is too large (limit 1 MiB)");
        if (path.startsWith("/api/agents")) expect(json.success, label).toBe(false);
      }
    }
  });
});
