import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { configDefaults, defineConfig } from "vitest/config";

// Each suite runs once where the database's dialect does not matter (npm test, on the embedded
// PGlite); the PostgreSQL pass (npm run test:pg, DATABASE_URL set) runs every other suite again.
// Left out of that pass: the browser suites (what a page shows) and the kill -9 suites (one
// process at a time on one database, recovering from what it committed: the same SQL on either).
// What only a server shows (several instances, a leader killed or paused, pool and lock order)
// lives in files of its own that run on PostgreSQL (two-instances, money-once, …). The SDK's suites
// are a client of the HTTP API: the database behind it changes nothing they check. Nor do the
// dashboard's suites (its forms call the same services whose own suites run on PostgreSQL) or the
// HTTP layer's body limits (refused before any statement).
const EMBEDDED_ONLY = [
  "test/**/*.browser.test.ts",
  "test/**/crash*.test.ts",
  "test/sdk/**",
  "test/dashboard/**",
  "test/http/over-limit-bodies.test.ts",
];

// The other way round: suites whose subject is the server's concurrency (several instances,
// session locks, leases) run in the PostgreSQL pass only. On the embedded database the same file
// took three times as long (76 s against 23 s) to show less: one connection serialises it all.
const POSTGRES_ONLY = ["test/system/money-once.test.ts"];

// Test files run two at a time even on two cores (Vitest's default there is one): most of a
// suite's time is spent waiting on a devnet, a child process or the database, not on the CPU.
// Measured in a whole CI run on a 2-core machine: npm test 1,456 s instead of 2,142–2,206 s, the
// PostgreSQL pass 547 s instead of 818–916 s. Each file starts its own apps, databases (one per app on
// PostgreSQL: freshDatabaseUrl) and devnets, on ports of their own, so no file depends on running
// alone.
const MAX_WORKERS = Math.max(2, availableParallelism() - 1);

export default defineConfig({
  // The SDK's examples import it by its package name, as an integrator does: its sources here.
  resolve: {
    alias: { "@payments-service/sdk": fileURLToPath(new URL("./sdk/src/index.ts", import.meta.url)) },
  },
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    exclude: process.env.DATABASE_URL
      ? [...configDefaults.exclude, ...EMBEDDED_ONLY]
      : [...configDefaults.exclude, ...POSTGRES_ONLY],
    maxWorkers: MAX_WORKERS,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
