import { createWalletClient, erc20Abi, http, parseUnits } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { expireDuePayments } from "../../src/modules/payments/expiry.ts";
import { createWorkspace } from "../support/app.ts";
import {
  CARD_WEBHOOK_SECRET,
  CHROMIUM,
  cancel,
  createPayment,
  devnet,
  expectSecurityHeaders,
  fake,
  foreignRequests,
  HAS_CHROMIUM,
  IN_CI,
  INSTALL_HINT,
  MERCHANT,
  open,
  origin,
  qrEncodes,
  randomAddress,
  SHOTS,
  t,
  tabStops,
  useHostedPageBrowser,
  waitForStatus,
} from "../support/hosted-page-browser.ts";

// The hosted page's screens in Chromium: pending, paid, card, cancelled, expired; layout and
// hostile content: hosted-page-safety.browser.test.ts; harness: support/hosted-page-browser.ts.

useHostedPageBrowser();

describe.runIf(!HAS_CHROMIUM && IN_CI)("hosted payment page in Chromium (CI)", () => {
  it("has Chromium to run in: CI never skips the browser suite", () => {
    expect.fail(
      `Chromium is missing (${CHROMIUM}) and CI is set: the browser suite must run; ${INSTALL_HINT}`,
    );
  });
});

describe.skipIf(!HAS_CHROMIUM)("hosted payment page in Chromium", () => {
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
    expect(await page.title()).toBe("Waiting for your payment");
    expect(await page.locator("h1").textContent()).toBe("Waiting for your payment");
    expect(await page.locator("#payment").getAttribute("data-status")).toBe("pending");
    expect(await page.locator("html").getAttribute("lang")).toBe("en");
    expect(await page.locator("#network-warning").textContent()).toMatch(/^Send USDC on .+ only$/);
    expect(await page.locator("#open-in-wallet").getAttribute("href")).toMatch(/^ethereum:/);
    // No injected wallet here: the one-click button stays hidden.
    expect(await page.locator("#pay-with-wallet").isVisible()).toBe(false);
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

    // Page weight: everything the initial load fetched, under 100 KB. The status stream is no
    // weight (its body never ends while the payment waits: its sizes would never be known).
    const loadRequests = opened.requests.filter((r) => !new URL(r.url()).pathname.endsWith("/events"));
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
    const paidTx = await payer.writeContract({
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
    expect(await page.title()).toBe("Paid");
    expect(await page.locator("h1").textContent()).toBe("Paid");
    expect(await page.locator("#address").count()).toBe(0);
    expect(await page.locator(".qr").count()).toBe(0);
    expect(await page.locator("#countdown").count()).toBe(0);
    expect(await page.locator("#return").getAttribute("href")).toBe(returnUrl);
    expect(await page.locator("#return").textContent()).toBe("Return to merchant");
    expect(await page.content()).not.toContain("META-SECRET-NOTE-4412");
    await page.screenshot({ path: `${SHOTS}/success.png`, fullPage: true });

    // The receipt: linked from the paid page, with the transaction that paid it and who paid.
    const receiptHref = await page.locator("#receipt-link").getAttribute("href");
    expect(receiptHref).toBe(`/pay/${id}/receipt?lang=en`);
    const receipt = await open(receiptHref ?? "");
    expect(receipt.status).toBe(200);
    expectSecurityHeaders(receipt.headers);
    expect(await receipt.page.locator("h1").textContent()).toBe("Receipt");
    expect(await receipt.page.locator("[data-tx-hash]").getAttribute("data-tx-hash")).toBe(paidTx);
    expect((await receipt.page.locator("#receipt-payer").textContent())?.toLowerCase()).toContain(
      devnet.accounts.payer.address.toLowerCase(),
    );
    expect(await receipt.page.locator("#receipt-amount").textContent()).toBe("25.50");
    expect(await receipt.page.locator("#receipt-id").textContent()).toContain(id);
    // The Print button exists only with the script, which shows it.
    expect(await receipt.page.locator("#print-receipt").isVisible()).toBe(true);
    expect(receipt.errors).toEqual([]);
    expect(foreignRequests(receipt)).toEqual([]);
    await receipt.page.screenshot({ path: `${SHOTS}/receipt.png`, fullPage: true });

    // It followed the status by the event stream where the service serves one (data-events), else
    // by polling the status endpoint; polling stops once the payment is final.
    const polls = () => opened.requests.filter((r) => r.url().endsWith(`/pay/${id}/status`)).length;
    const streamed = opened.requests.some((r) => r.url().endsWith(`/pay/${id}/events`));
    expect(streamed ? 1 : polls()).toBeGreaterThan(0);
    expect(streamed).toBe(opened.html.includes(`data-events="/pay/${id}/events"`));
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
    expect(await page.title()).toBe("Paid");
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
    expect(await page.title()).toBe("Cancelled");
    expect(await page.locator("h1").textContent()).toBe("Cancelled");
    expect(await page.locator("#address").count()).toBe(0);
    expect(await page.locator("#copy").count()).toBe(0);
    expect(await page.locator("#return").getAttribute("href")).toBe(successUrl);
    expect(await tabStops(page)).toContain("return");
    expect(foreignRequests(opened)).toEqual([]);
    await page.screenshot({ path: `${SHOTS}/cancelled.png`, fullPage: true });

    // Loaded afresh, the cancelled page is the same.
    const fresh = await open(`/pay/${created.payment.id}`);
    expect(await fresh.page.locator("h1").textContent()).toBe("Cancelled");
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
    expect(await page.title()).toBe("Expired");
    expect(await page.locator("h1").textContent()).toBe("Expired");
    expect(await page.locator("#address").count()).toBe(0);
    expect(await page.locator("#countdown").count()).toBe(0);
    expect(await page.locator("#return").getAttribute("href")).toBe(merchantReturnUrl);
    expect(foreignRequests(opened)).toEqual([]);
    expect(opened.errors).toEqual([]);
    await page.screenshot({ path: `${SHOTS}/expired.png`, fullPage: true });
  });
});
