import { randomUUID } from "node:crypto";
import { createServer as createHttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { contrastRatio } from "../../src/modules/hosted-page/layout.ts";
import { bearer } from "../support/app.ts";
import {
  browser,
  cancel,
  contexts,
  createPayment,
  expectSecurityHeaders,
  foreignRequests,
  HAS_CHROMIUM,
  hasNoHorizontalScroll,
  insertCardPayment,
  MERCHANT,
  open,
  origin,
  randomAddress,
  SHOTS,
  t,
  tabStops,
  useHostedPageBrowser,
  waitForStatus,
  ws,
} from "../support/hosted-page-browser.ts";

// The hosted page in Chromium at 360 px, its focus ring's contrast, against markup and
// javascript: URLs, unknown ids and framing; its screens: hosted-page.browser.test.ts; harness:
// support/hosted-page-browser.ts.

useHostedPageBrowser();

/** A computed `rgb(r, g, b)` colour as `#rrggbb`. */
function hex(rgb: string): string {
  const channels = rgb.match(/\d+/g)?.slice(0, 3) ?? [];
  if (channels.length !== 3) throw new Error(`not an rgb() colour: "${rgb}"`);
  return `#${channels.map((c) => Number(c).toString(16).padStart(2, "0")).join("")}`;
}

describe.skipIf(!HAS_CHROMIUM)("hosted payment page in Chromium", () => {
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

  it("focus ring: at least 3:1 against the background around each Tab stop, light and dark (WCAG 1.4.11)", async () => {
    const created = await createPayment({
      tokenSymbol: "USDC",
      amount: "3.23",
      merchantWallet: randomAddress(),
    });
    const { page } = await open(`/pay/${created.payment.id}`);
    const backgrounds = new Set<string>();
    for (const colorScheme of ["light", "dark"] as const) {
      await page.emulateMedia({ colorScheme });
      // Tab starts again from the top of a fresh load.
      await page.reload();
      const stops = await tabStops(page);
      expect(stops).toContain("copy");
      await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
      for (const stop of stops) {
        await page.keyboard.press("Tab");
        const seen = await page.evaluate(() => {
          const el = document.activeElement;
          if (!el) return { style: "none", ring: "", around: "" };
          // The ring is drawn outside the element: it sits on the nearest painted ancestor.
          let around = el.parentElement;
          while (around && getComputedStyle(around).backgroundColor === "rgba(0, 0, 0, 0)")
            around = around.parentElement;
          const style = getComputedStyle(el);
          return {
            style: style.outlineStyle,
            ring: style.outlineColor,
            around: around ? getComputedStyle(around).backgroundColor : "rgb(255, 255, 255)",
          };
        });
        const where = `${colorScheme}, ${stop}: ${seen.ring} on ${seen.around}`;
        expect(seen.style, where).toBe("solid");
        expect(contrastRatio(hex(seen.ring), hex(seen.around)), where).toBeGreaterThanOrEqual(3);
        backgrounds.add(seen.around);
      }
    }
    // Each scheme had its own background: the emulation took.
    expect(backgrounds.size).toBeGreaterThanOrEqual(2);
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
      expect(await opened.page.locator("h1").textContent()).toBe("Cancelled");
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
