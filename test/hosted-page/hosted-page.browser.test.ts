import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { type AddressInfo, createServer } from "node:net";
import { type Browser, type BrowserContext, chromium, type Page, type Request } from "playwright-core";
import QRCode from "qrcode";
import { createWalletClient, erc20Abi, type Hex, http, parseUnits } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, startDevnet } from "../../src/devnet/chain.ts";
import { expireDuePayments } from "../../src/modules/payments/expiry.ts";
import { createWorkers, type Workers } from "../../src/workers.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { liveNetworkEnv } from "../support/devnet-env.ts";
import { FakeCardProvider } from "../support/fake-card-provider.ts";

// The hosted payment page ({base_url}/pay/<id>) in a real browser (Debian's Chromium driven by
// playwright-core) against the real app listening on a port: live crypto payments paid on the
// devnet, live card payments through the local fake card provider and its signed events.
// Screenshots of every state land in test-results/hosted-page/ (kept by CI as artifacts).

const SHOTS = "test-results/hosted-page";
const CHROMIUM = "/usr/bin/chromium";
const MERCHANT = "https://shop.example";
const CARD_SECRET_KEY = "sk_test_hostedPageBrowserTests0123456789";
const CARD_WEBHOOK_SECRET = "whsec_hosted_page_browser_tests_0123456789ab";

const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

