// What the hosted payment page's browser suites (test/hosted-page/*.browser.test.ts) share: a real
// service on a devnet, Chromium driven by Playwright, and the checks made of an opened page.

import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { type Browser, type BrowserContext, chromium, type Page, type Request } from "playwright-core";
import QRCode from "qrcode";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { type Devnet, startDevnet } from "../../src/devnet/chain.ts";
import { createWorkers, type Workers } from "../../src/workers.ts";
import { bearer, type CreatedWorkspace, createWorkspace, startTestApp, type TestApp } from "./app.ts";
import { liveNetworkEnv } from "./devnet-env.ts";
import { FakeCardProvider } from "./fake-card-provider.ts";

// The hosted payment page ({base_url}/pay/<id>) in a real browser (Debian's Chromium driven by
// playwright-core) against the real app listening on a port: live crypto payments paid on the
// devnet, live card payments through the local fake card provider and its signed events.
// Screenshots of every state land in test-results/hosted-page/ (kept by CI as artifacts).

export const SHOTS = "test-results/hosted-page";
export const CHROMIUM = "/usr/bin/chromium";
export const MERCHANT = "https://shop.example";
export const CARD_SECRET_KEY = "sk_test_hostedPageBrowserTests0123456789";
export const CARD_WEBHOOK_SECRET = "whsec_hosted_page_browser_tests_0123456789ab";

export const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface OpenedPage {
  page: Page;
  context: BrowserContext;
  /** Every request the page made, in order (including the status polls). */
  requests: Request[];
  /** Main-frame navigations (the first one is the initial load). */
  navigations: string[];
  /** Console errors (CSP violations included) and uncaught exceptions. */
  errors: string[];
  dialogs: string[];
  status: number;
  headers: Record<string, string>;
  html: string;
}

// CI installs Debian's Chromium (.ci/run) and always runs this suite: there (CI set), a missing
// Chromium is a failure. On a developer's machine without it, the suite is skipped with one line
// saying how to install it rather than failing `npm test`.
export const HAS_CHROMIUM = existsSync(CHROMIUM);
export const IN_CI = Boolean(process.env.CI) && process.env.CI !== "false" && process.env.CI !== "0";
export const INSTALL_HINT = "install it with `apt-get install -y chromium`";
if (!HAS_CHROMIUM && !IN_CI)
  console.warn(`Chromium is missing (${CHROMIUM}): the browser suite is skipped; ${INSTALL_HINT}`);

export let devnet: Devnet;
export let t: TestApp;
export let workers: Workers;
export let browser: Browser;
export let origin: string;
export let ws: CreatedWorkspace;
export const contexts: BrowserContext[] = [];
export const fake = new FakeCardProvider();

