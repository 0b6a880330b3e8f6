import { type Kysely, sql } from "kysely";

// The payments' running totals (migration 020) per network too (D22): the wallet's stats total
// per network and token. A bucket is (workspace, environment, network, day, token, status); card
// payments, on no network, are the buckets of network null, which the unique index counts as one
// value (NULLS NOT DISTINCT) so that their compaction folds into one row as before.
//
// The trigger's function is replaced to carry the network (an update that moves a payment to
// another network, as a multi-network payment's detection will, moves its count). The totals are
// rebuilt from the payments in the migration's transaction, after the function is replaced, so
// writes to payments wait for it and none escapes it (as in 020).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE payment_totals ADD COLUMN network text`.execute(db);
  await sql`DROP INDEX payment_totals_bucket`.execute(db);
  await sql`
    CREATE UNIQUE INDEX payment_totals_bucket
      ON payment_totals (workspace_id, environment, network, day, token_symbol, status) NULLS NOT DISTINCT
      WHERE compacted`.execute(db);

  await sql`
    CREATE OR REPLACE FUNCTION payment_totals_delta() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        INSERT INTO payment_totals (workspace_id, environment, network, day, token_symbol, status, count, volume)
        SELECT workspace_id, environment, network, (created_at AT TIME ZONE 'UTC')::date, token_symbol, status,
               count(*), sum(gross_amount)
        FROM new_rows GROUP BY 1, 2, 3, 4, 5, 6;
      ELSIF TG_OP = 'TRUNCATE' THEN
        DELETE FROM payment_totals;
      ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO payment_totals (workspace_id, environment, network, day, token_symbol, status, count, volume)
        SELECT workspace_id, environment, network, (created_at AT TIME ZONE 'UTC')::date, token_symbol, status,
               -count(*), -sum(gross_amount)
        FROM old_rows GROUP BY 1, 2, 3, 4, 5, 6;
      ELSE
        INSERT INTO payment_totals (workspace_id, environment, network, day, token_symbol, status, count, volume)
        SELECT workspace_id, environment, network, day, token_symbol, status, sum(sign), sum(sign * gross_amount)
        FROM (
          SELECT o.workspace_id, o.environment, o.network, (o.created_at AT TIME ZONE 'UTC')::date AS day,
                 o.token_symbol, o.status, o.gross_amount, -1 AS sign
          FROM old_rows o JOIN new_rows n ON n.id = o.id
          WHERE (o.status, o.token_symbol, o.gross_amount, o.created_at, o.workspace_id, o.environment, o.network)
                IS DISTINCT FROM (n.status, n.token_symbol, n.gross_amount, n.created_at, n.workspace_id, n.environment, n.network)
          UNION ALL
          SELECT n.workspace_id, n.environment, n.network, (n.created_at AT TIME ZONE 'UTC')::date,
                 n.token_symbol, n.status, n.gross_amount, 1
          FROM old_rows o JOIN new_rows n ON n.id = o.id
          WHERE (o.status, o.token_symbol, o.gross_amount, o.created_at, o.workspace_id, o.environment, o.network)
                IS DISTINCT FROM (n.status, n.token_symbol, n.gross_amount, n.created_at, n.workspace_id, n.environment, n.network)
        ) AS changes
        GROUP BY 1, 2, 3, 4, 5, 6
        HAVING sum(sign) <> 0 OR sum(sign * gross_amount) <> 0;
      END IF;
      RETURN NULL;
    END $$`.execute(db);

  await sql`DELETE FROM payment_totals`.execute(db);
  await sql`
    INSERT INTO payment_totals (workspace_id, environment, network, day, token_symbol, status, count, volume, compacted)
    SELECT workspace_id, environment, network, (created_at AT TIME ZONE 'UTC')::date, token_symbol, status,
           count(*), sum(gross_amount), true
    FROM payments GROUP BY 1, 2, 3, 4, 5, 6`.execute(db);
}
