import type { Page } from "playwright-core";
import { type Hex, numberToHex, parseUnits } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { rpc } from "../../src/devnet/chain.ts";
import { expireDuePayments } from "../../src/modules/payments/expiry.ts";
import { bearer } from "../support/app.ts";
import { type AxeViolation, axeViolations, formatViolations } from "../support/axe.ts";
import { devnetClients } from "../support/devnet-clients.ts";
import { credit } from "../support/devnet-credit.ts";
import { erc20TransferData, injectWallet } from "../support/eip1193.ts";
import {
  browser,
  CHROMIUM,
  cancel,
  contexts,
  createPayment,
  devnet,
  foreignRequests,
  HAS_CHROMIUM,
  IN_CI,
  INSTALL_HINT,
  open,
  origin,
  randomAddress,
  SHOTS,
  t,
  tabStops,
  useHostedPageBrowser,
  ws,
} from "../support/hosted-page-browser.ts";
import { setMining } from "../support/mining.ts";
import { until } from "../support/poll.ts";

// The checkout a payer trusts (issue 42, D25) in Chromium: every state accessible (axe-core, WCAG
// 2.2 AA) at phone and desktop widths, one-click payment from an injected EIP-1193 wallet backed by
// the devnet, the receipt, live status by server-sent events, a CSP naming no other origin, the
// four languages, keyboard-only use. Harness: support/hosted-page-browser.ts, support/eip1193.ts,
// support/axe.ts. Screenshots: test-results/hosted-page/<state>-<width>.png.

useHostedPageBrowser();

const WIDTHS = [375, 1280] as const;
/** What the payer reads in each state (issue 42): never an internal status name. */
const PAYER_WORDS = {
  pending: "Waiting for your payment",
  detected: "Payment received, confirming…",
  paid: "Paid",
  expired: "Expired",
  cancelled: "Cancelled",
  refunded: "Refunded",
} as const;
type State = keyof typeof PAYER_WORDS;

/** The payment's status as the merchant's API reads it. */
async function apiStatus(id: string, key = ws.liveKey): Promise<string> {
  const res = await t.request({ method: "GET", url: `/api/v1/payments/${id}`, headers: bearer(key) });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { payment?: { status?: string }; status?: string }).payment?.status ?? "";
}

/** Until the open page's payment root carries `status` (the page follows by itself). */
const pageStatus = (page: Page, status: string, timeout = 30_000) =>
  page.waitForFunction(
    (expected) => document.getElementById("payment")?.dataset.status === expected,
    status,
    { timeout, polling: 50 },
  );

const liveUsdc = (amount: string, extra: Record<string, unknown> = {}) =>
  createPayment({ tokenSymbol: "USDC", amount, merchantWallet: randomAddress(), ...extra });

/**
 * Opens `path` at each width, waits for `status`, runs axe and writes the screenshot; then asserts
 * the payer's words and no violation (after both widths, so every screenshot is written).
 */
async function checkState(state: State, path: string, status: string) {
  const found: string[] = [];
  for (const width of WIDTHS) {
    const opened = await open(path, { viewport: { width, height: 900 } });
    await pageStatus(opened.page, status);
    const violations: AxeViolation[] = await axeViolations(opened.page);
    await opened.page.screenshot({ path: `${SHOTS}/${state}-${width}.png`, fullPage: true });
    if (violations.length > 0) found.push(`${state} at ${width} px:\n${formatViolations(violations)}`);
    // biome-ignore lint/performance/useDomNodeTextContent: what the payer sees (hidden text left out)
    const text = await opened.page.locator("body").innerText();
    // Soft: a wrong word and an axe violation are both reported, not only the first.
    expect.soft(text, `${state} at ${width} px`).toContain(PAYER_WORDS[state]);
    expect.soft(text, `${state} at ${width} px`).not.toMatch(/\bforwarded\b/i);
    expect(foreignRequests(opened)).toEqual([]);
  }
  expect(found.join("\n\n"), "axe-core WCAG 2.2 AA violations").toBe("");
}

/** A fresh devnet account with USDC and ETH (credited with no transaction) for a wallet to pay from. */
async function fundedKey(): Promise<Hex> {
  const key = generatePrivateKey();
  await credit(devnet, privateKeyToAccount(key).address, { USDC: "1000", ETH: "10" });
  return key;
}

