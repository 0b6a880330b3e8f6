import {
  DummyDriver,
  type Generated,
  type JSONColumnType,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type Selectable,
  sql,
} from "kysely";
import { describe, expect, expectTypeOf, it } from "vitest";
import { columnList, columnsOf } from "./columns.ts";

interface ThingsTable {
  id: Generated<string>;
  name: string;
  note: string | null;
  tags: JSONColumnType<string[], string, string>;
}

const db = new Kysely<{ things: ThingsTable }>({
  dialect: {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (kysely) => new PostgresIntrospector(kysely),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  },
});

const THING_COLUMNS = columnsOf<ThingsTable>({ id: true, name: true, note: true, tags: true });

describe("columnsOf", () => {
  it("lists the columns in the order written", () => {
    expect(THING_COLUMNS).toEqual(["id", "name", "note", "tags"]);
    expect(Object.isFrozen(THING_COLUMNS)).toBe(true);
  });

  it("selects and returns exactly the table's row type, naming each column", () => {
    const select = db.selectFrom("things").select(THING_COLUMNS).where("id", "=", "x");
    expect(select.compile().sql).toBe('select "id", "name", "note", "tags" from "things" where "id" = $1');
    expectTypeOf<Awaited<ReturnType<typeof select.executeTakeFirstOrThrow>>>().toEqualTypeOf<
      Selectable<ThingsTable>
    >();
    const update = db.updateTable("things").set({ name: "n" }).returning(THING_COLUMNS);
    expect(update.compile().sql).toBe(
      'update "things" set "name" = $1 returning "id", "name", "note", "tags"',
    );
    expectTypeOf<Awaited<ReturnType<typeof update.executeTakeFirstOrThrow>>>().toEqualTypeOf<
      Selectable<ThingsTable>
    >();
  });

  it("does not compile with a column left out or a name that is no column", () => {
    // @ts-expect-error: `tags` is a column of the table, missing from the list.
    columnsOf<ThingsTable>({ id: true, name: true, note: true });
    // @ts-expect-error: `colour` is no column of the table.
    columnsOf<ThingsTable>({ id: true, name: true, note: true, tags: true, colour: true });
  });
});

describe("columnList", () => {
  it("is the columns as a raw select list, qualified by an alias when given", () => {
    expect(sql`SELECT ${columnList(THING_COLUMNS)} FROM things`.compile(db).sql).toBe(
      'SELECT "id", "name", "note", "tags" FROM things',
    );
    expect(sql`RETURNING ${columnList(THING_COLUMNS, "t")}`.compile(db).sql).toBe(
      'RETURNING "t"."id", "t"."name", "t"."note", "t"."tags"',
    );
  });
});
