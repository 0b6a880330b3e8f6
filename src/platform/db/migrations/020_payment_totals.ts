import { type Kysely, sql } from "kysely";

// Payment counts and volumes per (workspace, environment, UTC day of creation, token, status),
// kept by the database itself: a statement-level trigger appends the change of every statement
// that inserts, updates or deletes payments (+1 in the new status, −1 in the old), in the same
// transaction, so the totals can never disagree with the payments. Writers only ever INSERT
// delta rows: no row is shared between two payment writes, so the totals add no lock waits and
// no deadlocks to the payment paths. A periodic job folds the deltas into one compacted row per
// bucket (modules/payments/totals.ts, totals-repo.ts). The dashboard's chart and
// /api/v1/wallet/stats read these instead of aggregating every payment.
// Rolling out: the backfill below runs in the migration's transaction after the triggers exist,
// so writes to payments wait for it (one GROUP BY over every payment) and none escapes it.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE payment_totals (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      workspace_id uuid NOT NULL,
      environment text NOT NULL,
      day date NOT NULL,
      token_symbol text NOT NULL,
      status text NOT NULL,
      count bigint NOT NULL,
      volume numeric(78, 0) NOT NULL,
      compacted boolean NOT NULL DEFAULT false
    )`.execute(db);
  await sql`CREATE INDEX payment_totals_tenant ON payment_totals (workspace_id, environment, day)`.execute(
    db,
  );
  await sql`
    CREATE UNIQUE INDEX payment_totals_bucket ON payment_totals (workspace_id, environment, day, token_symbol, status)
    WHERE compacted`.execute(db);
  await sql`CREATE INDEX payment_totals_deltas ON payment_totals (id) WHERE NOT compacted`.execute(db);
  // Compacted buckets that came back to nothing (a day's pending payments all moved on), removed
  // by the compaction.
  await sql`CREATE INDEX payment_totals_empty ON payment_totals (id) WHERE compacted AND count = 0`.execute(
    db,
  );
  // Deltas are appended at the end and deleted soon after: vacuum must not truncate the table's
  // end under an exclusive lock that payment writes (through the trigger) would wait on.
  await sql`ALTER TABLE payment_totals SET (vacuum_truncate = false)`.execute(db);

  // One function for the three statements: each groups what it changed, old rows counted −1 and
  // new rows +1, only where a bucket or the amount changed (an update of other columns adds nothing).
  await sql`
    CREATE FUNCTION payment_totals_delta() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        INSERT INTO payment_totals (workspace_id, environment, day, token_symbol, status, count, volume)
        SELECT workspace_id, environment, (created_at AT TIME ZONE 'UTC')::date, token_symbol, status,
               count(*), sum(gross_amount)
        FROM new_rows GROUP BY 1, 2, 3, 4, 5;
      ELSIF TG_OP = 'TRUNCATE' THEN
        DELETE FROM payment_totals;
      ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO payment_totals (workspace_id, environment, day, token_symbol, status, count, volume)
        SELECT workspace_id, environment, (created_at AT TIME ZONE 'UTC')::date, token_symbol, status,
               -count(*), -sum(gross_amount)
        FROM old_rows GROUP BY 1, 2, 3, 4, 5;
      ELSE
        INSERT INTO payment_totals (workspace_id, environment, day, token_symbol, status, count, volume)
        SELECT workspace_id, environment, day, token_symbol, status, sum(sign), sum(sign * gross_amount)
        FROM (
          SELECT o.workspace_id, o.environment, (o.created_at AT TIME ZONE 'UTC')::date AS day,
                 o.token_symbol, o.status, o.gross_amount, -1 AS sign
          FROM old_rows o JOIN new_rows n ON n.id = o.id
          WHERE (o.status, o.token_symbol, o.gross_amount, o.created_at, o.workspace_id, o.environment)
                IS DISTINCT FROM (n.status, n.token_symbol, n.gross_amount, n.created_at, n.workspace_id, n.environment)
          UNION ALL
          SELECT n.workspace_id, n.environment, (n.created_at AT TIME ZONE 'UTC')::date,
                 n.token_symbol, n.status, n.gross_amount, 1
          FROM old_rows o JOIN new_rows n ON n.id = o.id
          WHERE (o.status, o.token_symbol, o.gross_amount, o.created_at, o.workspace_id, o.environment)
                IS DISTINCT FROM (n.status, n.token_symbol, n.gross_amount, n.created_at, n.workspace_id, n.environment)
        ) AS changes
        GROUP BY 1, 2, 3, 4, 5
        HAVING sum(sign) <> 0 OR sum(sign * gross_amount) <> 0;
      END IF;
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER payment_totals_insert AFTER INSERT ON payments
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION payment_totals_delta()`.execute(db);
  await sql`
    CREATE TRIGGER payment_totals_update AFTER UPDATE ON payments
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION payment_totals_delta()`.execute(
    db,
  );
  await sql`
    CREATE TRIGGER payment_totals_delete AFTER DELETE ON payments
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION payment_totals_delta()`.execute(db);
  await sql`
    CREATE TRIGGER payment_totals_truncate AFTER TRUNCATE ON payments
    FOR EACH STATEMENT EXECUTE FUNCTION payment_totals_delta()`.execute(db);

  // The payments already recorded, as compacted buckets.
  await sql`
    INSERT INTO payment_totals (workspace_id, environment, day, token_symbol, status, count, volume, compacted)
    SELECT workspace_id, environment, (created_at AT TIME ZONE 'UTC')::date, token_symbol, status,
           count(*), sum(gross_amount), true
    FROM payments GROUP BY 1, 2, 3, 4, 5`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TRIGGER payment_totals_truncate ON payments`.execute(db);
  await sql`DROP TRIGGER payment_totals_delete ON payments`.execute(db);
  await sql`DROP TRIGGER payment_totals_update ON payments`.execute(db);
  await sql`DROP TRIGGER payment_totals_insert ON payments`.execute(db);
  await sql`DROP FUNCTION payment_totals_delta()`.execute(db);
  await sql`DROP TABLE payment_totals`.execute(db);
}
