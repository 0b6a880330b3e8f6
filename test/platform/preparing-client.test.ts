import { randomBytes } from "node:crypto";
import { sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../../src/platform/db/database.ts";
import { MAX_PREPARED_PER_CONNECTION, PreparingClient } from "../../src/platform/db/preparing-client.ts";

// The PostgreSQL client that prepares repeated statements (src/platform/db/preparing-client.ts),
// against the real server of DATABASE_URL: what the server holds prepared, the bound per
// connection, and a table changed under a prepared SELECT *.

const url = process.env.DATABASE_URL;

describe.skipIf(!url)("PreparingClient on PostgreSQL", () => {
  let client: PreparingClient;
  let other: pg.Client;
  const table = `prep_${randomBytes(4).toString("hex")}`;

  beforeAll(async () => {
    client = new PreparingClient({ connectionString: url });
    other = new pg.Client({ connectionString: url });
    await Promise.all([client.connect(), other.connect()]);
    await other.query(`CREATE TABLE ${table} (id int PRIMARY KEY, label text)`);
    await other.query(`INSERT INTO ${table} VALUES (1, 'one'), (2, 'two')`);
  });

  afterAll(async () => {
    await other?.query(`DROP TABLE IF EXISTS ${table}`);
    await client?.end();
    await other?.end();
  });

  const prepared = async () =>
    (await client.query("SELECT statement FROM pg_prepared_statements")).rows.map(
      (r: { statement: string }) => r.statement,
    );

  it("prepares a statement from its second use, and answers the same rows as unnamed", async () => {
    const text = `SELECT label FROM ${table} WHERE id = $1`;
    const first = await client.query(text, [1]);
    expect(await prepared()).not.toContain(text);
    const second = await client.query(text, [2]);
    const third = await client.query(text, [1]);
    expect(await prepared()).toContain(text);
    expect(first.rows).toEqual([{ label: "one" }]);
    expect(second.rows).toEqual([{ label: "two" }]);
    expect(third.rows).toEqual(first.rows);
  });

  it("reports errors of a prepared statement like any other (a bad parameter is a 22P02)", async () => {
    const text = `SELECT label FROM ${table} WHERE id = $1::int`;
    await client.query(text, [1]);
    await client.query(text, [1]);
    await expect(client.query(text, ["not a number"])).rejects.toMatchObject({ code: "22P02" });
    expect((await client.query(text, [2])).rows).toEqual([{ label: "two" }]);
  });

  it(`holds at most ${MAX_PREPARED_PER_CONNECTION} per connection; later texts still run, unnamed`, async () => {
    const fresh = new PreparingClient({ connectionString: url });
    await fresh.connect();
    try {
      const count = MAX_PREPARED_PER_CONNECTION + 20;
      for (let i = 0; i < count; i++) {
        const text = `SELECT $1::int + ${i} AS n /* ${table} */`;
        await fresh.query(text, [1]);
        const again = await fresh.query(text, [1]);
        expect(again.rows).toEqual([{ n: 1 + i }]);
      }
      const held = await fresh.query(
        "SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement LIKE $1",
        [`%${table}%`],
      );
      expect(held.rows[0].n).toBe(MAX_PREPARED_PER_CONNECTION);
    } finally {
      await fresh.end();
    }
  });

  it("prepares again when another session changes the table under a prepared SELECT *", async () => {
    const text = `SELECT * FROM ${table} WHERE id = $1`;
    await client.query(text, [1]);
    await client.query(text, [1]);
    await other.query(`ALTER TABLE ${table} ADD COLUMN note text DEFAULT 'added'`);
    const after = await client.query(text, [1]);
    expect(after.rows).toEqual([{ id: 1, label: "one", note: "added" }]);
  });

  it("inside a transaction the stale plan is the caller's error, and the next use recovers", async () => {
    const text = `SELECT * FROM ${table} WHERE id = $1 /* in a transaction */`;
    await client.query(text, [2]);
    await client.query(text, [2]);
    await other.query(`ALTER TABLE ${table} ADD COLUMN extra int DEFAULT 7`);
    await client.query("BEGIN");
    await expect(client.query(text, [2])).rejects.toMatchObject({ code: "0A000" });
    await client.query("ROLLBACK");
    const after = await client.query(text, [2]);
    expect(after.rows).toEqual([{ id: 2, label: "two", note: "added", extra: 7 }]);
  });

  it.each([
    [undefined, 1],
    [false, 0],
  ])(
    "openDatabase with preparedStatements %s: the pool's connection holds %i prepared",
    async (preparedStatements, count) => {
      const database = await openDatabase({ databaseUrl: url, poolSize: 1, preparedStatements });
      try {
        const marker = `pool_${String(preparedStatements)}_${table}`;
        for (let i = 0; i < 3; i++)
          await sql`SELECT ${i}::int AS n, ${marker}::text AS m`.execute(database.db);
        const held = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement LIKE '%::int AS n, $2::text AS m'`.execute(
          database.db,
        );
        expect(held.rows[0]?.n).toBe(count);
      } finally {
        await database.close();
      }
    },
  );
});