/**
 * The sources of a CSP's directives beyond our own origin, a nonce and 'none': any host or scheme
 * (data: only for images) and the unsafe-* keywords, each as "directive source".
 */
function externalSources(csp: string): string[] {
  const external: string[] = [];
  const directives = csp
    .split(";")
    .map((d) => d.trim())
    .filter(Boolean);
  for (const directive of directives) {
    const [name, ...sources] = directive.split(/\s+/);
    for (const source of sources) {
      const keyword = /^'(none|self|strict-dynamic|report-sample|nonce-[A-Za-z0-9+/=_-]+)'$/.test(source);
      // data: only for images (the QR and a logo may be inline); no remote scheme or host anywhere.
      const inlineImage = source === "data:" && name === "img-src";
      if (!keyword && !inlineImage) external.push(`${name} ${source}`);
    }
  }
  return external;
}

describe.runIf(!HAS_CHROMIUM && IN_CI)("checkout in Chromium (CI)", () => {
  it("has Chromium to run in: CI never skips the browser suite", () => {
    expect.fail(
      `Chromium is missing (${CHROMIUM}) and CI is set: the browser suite must run; ${INSTALL_HINT}`,
    );
  });
});

describe.skipIf(!HAS_CHROMIUM)("checkout in Chromium", () => {
  it("axe harness: finds the violations of a deliberately bad page served under a nonce CSP", async () => {
    // Served by a route (nothing leaves the browser), with a CSP as strict as the hosted page's:
    // proof axe runs despite it and reports real failures, so "0 violations" elsewhere means something.
    const context = await browser.newContext();
    contexts.push(context);
    await context.route(`${origin}/axe-bad-page`, (route) =>
      route.fulfill({
        contentType: "text/html",
        headers: {
          "content-security-policy": "default-src 'none'; script-src 'nonce-abc'; style-src 'self'",
        },
        body: `<!doctype html><html><head><title>Bad</title></head><body>
          <img src="/missing.png"><input type="text"><button></button>
          <p style="color:#bbb;background:#fff">low contrast</p></body></html>`,
      }),
    );
    const page = await context.newPage();
    await page.goto(`${origin}/axe-bad-page`);
    const ids = (await axeViolations(page)).map((v) => v.id);
    expect(ids).toEqual(expect.arrayContaining(["html-has-lang", "image-alt", "label", "button-name"]));
    const report = formatViolations(await axeViolations(page));
    expect(report).toMatch(/^image-alt \((critical|serious)\): .+\n {4}img: /m);
  });

  it("pending: payer words, axe clean at 375 and 1280 px", async () => {
    const created = await liveUsdc("14.20", { description: "Order #42 — a teapot" });
    await checkState("pending", `/pay/${created.payment.id}`, "pending");
    // The EIP-681 link for mobile wallets: the same transfer as the QR, exactly.
    const { page } = await open(`/pay/${created.payment.id}`);
    expect(await page.locator("a#open-in-wallet").getAttribute("href", { timeout: 5_000 })).toBe(
      `ethereum:${devnet.tokens.USDC}@${devnet.chainId}/transfer?address=${created.receivingAddress}&uint256=${parseUnits("14.20", 6)}`,
    );
  });

  it("detected, then paid (forwarded): payer words, axe clean at both widths", async () => {
    const created = await liveUsdc("15.30");
    const id = created.payment.id;
    const clients = devnetClients(devnet);
    // Detected lasts one block with mining on (2 confirmations): hold mining, put the transfer in
    // exactly one block, check the page, then let the chain confirm it.
    await setMining(devnet.rpcUrl, false);
    try {
      await clients.sendUsdc(created.receivingAddress, parseUnits("15.30", 6));
      await rpc(devnet.rpcUrl, "evm_mine", []);
      await until(
        "detected",
        () => apiStatus(id),
        (s) => s === "detected",
        30_000,
      );
      await checkState("detected", `/pay/${id}`, "detected");
    } finally {
      await setMining(devnet.rpcUrl, true);
    }
    await until(
      "forwarded",
      () => apiStatus(id),
      (s) => s === "forwarded",
      60_000,
    );
    await checkState("paid", `/pay/${id}`, "forwarded");
  }, 120_000);

  it("expired and cancelled: payer words, axe clean at both widths", async () => {
    const expiring = await liveUsdc("16.40", { expiresInMinutes: 1 });
    // The expiry job's own code, run at a moment past this payment's expiry.
    expect(await expireDuePayments(t.database.db, new Date(Date.now() + 2 * 60_000))).toBeGreaterThanOrEqual(
      1,
    );
    await checkState("expired", `/pay/${expiring.payment.id}`, "expired");
    const cancelled = await liveUsdc("16.50");
    await cancel(cancelled.payment.id);
    await checkState("cancelled", `/pay/${cancelled.payment.id}`, "cancelled");
  }, 60_000);

  it("refunded: payer words, axe clean at both widths", async () => {
    const id = await refundedSandboxPayment();
    await checkState("refunded", `/pay/${id}`, "forwarded");
  });

  it("the injected wallet sends the exact transfer from inside the page; the open page follows it", async () => {
    // The provider itself, driven by page code as the page's script will drive it: works on today's page.
    const created = await liveUsdc("7.77");
    const context = await browser.newContext();
    contexts.push(context);
    const wallet = await injectWallet(context, devnet, await fundedKey());
    const opened = await open(`/pay/${created.payment.id}`, { context });
    const { page } = opened;
    const units = parseUnits("7.77", 6);
    const chainId = numberToHex(devnet.chainId);
    const answers = await page.evaluate(
      async ({ to, data, chainId }) => {
        const eth = (window as Window & { ethereum?: { request(a: object): Promise<unknown> } }).ethereum;
        if (!eth) throw new Error("no window.ethereum");
        const code = (p: Promise<unknown>) =>
          p.then(
            () => null,
            (e: { code?: number }) => e.code ?? -1,
          );
        const accounts = await eth.request({ method: "eth_requestAccounts" });
        const wrongChain = await code(
          eth.request({ method: "wallet_switchEthereumChain", params: [{ chainId: "0x1" }] }),
        );
        const switched = await eth.request({ method: "wallet_switchEthereumChain", params: [{ chainId }] });
        const hash = await eth.request({
          method: "eth_sendTransaction",
          params: [{ from: (accounts as string[])[0], to, data, value: "0x0" }],
        });
        return { accounts, wrongChain, switched, hash, chain: await eth.request({ method: "eth_chainId" }) };
      },
      { to: devnet.tokens.USDC, data: erc20TransferData(created.receivingAddress, units), chainId },
    );
    expect(answers.accounts).toEqual([wallet.address]);
    expect(answers.wrongChain).toBe(4902);
    expect(answers.switched).toBeNull();
    expect(answers.chain).toBe(chainId);
    expect(answers.hash).toBe(wallet.sent[0]);
    const receipt = await devnetClients(devnet).chain.waitForTransactionReceipt({
      hash: wallet.sent[0] as Hex,
    });
    expect(receipt.status).toBe("success");
    await pageStatus(page, "forwarded", 60_000);
    expect(await apiStatus(created.payment.id)).toBe("forwarded");

    // Reads go to the devnet as a wallet's go to its node; what a wallet lacks is 4200.
    const reads = await page.evaluate(async (hash) => {
      const eth = (window as Window & { ethereum?: { request(a: object): Promise<unknown> } }).ethereum;
      const receipt = (await eth?.request({ method: "eth_getTransactionReceipt", params: [hash] })) as {
        status?: string;
      };
      const missing = await eth?.request({ method: "eth_signTypedData_v4", params: [] }).then(
        () => null,
        (e: { code?: number }) => e.code,
      );
      return { status: receipt?.status, missing };
    }, wallet.sent[0]);
    expect(reads).toEqual({ status: "0x1", missing: 4200 });

    // A refusal reaches the page as EIP-1193's 4001, and nothing is sent.
    wallet.reject("eth_sendTransaction", 1);
    const refused = await page.evaluate(() =>
      (window as Window & { ethereum?: { request(a: object): Promise<unknown> } }).ethereum
        ?.request({
          method: "eth_sendTransaction",
          params: [{ to: "0x0000000000000000000000000000000000000001" }],
        })
        .then(
          () => null,
          (e: { code?: number }) => e.code,
        ),
    );
    expect(refused).toBe(4001);
    expect(wallet.sent).toHaveLength(1);
    expect(opened.errors).toEqual([]);
  }, 90_000);

  it("one click on Pay with wallet pays the exact USDC transfer; Paid; the receipt shows its hash", async () => {
    const created = await liveUsdc("12.34");
    const id = created.payment.id;
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    contexts.push(context);
    const wallet = await injectWallet(context, devnet, await fundedKey());
    const opened = await open(`/pay/${id}`, { context });
    const { page } = opened;
    // The wallet's progress is announced to assistive technology.
    const region = page.locator("#wallet-status");
    await region.waitFor({ state: "attached", timeout: 10_000 });
    const live = {
      role: await region.getAttribute("role"),
      ariaLive: await region.getAttribute("aria-live"),
    };
    expect(
      ["status", "alert"].includes(live.role ?? "") || ["polite", "assertive"].includes(live.ariaLive ?? ""),
      JSON.stringify(live),
    ).toBe(true);
    await page.locator("#pay-with-wallet").click();
    await until(
      "the wallet's transaction",
      async () => wallet.sent.length,
      (n) => n > 0,
      30_000,
    );
    expect(wallet.sent).toHaveLength(1);
    const [sent] = wallet.calls("eth_sendTransaction");
    const tx = sent?.params[0] as { to?: string; data?: string; value?: string };
    expect(tx.to?.toLowerCase()).toBe(devnet.tokens.USDC.toLowerCase());
    expect(tx.data?.toLowerCase()).toBe(erc20TransferData(created.receivingAddress, parseUnits("12.34", 6)));
    expect(BigInt(tx.value ?? "0")).toBe(0n);
    expect(wallet.calls("eth_requestAccounts").length + wallet.calls("eth_accounts").length).toBeGreaterThan(
      0,
    );

    await pageStatus(page, "forwarded", 60_000);
    // biome-ignore lint/performance/useDomNodeTextContent: what the payer sees (hidden text left out)
    expect(await page.locator("body").innerText()).toContain(PAYER_WORDS.paid);
    await page.locator("#receipt-link").click();
    await page.waitForURL(`${origin}/pay/${id}/receipt**`);
    const hash = page.locator("main#receipt [data-tx-hash]");
    const shown = (await hash.getAttribute("data-tx-hash")) || (await hash.textContent());
    expect(shown?.trim().toLowerCase()).toBe(wallet.sent[0]?.toLowerCase());
    for (const width of WIDTHS) {
      await page.setViewportSize({ width, height: 900 });
      await page.screenshot({ path: `${SHOTS}/receipt-${width}.png`, fullPage: true });
      expect(await axeViolations(page).then(formatViolations), `receipt at ${width} px`).toBe("");
    }
    expect(foreignRequests(opened)).toEqual([]);
    expect(opened.errors).toEqual([]);
  }, 120_000);

  it("a wallet that does not know the network adds it from the page's public endpoint, then pays", async () => {
    const created = await liveUsdc("4.56");
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    contexts.push(context);
    const wallet = await injectWallet(context, devnet, await fundedKey(), { knowsNetwork: false });
    const opened = await open(`/pay/${created.payment.id}`, { context });
    const { page } = opened;
    const button = page.locator("#pay-with-wallet");
    await button.waitFor({ state: "visible", timeout: 10_000 });
    expect(await button.getAttribute("data-wallet-rpc-url")).toBe(devnet.rpcUrl);
    const networkName = `Chain ${devnet.chainId}`;
    expect(await button.getAttribute("data-network-name")).toBe(networkName);

    // Without an endpoint to add it with, the payer is asked to add the network and nothing is sent.
    await button.evaluate((el) => el.removeAttribute("data-wallet-rpc-url"));
    await button.click();
    await expect
      .poll(() => page.locator("#wallet-status").textContent())
      .toBe(`Add ${networkName} to your wallet, then try again`);
    expect(await button.isEnabled()).toBe(true);
    expect(wallet.calls("wallet_addEthereumChain")).toEqual([]);
    expect(wallet.sent).toEqual([]);

    await page.reload();
    await button.waitFor({ state: "visible", timeout: 10_000 });
    await button.click();
    await until(
      "the wallet's transaction",
      async () => wallet.sent.length,
      (n) => n > 0,
      30_000,
    );
    expect(wallet.calls("wallet_addEthereumChain").map((call) => call.params[0])).toEqual([
      {
        chainId: numberToHex(devnet.chainId),
        chainName: networkName,
        nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
        rpcUrls: [devnet.rpcUrl],
      },
    ]);
    const [sent] = wallet.calls("eth_sendTransaction");
    const tx = sent?.params[0] as { to?: string; data?: string };
    expect(tx.to?.toLowerCase()).toBe(devnet.tokens.USDC.toLowerCase());
    expect(tx.data?.toLowerCase()).toBe(erc20TransferData(created.receivingAddress, parseUnits("4.56", 6)));
    await pageStatus(page, "forwarded", 60_000);
    expect(opened.errors).toEqual([]);
  }, 120_000);

  it("live status by server-sent events: the page shows the change within 2 s of the API", async () => {
    const created = await liveUsdc("9.87");
    const id = created.payment.id;
    const opened = await open(`/pay/${id}`);
    const { page } = opened;
    // The page's EventSource: a request of type eventsource to /pay/:id/events.
    const stream = await until(
      "the page's event stream",
      async () => opened.requests.find((r) => new URL(r.url()).pathname === `/pay/${id}/events`),
      (r) => r !== undefined,
      10_000,
    );
    expect(stream?.resourceType()).toBe("eventsource");

    const clients = devnetClients(devnet);
    await clients.sendUsdc(created.receivingAddress, parseUnits("9.87", 6));
    // Both watched from Node on one clock: when the API first reads a status past pending, and
    // when the open page first shows one.
    const [apiAt, pageAt] = await Promise.all([
      until(
        "the API past pending",
        () => apiStatus(id),
        (s) => s !== "pending",
        30_000,
        20,
      ).then(() => Date.now()),
      page
        .waitForFunction(() => document.getElementById("payment")?.dataset.status !== "pending", undefined, {
          timeout: 40_000,
          polling: "raf",
        })
        .then(() => Date.now()),
    ]);
    expect(pageAt - apiAt, `the page followed ${pageAt - apiAt} ms after the API`).toBeLessThan(2_000);
    await pageStatus(page, "forwarded", 60_000);
    expect(foreignRequests(opened)).toEqual([]);
  }, 90_000);

  it("with the event stream cut, the page still follows the status by polling", async () => {
    const created = await liveUsdc("9.88");
    const id = created.payment.id;
    const context = await browser.newContext();
    contexts.push(context);
    // A proxy or network that cuts SSE: every request to the stream fails.
    await context.route(`${origin}/pay/${id}/events`, (route) => route.abort("connectionreset"));
    const opened = await open(`/pay/${id}`, { context });
    await cancel(id);
    await pageStatus(opened.page, "cancelled", 15_000);
    expect(opened.requests.some((r) => new URL(r.url()).pathname === `/pay/${id}/status`)).toBe(true);
    expect(opened.navigations).toHaveLength(1);
  });

  it("the CSP of the page and of the receipt names no external source", async () => {
    // The parser itself finds what it must.
    expect(
      externalSources(
        "default-src 'none'; img-src 'self' data: https://cdn.example; script-src 'nonce-a1' *",
      ),
    ).toEqual(["img-src https://cdn.example", "script-src *"]);
    expect(
      externalSources("default-src 'none'; style-src 'self' 'unsafe-inline'; base-uri 'none'; x 'self'"),
    ).toEqual(["style-src 'unsafe-inline'"]);
    const pending = await liveUsdc("3.33");
    const sandbox = await refundedSandboxPayment(false);
    // A receipt exists once the payment is paid (docs/hosted-page.md): a live one paid on the devnet,
    // a sandbox one as it was created. A pending one's receipt route is the 404 page saying so,
    // under the same policy.
    const paid = await liveUsdc("3.34");
    await devnetClients(devnet).sendUsdc(paid.receivingAddress, parseUnits("3.34", 6));
    await until(
      "paid",
      () => apiStatus(paid.payment.id),
      (s) => ["detected", "confirmed", "forwarded"].includes(s),
      30_000,
    );
    const pages: [string, number][] = [
      [`/pay/${pending.payment.id}`, 200],
      [`/pay/${sandbox}`, 200],
      [`/pay/${paid.payment.id}`, 200],
      [`/pay/${paid.payment.id}/receipt`, 200],
      [`/pay/${sandbox}/receipt`, 200],
      [`/pay/${pending.payment.id}/receipt`, 404],
    ];
    for (const [url, status] of pages) {
      const res = await t.request({ method: "GET", url });
      expect(res.statusCode, url).toBe(status);
      const csp = String(res.headers["content-security-policy"] ?? "");
      expect(csp, url).toMatch(/script-src [^;]*'nonce-/);
      expect(csp, url).toMatch(/(^|; )default-src 'none'(;|$)/);
      expect(externalSources(csp), url).toEqual([]);
    }
  }, 60_000);

  it("renders in French, Spanish and German by ?lang= and by Accept-Language", async () => {
    const created = await liveUsdc("21.00");
    const path = `/pay/${created.payment.id}`;
    const english = await open(`${path}?lang=en`);
    expect(await english.page.getAttribute("html", "lang")).toMatch(/^en\b/);
    const englishTitle = await english.page.title();
    expect(englishTitle).toBe(PAYER_WORDS.pending);
    // A word the title of a pending payment cannot lack in each language.
    const words = { fr: /paiement/i, es: /pago/i, de: /zahlung/i } as const;
    for (const [lang, word] of Object.entries(words)) {
      const byQuery = await open(`${path}?lang=${lang}`);
      expect(await byQuery.page.getAttribute("html", "lang"), lang).toMatch(new RegExp(`^${lang}\\b`));
      expect(await byQuery.page.title(), lang).toMatch(word);
      expect(await byQuery.page.title()).not.toBe(englishTitle);
      // The amount in the language's own notation (Intl): a decimal comma in all three.
      expect(await byQuery.page.locator("#amount").textContent(), lang).toMatch(/^21,00\b/);

      const context = await browser.newContext({ locale: `${lang}-${lang.toUpperCase()}` });
      contexts.push(context);
      const byHeader = await open(path, { context });
      expect(await byHeader.page.getAttribute("html", "lang"), `Accept-Language ${lang}`).toMatch(
        new RegExp(`^${lang}\\b`),
      );
      expect(await byHeader.page.title()).toBe(await byQuery.page.title());
    }
  });

  it("keyboard only: Tab reaches copy and Pay with wallet with a visible focus ring; Enter copies", async () => {
    const created = await liveUsdc("5.05");
    const context = await browser.newContext();
    contexts.push(context);
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin });
    await injectWallet(context, devnet, await fundedKey());
    const { page } = await open(`/pay/${created.payment.id}`, { context });
    const stops = await tabStops(page, 20);
    expect(stops).toEqual(expect.arrayContaining(["copy", "pay-with-wallet"]));
    for (const target of ["pay-with-wallet", "copy"]) {
      // Tab until the target has focus (bounded: one lap of the page's stops and a little more).
      // Not a count from the top: after blur() Chromium goes on from the blurred element.
      for (let i = 0; i < stops.length + 4; i++) {
        await page.keyboard.press("Tab");
        if ((await page.evaluate(() => document.activeElement?.id)) === target) break;
      }
      const focus = await page.evaluate(() => {
        const el = document.activeElement as HTMLElement;
        const style = getComputedStyle(el);
        return {
          id: el.id,
          visible: el.matches(":focus-visible"),
          ring: (style.outlineStyle !== "none" && style.outlineWidth !== "0px") || style.boxShadow !== "none",
        };
      });
      expect(focus, target).toEqual({ id: target, visible: true, ring: true });
    }
    await page.keyboard.press("Enter"); // on copy, the last one focused
    await page.waitForFunction(() => document.getElementById("copy-status")?.textContent !== "", undefined, {
      timeout: 5_000,
    });
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(created.receivingAddress);
  });
});

/**
 * A sandbox payment (settled at creation, D19) refunded in full when `refund` is set: the refunded
 * state with no chain to wait on.
 */
async function refundedSandboxPayment(refund = true): Promise<string> {
  const api = (url: string, payload: object, headers: Record<string, string> = {}) =>
    t.request({ method: "POST", url, headers: { ...bearer(ws.testKey), ...headers }, payload });
  const funded = await api("/api/v1/sandbox/faucet", { tokenSymbol: "USDC", amount: "50.00" });
  expect(funded.statusCode, funded.body).toBe(200);
  const created = await api("/api/v1/payments", {
    amount: "10.00",
    tokenSymbol: "USDC",
    paymentMethod: "crypto",
  });
  expect(created.statusCode, created.body).toBe(201);
  const id = (created.json() as { payment: { id: string; status: string } }).payment.id;
  expect(await apiStatus(id, ws.testKey)).toBe("forwarded");
  if (refund) {
    const refunded = await api(
      `/api/v1/payments/${id}/refunds`,
      { destinationAddress: randomAddress() },
      { "idempotency-key": `checkout-${id}` },
    );
    expect(refunded.statusCode, refunded.body).toBe(201);
  }
  return id;
}
