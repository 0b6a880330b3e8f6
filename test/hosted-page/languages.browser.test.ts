import { describe, expect, it } from "vitest";
import {
  browser,
  CHROMIUM,
  cancel,
  contexts,
  createPayment,
  HAS_CHROMIUM,
  IN_CI,
  INSTALL_HINT,
  open,
  randomAddress,
  SHOTS,
  useHostedPageBrowser,
  waitForStatus,
} from "../support/hosted-page-browser.ts";

// The hosted page in Chromium, in the payer's language and without server-sent events: the switch
// keeps the query, the receipt answers 404 before payment, and polling alone follows the payment.

useHostedPageBrowser();

describe.runIf(!HAS_CHROMIUM && IN_CI)("hosted page languages in Chromium (CI)", () => {
  it("has Chromium to run in: CI never skips the browser suite", () => {
    expect.fail(
      `Chromium is missing (${CHROMIUM}) and CI is set: the browser suite must run; ${INSTALL_HINT}`,
    );
  });
});

describe.skipIf(!HAS_CHROMIUM)("hosted page languages and fallback in Chromium", () => {
  it("languages: French from Accept-Language, Spanish by the switch (query kept); no receipt before payment", async () => {
    const created = await createPayment({
      tokenSymbol: "USDC",
      amount: "1234.5",
      merchantWallet: randomAddress(),
    });
    const id = created.payment.id;
    // Chromium sends Accept-Language from the context's locale.
    const context = await browser.newContext({ locale: "fr-CA", viewport: { width: 375, height: 800 } });
    contexts.push(context);
    const opened = await open(`/pay/${id}?from=mail`, { context });
    const { page } = opened;
    expect(await page.locator("html").getAttribute("lang")).toBe("fr");
    expect(await page.locator("h1").textContent()).toBe("En attente de votre paiement");
    expect(await page.locator("#amount").textContent()).toBe("1\u202f234,50");
    expect(await page.locator("#languages").getAttribute("aria-label")).toBe("Langue");
    await page.screenshot({ path: `${SHOTS}/pending-fr.png`, fullPage: true });

    await page.locator('#languages a[hreflang="es"]').click();
    await page.waitForURL(/lang=es/);
    const url = new URL(page.url());
    expect(url.searchParams.get("from")).toBe("mail");
    expect(await page.locator("html").getAttribute("lang")).toBe("es");
    expect(await page.locator("h1").textContent()).toBe("Esperando su pago");
    expect(await page.locator("#amount").textContent()).toBe("1234,50");
    expect(opened.errors).toEqual([]);

    const receipt = await open(`/pay/${id}/receipt`, { context });
    expect(receipt.status).toBe(404);
    expect(await receipt.page.locator("html").getAttribute("lang")).toBe("fr");
    expect(await receipt.page.locator("#back-to-payment").getAttribute("href")).toBe(`/pay/${id}?lang=fr`);
  });

  it("without EventSource the page polls the status and still follows the payment", async () => {
    const created = await createPayment({
      tokenSymbol: "USDC",
      amount: "6.66",
      merchantWallet: randomAddress(),
    });
    const id = created.payment.id;
    const opened = await open(`/pay/${id}`, { initScript: "delete window.EventSource;" });
    const { page } = opened;
    expect(await page.evaluate(() => typeof window.EventSource)).toBe("undefined");
    await cancel(id);
    await waitForStatus(page, "cancelled", 10_000);
    expect(await page.locator("h1").textContent()).toBe("Cancelled");
    // The change is announced to assistive technology.
    expect(await page.locator("#announce").textContent()).toBe("Cancelled");
    expect(opened.requests.some((r) => r.url().endsWith(`/pay/${id}/status`))).toBe(true);
    expect(opened.requests.some((r) => r.url().endsWith(`/pay/${id}/events`))).toBe(false);
    expect(opened.navigations).toHaveLength(1);
    expect(opened.errors).toEqual([]);
  });
});