export async function createPayment(body: Record<string, unknown>, key = ws.liveKey) {
  const res = await t.request({
    method: "POST",
    url: "/api/v1/payments",
    headers: bearer(key),
    payload: body,
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as {
    payment: { id: string; status: string };
    receivingAddress: Hex;
    paymentUrl: string;
    checkoutUrl?: string;
    cardCheckoutSessionId?: string;
  };
}

export async function cancel(id: string, key = ws.liveKey) {
  const res = await t.request({
    method: "POST",
    url: `/api/v1/payments/${id}/cancel`,
    headers: bearer(key),
  });
  expect(res.statusCode, res.body).toBe(200);
}

/** A pending live card payment row written directly, for checkout URLs the API would never store. */
export async function insertCardPayment(checkoutUrl: string) {
  const row = await t.database.db
    .insertInto("payments")
    .values({
      workspace_id: ws.id,
      environment: "live",
      status: "pending",
      payment_method: "card",
      payment_provider: "card",
      token_symbol: "USD",
      gross_amount: "2500",
      fee_amount: "38",
      net_amount: "2462",
      merchant_wallet: randomAddress(),
      wallet_type: "eoa",
      receiving_address: null,
      description: "Card order",
      metadata: JSON.stringify({}),
      return_url: null,
      cancel_url: null,
      expires_at: new Date(Date.now() + 60 * 60_000),
      card_checkout_session_id: `cs_test_${randomUUID().replaceAll("-", "")}`,
      checkout_url: checkoutUrl,
    })
    .returning("id")
    .executeTakeFirstOrThrow();
  return row.id;
}

export async function open(
  path: string,
  options: {
    viewport?: { width: number; height: number };
    permissions?: string[];
    initScript?: string;
    /** Opens the page in this context (several pages share one) instead of a fresh one. */
    context?: BrowserContext;
  } = {},
): Promise<OpenedPage> {
  const context =
    options.context ??
    (await browser.newContext({ viewport: options.viewport ?? { width: 1024, height: 900 } }));
  if (!options.context) contexts.push(context);
  if (options.permissions) await context.grantPermissions(options.permissions, { origin });
  if (options.initScript) await context.addInitScript(options.initScript);
  const page = await context.newPage();
  const requests: Request[] = [];
  const navigations: string[] = [];
  const errors: string[] = [];
  const dialogs: string[] = [];
  page.on("request", (request) => requests.push(request));
  page.on("framenavigated", (frame) => {
    if (frame === page.mainFrame()) navigations.push(frame.url());
  });
  page.on("console", (message) => {
    // Chromium asks every origin for /favicon.ico by itself; that is not the page's doing.
    if (message.type() === "error" && !message.location().url.endsWith("/favicon.ico"))
      errors.push(message.text());
  });
  page.on("pageerror", (error) => errors.push(error.message));
  page.on("dialog", (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  const response = await page.goto(`${origin}${path}`);
  if (!response) throw new Error(`no response for ${path}`);
  return {
    page,
    context,
    requests,
    navigations,
    errors,
    dialogs,
    status: response.status(),
    headers: response.headers(),
    html: await response.text(),
  };
}

export const foreignRequests = (opened: OpenedPage) =>
  opened.requests.map((r) => r.url()).filter((url) => new URL(url).origin !== origin);

export async function waitForStatus(page: Page, status: string, timeout = 30_000) {
  await page.waitForFunction(
    // The internal status the page carries for its script (the payer reads words, not this).
    (expected) => document.getElementById("payment")?.dataset.status === expected,
    status,
    { timeout, polling: 100 },
  );
}

/** Ids (or tag names) of the elements Tab visits, starting from the top of the page. */
export async function tabStops(page: Page, max = 12): Promise<string[]> {
  await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
  const stops: string[] = [];
  for (let i = 0; i < max; i++) {
    await page.keyboard.press("Tab");
    const stop = await page.evaluate(() => {
      const el = document.activeElement;
      return !el || el === document.body ? null : el.id || el.tagName.toLowerCase();
    });
    if (stop === null || stops.includes(stop)) break;
    stops.push(stop);
  }
  return stops;
}

export async function hasNoHorizontalScroll(page: Page) {
  const sizes = await page.evaluate(() => {
    window.scrollTo(10_000, 0);
    return {
      scrollWidth: document.documentElement.scrollWidth,
      bodyScrollWidth: document.body.scrollWidth,
      clientWidth: document.documentElement.clientWidth,
      scrollX: window.scrollX,
    };
  });
  expect(sizes.scrollWidth, JSON.stringify(sizes)).toBeLessThanOrEqual(sizes.clientWidth);
  expect(sizes.bodyScrollWidth, JSON.stringify(sizes)).toBeLessThanOrEqual(sizes.clientWidth);
  expect(sizes.scrollX).toBe(0);
}

/**
 * Rasterises the page's QR SVG on a scratch page and compares its modules with the QR code of
 * `expected` (any error-correction level): proof the QR encodes exactly that text.
 */
export async function qrEncodes(page: Page, expected: string): Promise<boolean> {
  const svg = await page.locator(".qr svg").evaluate((el) => {
    const clone = el.cloneNode(true) as Element;
    clone.setAttribute("xmlns", "http://www.w3.org/2000/svg");
    return clone.outerHTML;
  });
  const scratchContext = await browser.newContext();
  contexts.push(scratchContext);
  const scratch = await scratchContext.newPage();
  const size = 600;
  const rows = await scratch.evaluate(
    async ({ svg, size }) => {
      const img = new Image();
      img.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`;
      await img.decode();
      const canvas = document.createElement("canvas");
      canvas.width = size;
      canvas.height = size;
      const g = canvas.getContext("2d");
      if (!g) throw new Error("no 2d context");
      g.fillStyle = "#fff";
      g.fillRect(0, 0, size, size);
      g.drawImage(img, 0, 0, size, size);
      const data = g.getImageData(0, 0, size, size).data;
      const out: string[] = [];
      for (let y = 0; y < size; y++) {
        let row = "";
        for (let x = 0; x < size; x++) row += (data[(y * size + x) * 4] ?? 255) < 128 ? "1" : "0";
        out.push(row);
      }
      return out;
    },
    { svg, size },
  );
  let minX = size;
  let minY = size;
  let maxX = -1;
  let maxY = -1;
  rows.forEach((row, y) => {
    for (let x = 0; x < size; x++) {
      if (row[x] !== "1") continue;
      minX = Math.min(minX, x);
      maxX = Math.max(maxX, x);
      minY = Math.min(minY, y);
      maxY = Math.max(maxY, y);
    }
  });
  if (maxX < 0) return false;
  for (const level of ["L", "M", "Q", "H"] as const) {
    const modules = QRCode.create(expected, { errorCorrectionLevel: level }).modules;
    const n = modules.size;
    const cellX = (maxX - minX + 1) / n;
    const cellY = (maxY - minY + 1) / n;
    let same = true;
    for (let r = 0; r < n && same; r++) {
      for (let c = 0; c < n && same; c++) {
        const px = rows[Math.floor(minY + (r + 0.5) * cellY)]?.[Math.floor(minX + (c + 0.5) * cellX)];
        if ((px === "1") !== Boolean(modules.get(r, c))) same = false;
      }
    }
    if (same) return true;
  }
  return false;
}

export function expectSecurityHeaders(headers: Record<string, string>) {
  const csp = headers["content-security-policy"] ?? "";
  const directives = new Map(
    csp
      .split(";")
      .map((d) => d.trim().split(/\s+/))
      .filter((d) => d[0])
      .map(([name, ...values]) => [name, values]),
  );
  expect(directives.get("default-src")).toEqual(["'none'"]);
  expect(directives.get("frame-ancestors")).toEqual(["'none'"]);
  expect(directives.get("script-src")).not.toContain("'unsafe-inline'");
  expect(headers["x-frame-options"]).toBe("DENY");
  expect(headers["referrer-policy"]).toBe("no-referrer");
  return directives;
}

/** A devnet, the app with its workers, a fake card provider and Chromium for the file; each test's browser contexts closed after it. */
export function useHostedPageBrowser(): void {
  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    [devnet, browser] = await Promise.all([
      startDevnet(),
      chromium.launch({
        executablePath: CHROMIUM,
        args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
      }),
    ]);
    await fake.start();
    t = await startTestApp(
      liveNetworkEnv(devnet, {
        PUBLIC_BASE_URL: origin,
        // The public endpoint a payer's wallet may add the network with (the devnet's own here).
        LIVE_WALLET_RPC_URL: devnet.rpcUrl,
        CARD_SECRET_KEY_LIVE: CARD_SECRET_KEY,
        CARD_WEBHOOK_SECRET_LIVE: CARD_WEBHOOK_SECRET,
        CARD_API_BASE: fake.url,
      }),
    );
    await t.app.http.listen({ port, host: "127.0.0.1" });
    expect((t.app.http.server.address() as AddressInfo).port).toBe(port);
    workers = createWorkers(t.app, { dispatcher: { pollIntervalMs: 50 } });
    workers.start();
    ws = await createWorkspace(t);
  }, 60_000);
  afterEach(async () => {
    for (const context of contexts.splice(0)) await context.close();
  });
  afterAll(async () => {
    await browser?.close();
    await workers?.stop();
    await t?.close();
    await devnet?.stop();
    await fake.stop();
  });
}
