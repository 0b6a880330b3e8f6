import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { openDatabase } from "../../src/platform/db/database.ts";
import { migratorUpTo } from "../support/migrations.ts";

// Migration 044 on a database with history: payments paid without a transfer get the time their
// receipt shows (D25): a sandbox payment completed as it was created, its creation; a card
// payment, the arrival of the provider's event that paid it. Nothing else is touched.

const WALLET = `0x${"Ab".repeat(20)}`;

describe("migration 044 on a database with history", () => {
  it("gives sandbox and card payments paid before the upgrade their paid time, and no other row one", async () => {
    const { db, close } = await openDatabase({});
    try {
      expect((await migratorUpTo(db, "043_checkout_branding").migrateToLatest()).error).toBeUndefined();
      const rows = await sql<{ id: string; label: string }>`
        WITH ws AS (INSERT INTO workspaces (name) VALUES ('before the upgrade') RETURNING id)
        INSERT INTO payments (workspace_id, environment, status, payment_method, payment_provider,
                              token_symbol, gross_amount, fee_amount, net_amount, wallet_type,
                              receiving_address, expires_at, created_at, detected_at, metadata)
        SELECT ws.id, env, status, method, provider, 'USDC', 5, 0, 5, 'eoa', ${WALLET}, now(),
               '2026-01-02T03:04:05Z', detected, jsonb_build_object('label', label)
        FROM ws, (VALUES
          ('sandbox-paid', 'sandbox', 'forwarded', 'crypto', 'onchain', NULL::timestamptz),
          ('sandbox-card', 'sandbox', 'forwarded', 'card', 'card', NULL),
          ('sandbox-pending', 'sandbox', 'pending', 'crypto', 'onchain', NULL),
          ('live-crypto', 'live', 'forwarded', 'crypto', 'onchain', '2026-01-02T03:05:00Z'),
          ('live-card', 'live', 'forwarded', 'card', 'card', NULL),
          ('live-card-expired', 'live', 'expired', 'card', 'card', NULL)
        ) AS v(label, env, status, method, provider, detected)
        RETURNING id, metadata->>'label' AS label`.execute(db);
      const id = new Map(rows.rows.map((r) => [r.label, r.id]));
      await sql`
        INSERT INTO card_events (event_id, environment, event_type, payment_id, outcome, received_at)
        VALUES ('evt_unpaid', 'live', 'checkout.session.completed', ${id.get("live-card")},
                'awaiting payment: payment_status is unpaid', '2026-01-02T03:06:00Z'),
               ('evt_paid', 'live', 'checkout.session.async_payment_succeeded', ${id.get("live-card")},
                'applied', '2026-01-03T10:00:00Z'),
               ('evt_expired', 'live', 'checkout.session.expired', ${id.get("live-card-expired")},
                'applied', '2026-01-02T04:00:00Z')`.execute(db);

      expect((await migratorUpTo(db, "044_paid_at_creation").migrateToLatest()).error).toBeUndefined();
      const after = await sql<{ label: string; confirmed_at: Date | null }>`
        SELECT metadata->>'label' AS label, confirmed_at FROM payments`.execute(db);
      expect(
        Object.fromEntries(after.rows.map((r) => [r.label, r.confirmed_at?.toISOString() ?? null])),
      ).toEqual({
        "sandbox-paid": "2026-01-02T03:04:05.000Z",
        "sandbox-card": "2026-01-02T03:04:05.000Z",
        "sandbox-pending": null,
        "live-crypto": null, // paid by a transfer: its detection is its time
        "live-card": "2026-01-03T10:00:00.000Z", // the event that paid it, not the unpaid completion
        "live-card-expired": null,
      });
    } finally {
      await close();
    }
  });
});