interface OpenedPage {
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
const HAS_CHROMIUM = existsSync(CHROMIUM);
const IN_CI = Boolean(process.env.CI) && process.env.CI !== "false" && process.env.CI !== "0";
const INSTALL_HINT = "install it with `apt-get install -y chromium`";
if (!HAS_CHROMIUM && !IN_CI)
  console.warn(`Chromium is missing (${CHROMIUM}): the browser suite is skipped; ${INSTALL_HINT}`);

describe.runIf(!HAS_CHROMIUM && IN_CI)("hosted payment page in Chromium (CI)", () => {
  it("has Chromium to run in: CI never skips the browser suite", () => {
    expect.fail(
      `Chromium is missing (${CHROMIUM}) and CI is set: the browser suite must run; ${INSTALL_HINT}`,
    );
  });
});

describe.skipIf(!HAS_CHROMIUM)("hosted payment page in Chromium", () => {
  let devnet: Devnet;
  let t: TestApp;
  let workers: Workers;
  let browser: Browser;
  let origin: string;
  let ws: CreatedWorkspace;
  const contexts: BrowserContext[] = [];
  const fake = new FakeCardProvider();

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

  async function createPayment(body: Record<string, unknown>, key = ws.liveKey) {
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

  async function cancel(id: string, key = ws.liveKey) {
    const res = await t.request({
      method: "POST",
      url: `/api/v1/payments/${id}/cancel`,
      headers: bearer(key),
    });
    expect(res.statusCode, res.body).toBe(200);
  }

  /** A pending live card payment row written directly, for checkout URLs the API would never store. */
  async function insertCardPayment(checkoutUrl: string) {
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

  async function open(
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

  const foreignRequests = (opened: OpenedPage) =>
    opened.requests.map((r) => r.url()).filter((url) => new URL(url).origin !== origin);

  async function waitForStatus(page: Page, status: string, timeout = 30_000) {
    await page.waitForFunction(
      (expected) => document.getElementById("status")?.textContent === expected,
      status,
      { timeout, polling: 100 },
    );
  }

  /** Ids (or tag names) of the elements Tab visits, starting from the top of the page. */
  async function tabStops(page: Page, max = 12): Promise<string[]> {
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

  async function hasNoHorizontalScroll(page: Page) {
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
  async function qrEncodes(page: Page, expected: string): Promise<boolean> {
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

  function expectSecurityHeaders(headers: Record<string, string>) {
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

  it("pending live crypto payment: address and QR, paid on the devnet, switches to success without a reload", async () => {
    const shop = await createWorkspace(t);
    const returnUrl = `${MERCHANT}/orders/7731/thanks`;
    const created = await createPayment(
      {
        tokenSymbol: "USDC",
        amount: "25.5",
        merchantWallet: randomAddress(),
        description: "Order #7731 — 2 mugs",
        returnUrl,
        metadata: { internalNote: "META-SECRET-NOTE-4412", customerEmail: "payer-meta@example.org" },
      },
      shop.liveKey,
    );
    const id = created.payment.id;
    expect(created.paymentUrl).toBe(`${origin}/pay/${id}`);

    const opened = await open(new URL(created.paymentUrl).pathname);
    const { page } = opened;
    expect(opened.status).toBe(200);
    expect(opened.headers["content-type"]).toMatch(/^text\/html/);

    // Security headers: strict CSP whose nonce is the one on our script tag, fresh per response.
    const directives = expectSecurityHeaders(opened.headers);
    const nonce = (directives.get("script-src") ?? []).find((v) => v.startsWith("'nonce-"))?.slice(7, -1);
    expect(nonce).toBeTruthy();
    expect(opened.html).toContain(`nonce="${nonce}"`);
    const again = await t.request({ method: "GET", url: `/pay/${id}` });
    expect(again.headers["content-security-policy"]).not.toContain(`'nonce-${nonce}'`);

    // What the payer sees.
    expect(await page.title()).toBe("Waiting for payment");
    expect(await page.locator("#status").textContent()).toBe("pending");
    expect(await page.locator("#amount").textContent()).toBe("25.50");
    expect(await page.locator("#description").textContent()).toBe("Order #7731 — 2 mugs");
    expect(await page.locator("#address").inputValue()).toBe(created.receivingAddress);
    expect(await page.locator("#address").isVisible()).toBe(true);
    expect(await page.locator("#return").count()).toBe(0); // only on success, cancel, expired
    expect(await page.locator("#countdown").textContent()).toMatch(/^(59|60):\d\d$/);
    const qr = page.locator(".qr svg");
    expect(await qr.isVisible()).toBe(true);
    const box = await qr.boundingBox();
    expect(box?.width).toBeGreaterThan(120);
    expect(Math.abs((box?.width ?? 0) - (box?.height ?? 1))).toBeLessThan(2);
    const units = parseUnits("25.5", 6);
    expect(
      await qrEncodes(
        page,
        `ethereum:${devnet.tokens.USDC}@${devnet.chainId}/transfer?address=${created.receivingAddress}&uint256=${units}`,
      ),
    ).toBe(true);

    // Only public fields: no metadata, no workspace internals, in the page or the status endpoint.
    const pageText = await page.content();
    for (const secret of ["META-SECRET-NOTE-4412", "payer-meta@example.org", shop.id, shop.liveKey]) {
      expect(opened.html).not.toContain(secret);
      expect(pageText).not.toContain(secret);
    }
    const statusRes = await t.request({ method: "GET", url: `/pay/${id}/status` });
    expect(statusRes.statusCode).toBe(200);
    expect(statusRes.json()).toMatchObject({ id, status: "pending" });
    expect(statusRes.body).not.toContain("META-SECRET-NOTE-4412");
    expect(statusRes.body).not.toContain(shop.id);

    // Page weight: everything the initial load fetched, under 100 KB.
    const loadRequests = opened.requests.slice();
    expect(loadRequests.map((r) => new URL(r.url()).pathname)).toEqual(
      expect.arrayContaining([`/pay/${id}`, "/pay/assets/page.css", "/pay/assets/page.js"]),
    );
    let weight = 0;
    for (const request of loadRequests) {
      const sizes = await request.sizes();
      weight += sizes.responseBodySize + sizes.responseHeadersSize;
    }
    expect(weight).toBeGreaterThan(1000);
    expect(weight).toBeLessThan(100 * 1024);

    await page.screenshot({ path: `${SHOTS}/pending.png`, fullPage: true });

    // Pay on the devnet; the page must follow by itself, in the same document.
    await page.evaluate(() => {
      (window as unknown as { __marker: number }).__marker = 1;
    });
    const payer = createWalletClient({
      account: privateKeyToAccount(devnet.accounts.payer.privateKey),
      chain: devnet.chain,
      transport: http(devnet.rpcUrl),
    });
    await payer.writeContract({
      address: devnet.tokens.USDC,
      abi: erc20Abi,
      functionName: "transfer",
      args: [created.receivingAddress, units],
      chain: devnet.chain,
      account: payer.account ?? null,
    });
    await waitForStatus(page, "forwarded", 40_000);

    expect(await page.evaluate(() => (window as unknown as { __marker?: number }).__marker)).toBe(1);
    expect(opened.navigations).toHaveLength(1);
    expect(await page.title()).toBe("Payment complete");
    expect(await page.locator("h1").textContent()).toBe("Payment complete");
    expect(await page.locator("#address").count()).toBe(0);
    expect(await page.locator(".qr").count()).toBe(0);
    expect(await page.locator("#countdown").count()).toBe(0);
    expect(await page.locator("#return").getAttribute("href")).toBe(returnUrl);
    expect(await page.locator("#return").textContent()).toBe("Return to merchant");
    expect(await page.content()).not.toContain("META-SECRET-NOTE-4412");
    await page.screenshot({ path: `${SHOTS}/success.png`, fullPage: true });

    // It polled the status endpoint, and stops once the payment is final.
    const polls = () => opened.requests.filter((r) => r.url().endsWith(`/pay/${id}/status`)).length;
    expect(polls()).toBeGreaterThan(0);
    const pollsAtSuccess = polls();
    await page.waitForTimeout(3_300);
    expect(polls()).toBe(pollsAtSuccess);

    // Nothing went to any other origin, and nothing failed (no CSP violation, no script error).
    expect(foreignRequests(opened)).toEqual([]);
    expect(opened.errors).toEqual([]);

    // Return to merchant: keyboard-reachable, navigates to the return URL without a Referer.
    expect(await tabStops(page)).toContain("return");
    let referer: string | undefined = "not requested";
    await opened.context.route(`${MERCHANT}/**`, async (route) => {
      referer = route.request().headers().referer;
      await route.fulfill({ contentType: "text/html", body: "<h1>Thanks from the shop</h1>" });
    });
    await page.locator("#return").click();
    await page.waitForURL(returnUrl);
    expect(await page.locator("h1").textContent()).toBe("Thanks from the shop");
    expect(referer).toBeUndefined();
  }, 60_000);

  it("copy button: puts the address in the clipboard, reachable and usable with the keyboard", async () => {
    const created = await createPayment({
      tokenSymbol: "USDC",
      amount: "3.21",
      merchantWallet: randomAddress(),
    });
    const { page } = await open(`/pay/${created.payment.id}`, {
      permissions: ["clipboard-read", "clipboard-write"],
    });
    const stops = await tabStops(page);
    expect(stops).toContain("copy");
    // Walk to the copy button with Tab only, then press Enter.
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    for (let i = 0; i <= stops.indexOf("copy"); i++) await page.keyboard.press("Tab");
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("copy");
    const outline = await page.locator("#copy").evaluate((el) => getComputedStyle(el).outlineStyle);
    expect(outline).not.toBe("none"); // a visible focus ring
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => document.getElementById("copy-status")?.textContent !== "");
    expect(await page.locator("#copy-status").textContent()).toBe("Address copied");
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(created.receivingAddress);
  });

  it("copy button: shows the fallback message and selects the address when the clipboard refuses", async () => {
    const created = await createPayment({
      tokenSymbol: "USDC",
      amount: "3.22",
      merchantWallet: randomAddress(),
    });
    const { page, errors } = await open(`/pay/${created.payment.id}`, {
      initScript: `Object.defineProperty(navigator, "clipboard", {
        value: { writeText: () => Promise.reject(new DOMException("denied", "NotAllowedError")) },
      });`,
    });
    await page.locator("#copy").click();
    await page.waitForFunction(() => document.getElementById("copy-status")?.textContent !== "");
    expect(await page.locator("#copy-status").textContent()).toBe("Select the address and copy it");
    const selection = await page
      .locator("#address")
      .evaluate((el: HTMLInputElement) => el.value.slice(el.selectionStart ?? 0, el.selectionEnd ?? 0));
    expect(selection).toBe(created.receivingAddress);
    expect(errors).toEqual([]);
  });

  it("live card payment: Pay with card points at the checkout URL; paid at the provider, the page shows success", async () => {
    const returnUrl = `${MERCHANT}/card/thanks`;
    const created = await createPayment({
      paymentMethod: "card",
      tokenSymbol: "USD",
      amount: "25",
      description: "Gift card",
      returnUrl,
      metadata: { cardSecretRef: "CARD-META-9931" },
    });
    const checkoutUrl = created.checkoutUrl ?? "";
    expect(checkoutUrl).toMatch(/^https:\/\//);
    const opened = await open(`/pay/${created.payment.id}`);
    const { page } = opened;
    expect(opened.status).toBe(200);
    expectSecurityHeaders(opened.headers);
    expect(await page.locator("#amount").textContent()).toBe("25.00");
    expect(await page.locator(".amount").textContent()).toBe("25.00 USD");
    expect(await page.locator("#description").textContent()).toBe("Gift card");
    const button = page.locator("#pay-with-card");
    expect(await button.isVisible()).toBe(true);
    expect(await button.textContent()).toBe("Pay with card");
    expect(await button.getAttribute("href")).toBe(checkoutUrl);
    expect(await page.locator("#address").count()).toBe(0);
    expect(await page.locator(".qr").count()).toBe(0);
    expect(await page.locator("#return").count()).toBe(0);
    expect(opened.html).not.toContain("CARD-META-9931");
    expect(await tabStops(page)).toContain("pay-with-card");
    await page.screenshot({ path: `${SHOTS}/card.png`, fullPage: true });

    // Following the button (in a second tab) lands on the checkout URL.
    await opened.context.route(`${new URL(checkoutUrl).origin}/**`, (route) =>
      route.fulfill({ contentType: "text/html", body: "<h1>Checkout</h1>" }),
    );
    const second = await opened.context.newPage();
    await second.goto(`${origin}/pay/${created.payment.id}`);
    await second.locator("#pay-with-card").click();
    await second.waitForURL(checkoutUrl);
    expect(await second.locator("h1").textContent()).toBe("Checkout");
    await second.close();

    // The payer completes the checkout: the provider's signed event reaches the service, and the
    // open page follows without a reload.
    await page.evaluate(() => {
      (window as unknown as { __marker: number }).__marker = 1;
    });
    const event = fake.checkoutCompleted(created.cardCheckoutSessionId ?? "", { livemode: true });
    const signed = fake.sign(event, CARD_WEBHOOK_SECRET);
    const delivered = await t.request({
      method: "POST",
      url: "/api/webhooks/card",
      headers: { "content-type": "application/json", "stripe-signature": signed.header },
      payload: signed.payload,
    });
    expect(delivered.statusCode, delivered.body).toBeLessThan(300);
    await waitForStatus(page, "forwarded", 10_000);
    expect(await page.evaluate(() => (window as unknown as { __marker?: number }).__marker)).toBe(1);
    expect(opened.navigations).toHaveLength(1);
    expect(await page.title()).toBe("Payment complete");
    expect(await page.locator("#pay-with-card").count()).toBe(0);
    expect(await page.locator("#return").getAttribute("href")).toBe(returnUrl);
    expect(foreignRequests(opened)).toEqual([]);
    expect(opened.errors).toEqual([]);
    await page.screenshot({ path: `${SHOTS}/card-success.png`, fullPage: true });
  });

  it("cancelled screen: the open page switches to cancelled, with Return to merchant (successUrl alias)", async () => {
    const successUrl = `${MERCHANT}/cart?state=cancelled`;
    const created = await createPayment({
      tokenSymbol: "USDC",
      amount: "4.44",
      merchantWallet: randomAddress(),
      successUrl,
    });
    const opened = await open(`/pay/${created.payment.id}`);
    const { page } = opened;
    await page.evaluate(() => {
      (window as unknown as { __marker: number }).__marker = 1;
    });
    await cancel(created.payment.id);
    await waitForStatus(page, "cancelled", 10_000);
    expect(await page.evaluate(() => (window as unknown as { __marker?: number }).__marker)).toBe(1);
    expect(opened.navigations).toHaveLength(1);
    expect(await page.title()).toBe("Payment cancelled");
    expect(await page.locator("h1").textContent()).toBe("Payment cancelled");
    expect(await page.locator("#address").count()).toBe(0);
    expect(await page.locator("#copy").count()).toBe(0);
    expect(await page.locator("#return").getAttribute("href")).toBe(successUrl);
    expect(await tabStops(page)).toContain("return");
    expect(foreignRequests(opened)).toEqual([]);
    await page.screenshot({ path: `${SHOTS}/cancelled.png`, fullPage: true });

    // Loaded afresh, the cancelled page is the same.
    const fresh = await open(`/pay/${created.payment.id}`);
    expect(await fresh.page.locator("h1").textContent()).toBe("Payment cancelled");
    expect(await fresh.page.locator("#return").getAttribute("href")).toBe(successUrl);
  });

  it("expired screen: the open page switches to expired, with Return to merchant (metadata alias)", async () => {
    const merchantReturnUrl = `${MERCHANT}/retry?order=55`;
    const created = await createPayment({
      tokenSymbol: "USDC",
      amount: "5.55",
      merchantWallet: randomAddress(),
      expiresInMinutes: 1,
      metadata: { merchantReturnUrl },
    });
    const opened = await open(`/pay/${created.payment.id}`);
    const { page } = opened;
    expect(await page.locator("#countdown").textContent()).toMatch(/^(0|1):\d\d$/);
    await page.evaluate(() => {
      (window as unknown as { __marker: number }).__marker = 1;
    });
    // The expiry job's own code, run at a moment past this payment's expiry.
    expect(await expireDuePayments(t.database.db, new Date(Date.now() + 2 * 60_000))).toBeGreaterThanOrEqual(
      1,
    );
    await waitForStatus(page, "expired", 10_000);
    expect(await page.evaluate(() => (window as unknown as { __marker?: number }).__marker)).toBe(1);
    expect(opened.navigations).toHaveLength(1);
    expect(await page.title()).toBe("Payment expired");
    expect(await page.locator("h1").textContent()).toBe("Payment expired");
    expect(await page.locator("#address").count()).toBe(0);
    expect(await page.locator("#countdown").count()).toBe(0);
    expect(await page.locator("#return").getAttribute("href")).toBe(merchantReturnUrl);
    expect(foreignRequests(opened)).toEqual([]);
    expect(opened.errors).toEqual([]);
    await page.screenshot({ path: `${SHOTS}/expired.png`, fullPage: true });
  });

  it("360 px wide: no horizontal scroll on the crypto, card and final pages", async () => {
    const longWord = "A".repeat(180);
    const crypto = await createPayment({
      tokenSymbol: "ADAO",
      amount: "123456789.123456789123456789",
      merchantWallet: randomAddress(),
      description: `Very long description without breaks ${longWord} and a URL https://example.com/${"x".repeat(120)}`,
      returnUrl: `${MERCHANT}/${"r".repeat(300)}`,
    });
    const viewport = { width: 360, height: 740 };
    const opened = await open(`/pay/${crypto.payment.id}`, { viewport });
    expect(await opened.page.locator("#address").isVisible()).toBe(true);
    await hasNoHorizontalScroll(opened.page);
    const copyBox = await opened.page.locator("#copy").boundingBox();
    expect((copyBox?.x ?? 999) + (copyBox?.width ?? 0)).toBeLessThanOrEqual(360);
    const qrBox = await opened.page.locator(".qr svg").boundingBox();
    expect((qrBox?.x ?? 999) + (qrBox?.width ?? 0)).toBeLessThanOrEqual(360);
    await opened.page.screenshot({ path: `${SHOTS}/mobile-360-crypto.png`, fullPage: true });

    const cardPayment = await createPayment({
      paymentMethod: "card",
      tokenSymbol: "USD",
      amount: "99999.99",
      description: `Card ${longWord}`,
    });
    const card = await open(`/pay/${cardPayment.payment.id}`, { viewport });
    expect(await card.page.locator("#pay-with-card").isVisible()).toBe(true);
    await hasNoHorizontalScroll(card.page);
    await card.page.screenshot({ path: `${SHOTS}/mobile-360-card.png`, fullPage: true });

    await cancel(crypto.payment.id);
    const final = await open(`/pay/${crypto.payment.id}`, { viewport });
    expect(await final.page.locator("#return").isVisible()).toBe(true);
    await hasNoHorizontalScroll(final.page);
    await final.page.screenshot({ path: `${SHOTS}/mobile-360-cancelled.png`, fullPage: true });
  });

  it("XSS: markup in the description and quotes in returnUrl stay text, before and after the live swap", async () => {
    const description =
      `<img src=x onerror="window.__xss=1;alert(1)"><script>window.__xss=2;alert(2)</script>` +
      `<svg onload="alert(3)"></svg>"'><a href="javascript:alert(4)">click</a>`;
    const returnUrl = `${MERCHANT}/back?q="><script>window.__xss=3;alert(5)</script>&x='onmouseover='alert(6)`;
    const created = await createPayment({
      tokenSymbol: "USDC",
      amount: "6.66",
      merchantWallet: randomAddress(),
      description,
      returnUrl,
    });
    const opened = await open(`/pay/${created.payment.id}`);
    const { page } = opened;

    const inert = async () => {
      expect(await page.locator("#description").textContent()).toBe(description);
      expect(await page.locator("#description *").count()).toBe(0);
      expect(
        await page.locator("main img, main script, main svg[onload], main a[href^='javascript:' i]").count(),
      ).toBe(0);
      const handlers = await page.evaluate(() =>
        [...document.querySelectorAll("*")].flatMap((el) =>
          [...el.attributes].filter((a) => a.name.toLowerCase().startsWith("on")).map((a) => a.name),
        ),
      );
      expect(handlers).toEqual([]);
      expect(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss)).toBeUndefined();
      expect(opened.dialogs).toEqual([]);
    };
    await inert();
    await page.screenshot({ path: `${SHOTS}/xss-pending.png`, fullPage: true });

    await cancel(created.payment.id);
    await waitForStatus(page, "cancelled", 10_000);
    await inert();
    expect(await page.locator("#return").getAttribute("href")).toBe(returnUrl);
    await page.locator("#return").hover();
    expect(opened.dialogs).toEqual([]);
    expect(foreignRequests(opened)).toEqual([]);
    expect(opened.requests.filter((r) => new URL(r.url()).pathname.endsWith("/x"))).toEqual([]);
    expect(opened.errors).toEqual([]);
    await page.screenshot({ path: `${SHOTS}/xss-cancelled.png`, fullPage: true });
  });

  it("XSS: a javascript: return URL is refused by the API and never becomes a link on the page", async () => {
    for (const body of [
      { returnUrl: "javascript:alert(document.domain)" },
      { successUrl: "JaVaScRiPt:alert(1)" },
      { merchantReturnUrl: " javascript:alert(1)" },
      { metadata: { returnUrl: "javascript:alert(1)" } },
      { returnUrl: "data:text/html,<script>alert(1)</script>" },
    ]) {
      const res = await t.request({
        method: "POST",
        url: "/api/v1/payments",
        headers: bearer(ws.liveKey),
        payload: { tokenSymbol: "USDC", amount: "7.77", merchantWallet: randomAddress(), ...body },
      });
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
    }

    // Rows written before validation existed (or by hand): the page still must not link them.
    const dangerous = [
      "javascript:window.__xss=7;alert(7)",
      "JAVASCRIPT:alert(8)",
      "  javascript:alert(9)",
      "java\tscript:alert(10)",
      "data:text/html;base64,PHNjcmlwdD5hbGVydCgxMSk8L3NjcmlwdD4=",
      "vbscript:msgbox(12)",
    ];
    const shared = await browser.newContext();
    contexts.push(shared);
    for (const returnUrl of dangerous) {
      const created = await createPayment({
        tokenSymbol: "USDC",
        amount: "7.78",
        merchantWallet: randomAddress(),
      });
      await t.database.db
        .updateTable("payments")
        .set({ status: "cancelled", return_url: returnUrl })
        .where("id", "=", created.payment.id)
        .execute();
      const opened = await open(`/pay/${created.payment.id}`, { context: shared });
      expect(await opened.page.locator("h1").textContent()).toBe("Payment cancelled");
      const hrefs = await opened.page.evaluate(() =>
        [...document.querySelectorAll("a[href]")].map((a) => (a as HTMLAnchorElement).protocol),
      );
      expect(
        hrefs.filter((p) => p !== "http:" && p !== "https:"),
        returnUrl,
      ).toEqual([]);
      for (const link of await opened.page.locator("a").all()) await link.click({ timeout: 2_000 });
      expect(
        await opened.page.evaluate(() => (window as unknown as { __xss?: number }).__xss),
      ).toBeUndefined();
      expect(opened.dialogs).toEqual([]);
    }

    // The same for a card checkout URL.
    const cardId = await insertCardPayment("javascript:alert(13)");
    const card = await open(`/pay/${cardId}`, { context: shared });
    expect(await card.page.locator("a[href^='javascript:' i]").count()).toBe(0);
    expect(card.dialogs).toEqual([]);
  });

  it("unknown or malformed id: 404 page with the same security headers", async () => {
    const shared = await browser.newContext();
    contexts.push(shared);
    for (const id of [
      randomUUID(),
      "not-a-uuid",
      "00000000-0000-0000-0000-00000000000g",
      "%3Cscript%3Ealert(1)",
    ]) {
      const opened = await open(`/pay/${id}`, { context: shared });
      expect(opened.status, id).toBe(404);
      expect(opened.headers["content-type"]).toMatch(/^text\/html/);
      expectSecurityHeaders(opened.headers);
      expect(await opened.page.title()).toBe("Payment not found");
      expect(await opened.page.locator("h1").textContent()).toBe("Payment not found");
      expect(await opened.page.locator("script, main img").count()).toBe(0);
      expect(opened.dialogs).toEqual([]);
      expect(foreignRequests(opened)).toEqual([]);
      if (id === "not-a-uuid")
        await opened.page.screenshot({ path: `${SHOTS}/not-found.png`, fullPage: true });
      const status = await t.request({ method: "GET", url: `/pay/${id}/status` });
      expect(status.statusCode, id).toBe(404);
    }
  });

  it("cannot be framed by another site", async () => {
    const created = await createPayment({
      tokenSymbol: "USDC",
      amount: "8.88",
      merchantWallet: randomAddress(),
    });
    // Another origin on loopback (a served page, so no local-network-access rule interferes): it
    // frames the payment page and, as a control, a page of its own.
    const evil = createHttpServer((req, res) => {
      res.setHeader("content-type", "text/html");
      res.end(
        req.url === "/own"
          ? "<p id='own'>framed fine</p>"
          : `<h1>Evil</h1><iframe name="own" src="/own"></iframe>` +
              `<iframe name="victim" src="${origin}/pay/${created.payment.id}" width="400" height="400"></iframe>`,
      );
    });
    await new Promise<void>((resolve) => evil.listen(0, "127.0.0.1", resolve));
    try {
      const context = await browser.newContext();
      contexts.push(context);
      const page = await context.newPage();
      let victimStatus = 0;
      page.on("response", (response) => {
        if (response.url() === `${origin}/pay/${created.payment.id}`) victimStatus = response.status();
      });
      await page.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
      await page.waitForTimeout(300);
      const rendered = async (name: string) => {
        const frame = page.frame({ name });
        if (!frame) return "no frame";
        return frame
          .evaluate(() => document.querySelector("#own, #payment")?.id ?? "nothing")
          .catch(() => "nothing");
      };
      expect(await rendered("own")).toBe("own");
      expect(victimStatus).toBe(200); // fetched, then refused by the browser
      expect(await rendered("victim")).toBe("nothing");
    } finally {
      evil.closeAllConnections();
      await new Promise((resolve) => evil.close(resolve));
    }
  });
});
