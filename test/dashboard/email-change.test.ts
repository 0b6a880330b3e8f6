import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ADMIN_SECRET,
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { DashboardClient } from "../support/dashboard.ts";
import { MailSink } from "../support/mail-sink.ts";

// A new admin e-mail takes effect when the link mailed to it is opened (D21): through the app's
// real mailer to an SMTP listener on 127.0.0.1. Until then the old e-mail signs in and the new one
// does not; the link works once, expires after 24 hours, is replaced by a newer request, and the
// database keeps only its token's hash.

const PASSWORD = "correct horse battery";
const ADDRESS = "0x3333333333333333333333333333333333333333";

const mail = new MailSink();
let t: TestApp;
let nextIp = 1;

beforeAll(async () => {
  t = await startTestApp({ SMTP_URL: await mail.start(), PUBLIC_BASE_URL: "http://pay.test" });
});

afterAll(async () => {
  await t?.close();
  await mail.stop();
});

const fresh = (what: string) => `${what}-${Math.random().toString(36).slice(2, 10)}@shop.example`;
const ip = () => `198.51.100.${150 + nextIp++}`;

async function adminEmailOf(ws: CreatedWorkspace): Promise<string | null> {
  const res = await t.request({
    method: "GET",
    url: `/api/v1/workspaces/${ws.id}`,
    headers: bearer(ADMIN_SECRET),
  });
  return res.json().workspace.adminEmail;
}

/** A workspace, a browser signed in to it, and a change of its admin e-mail to `to` asked for. */
async function askChange(
  to: string,
  from?: { ws: CreatedWorkspace; email: string; browser: DashboardClient },
) {
  const email = from?.email ?? fresh("owner");
  const ws =
    from?.ws ?? (await createWorkspace(t, { name: "Mail Co", adminEmail: email, adminPassword: PASSWORD }));
  const browser = from?.browser ?? new DashboardClient(t, ip());
  if (!from) expect((await browser.login(email, PASSWORD)).statusCode).toBe(303);
  const csrf = await browser.csrf("/dashboard/sandbox/settings");
  const res = await browser.post("/dashboard/sandbox/settings", {
    _csrf: csrf,
    settlementAddress: ADDRESS,
    adminEmail: to,
    currentPassword: PASSWORD,
  });
  expect(res.statusCode, res.body.slice(0, 300)).toBe(303);
  expect(res.headers.location).toBe("/dashboard/sandbox/settings?notice=email-confirmation-sent");
  return { ws, email, browser };
}

/** The confirmation link of the latest mail to `to`. */
function linkTo(to: string): string {
  const sent = mail.to(to).at(-1);
  const link = /http:\/\/pay\.test(\/dashboard\/email\/confirm\?token=[A-Za-z0-9_-]+)/.exec(
    sent?.text ?? "",
  )?.[1];
  if (!link) throw new Error(`no confirmation link mailed to ${to}: ${sent?.raw}`);
  return link;
}

const open = (link: string) => t.request({ method: "GET", url: link });
const login = (email: string) => new DashboardClient(t, ip()).login(email, PASSWORD);

