import { randomBytes, scryptSync } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PASSWORD_COST } from "../../src/platform/secrets/hashing.ts";
import { createWorkspace, startTestApp, type TestApp } from "../support/app.ts";
import { DashboardClient } from "../support/dashboard.ts";

// Admin passwords are hashed with scrypt at N = 2^17, r = 8, p = 1, the parameters written in the
// stored hash (D21). A hash stored before, with Node's defaults and no parameters, still signs in
// and is replaced by one at today's cost at that login.

const PASSWORD = "correct horse battery";
let t: TestApp;

beforeAll(async () => {
  // The service's own cost, the subject here (the other suites build the app cheaper).
  t = await startTestApp({}, { passwordCost: PASSWORD_COST });
});

afterAll(async () => {
  await t?.close();
});

const storedHash = async (id: string) =>
  (
    await t.database.db
      .selectFrom("workspaces")
      .select("admin_password_hash")
      .where("id", "=", id)
      .executeTakeFirstOrThrow()
  ).admin_password_hash ?? "";

describe("admin password hashes", () => {
  it("are made at N = 2^17, r = 8, p = 1, named in the stored hash", async () => {
    const ws = await createWorkspace(t, {
      name: "Cost",
      adminEmail: "cost@shop.example",
      adminPassword: PASSWORD,
    });
    expect(await storedHash(ws.id)).toMatch(
      /^scrypt\$N=131072,r=8,p=1\$[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}$/,
    );
  });

  it("made with Node's defaults still sign in, and are replaced at that login", async () => {
    const email = `legacy-${Math.random().toString(36).slice(2, 8)}@shop.example`;
    const ws = await createWorkspace(t, { name: "Legacy", adminEmail: email, adminPassword: PASSWORD });
    const salt = randomBytes(16);
    const legacy = `scrypt$${salt.toString("base64")}$${scryptSync(PASSWORD, salt, 32).toString("base64")}`;
    await t.database.db
      .updateTable("workspaces")
      .set({ admin_password_hash: legacy })
      .where("id", "=", ws.id)
      .execute();

    // A wrong password changes nothing.
    expect((await new DashboardClient(t, "198.51.100.211").login(email, "not the password")).statusCode).toBe(
      401,
    );
    expect(await storedHash(ws.id)).toBe(legacy);

    expect((await new DashboardClient(t, "198.51.100.212").login(email, PASSWORD)).statusCode).toBe(303);
    const upgraded = await storedHash(ws.id);
    expect(upgraded).toMatch(/^scrypt\$N=131072,r=8,p=1\$/);
    // The same password, at the new cost, signs in again (and the hash stays as it is).
    expect((await new DashboardClient(t, "198.51.100.213").login(email, PASSWORD)).statusCode).toBe(303);
    expect(await storedHash(ws.id)).toBe(upgraded);
  });
});