describe("changing the admin e-mail", () => {
  it("waits for the link mailed to the new address; opening it makes the change, once", async () => {
    const newEmail = fresh("new");
    const { ws, email, browser } = await askChange(newEmail);
    // Nothing changed yet: the old e-mail signs in, the new one does not.
    expect(await adminEmailOf(ws)).toBe(email);
    expect((await login(newEmail)).statusCode).toBe(401);
    expect((await login(email)).statusCode).toBe(303);
    const settings = await browser.get("/dashboard/sandbox/settings?notice=email-confirmation-sent");
    expect(settings.body).toContain("A link was mailed to the new admin e-mail");
    expect(settings.body).toMatch(/id="pending-email">Waiting for <strong>[^<]+<\/strong>/);

    // One mail, to the new address only, through SMTP.
    const sent = mail.to(newEmail);
    expect(sent).toHaveLength(1);
    expect(sent[0]?.rcptTo).toEqual([newEmail]);
    expect(sent[0]?.subject).toBe("Confirm your new admin e-mail");
    expect(mail.to(email)).toEqual([]);
    const link = linkTo(newEmail);
    const token = new URL(link, "http://pay.test").searchParams.get("token") ?? "";

    // Stored hashed: the row has the token's SHA-256, never the token.
    const rows = await t.database.db
      .selectFrom("workspace_email_changes")
      .selectAll()
      .where("workspace_id", "=", ws.id)
      .execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]?.token_hash).toBe(createHash("sha256").update(token).digest("hex"));
    expect(JSON.stringify(rows)).not.toContain(token);

    // Opened (no session needed): the change is made.
    const confirmed = await open(link);
    expect(confirmed.statusCode, confirmed.body.slice(0, 300)).toBe(200);
    expect(confirmed.body).toContain("The admin e-mail is now <strong>");
    expect(confirmed.headers["content-security-policy"]).toContain("default-src 'none'");
    expect(await adminEmailOf(ws)).toBe(newEmail);
    expect((await login(newEmail)).statusCode).toBe(303);
    expect((await login(email)).statusCode).toBe(401);

    // Single use.
    const again = await open(link);
    expect(again.statusCode).toBe(404);
    expect(again.body).toContain("This confirmation link is not valid");
    expect(await adminEmailOf(ws)).toBe(newEmail);
  });

  it("does not take effect after 24 hours", async () => {
    const newEmail = fresh("late");
    const { ws, email } = await askChange(newEmail);
    const link = linkTo(newEmail);
    t.setNow(new Date(Date.now() + 24 * 3_600_000 + 1_000));
    try {
      const late = await open(link);
      expect(late.statusCode).toBe(404);
      expect(late.body).toContain("has expired");
    } finally {
      t.setNow(undefined);
    }
    expect(await adminEmailOf(ws)).toBe(email);
    // Not even once the clock is back: the expired link was spent.
    expect((await open(link)).statusCode).toBe(404);
    expect(await adminEmailOf(ws)).toBe(email);
  });

  it("is replaced by a newer request: the older link no longer works", async () => {
    const first = fresh("first");
    const second = fresh("second");
    const asked = await askChange(first);
    const firstLink = linkTo(first);
    await askChange(second, asked);
    expect((await open(firstLink)).statusCode).toBe(404);
    expect(await adminEmailOf(asked.ws)).toBe(asked.email);
    expect((await open(linkTo(second))).statusCode).toBe(200);
    expect(await adminEmailOf(asked.ws)).toBe(second);
  });

  it("refuses a made-up token and changes nothing", async () => {
    const res = await open("/dashboard/email/confirm?token=made-up-token-0123456789");
    expect(res.statusCode).toBe(404);
    expect((await open("/dashboard/email/confirm")).statusCode).toBe(400);
  });

  it("saves the settlement address at once, and mails nothing when the e-mail is unchanged", async () => {
    const email = fresh("same");
    const ws = await createWorkspace(t, { name: "Same", adminEmail: email, adminPassword: PASSWORD });
    const browser = new DashboardClient(t, ip());
    expect((await browser.login(email, PASSWORD)).statusCode).toBe(303);
    const csrf = await browser.csrf("/dashboard/sandbox/settings");
    const before = mail.received.length;
    const res = await browser.post("/dashboard/sandbox/settings", {
      _csrf: csrf,
      settlementAddress: ADDRESS,
      adminEmail: email.toUpperCase(),
      currentPassword: PASSWORD,
    });
    expect(res.headers.location).toBe("/dashboard/sandbox/settings?notice=settings-saved");
    expect(mail.received.length).toBe(before);
    const read = await t.request({
      method: "GET",
      url: `/api/v1/workspaces/${ws.id}`,
      headers: bearer(ADMIN_SECRET),
    });
    expect(read.json().workspace.settlement_address).toBe(ADDRESS);
  });
});

describe("when the mail cannot be sent", () => {
  it("answers 503, keeps the admin e-mail and leaves no pending change", async () => {
    const dead = await startTestApp({ SMTP_URL: "smtp://127.0.0.1:9" }, { database: t.database });
    try {
      const email = fresh("nomail");
      const ws = await createWorkspace(dead, { name: "No mail", adminEmail: email, adminPassword: PASSWORD });
      const browser = new DashboardClient(dead, ip());
      expect((await browser.login(email, PASSWORD)).statusCode).toBe(303);
      const csrf = await browser.csrf("/dashboard/sandbox/settings");
      const res = await browser.post("/dashboard/sandbox/settings", {
        _csrf: csrf,
        settlementAddress: ADDRESS,
        adminEmail: fresh("unreachable"),
        currentPassword: PASSWORD,
      });
      expect(res.statusCode).toBe(503);
      expect(res.body).toContain("could not be sent, so the admin e-mail is unchanged");
      expect(await adminEmailOf(ws)).toBe(email);
      const rows = await t.database.db
        .selectFrom("workspace_email_changes")
        .select("token_hash")
        .where("workspace_id", "=", ws.id)
        .execute();
      expect(rows).toEqual([]);
    } finally {
      await dead.close(true);
    }
  });
});
