import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Environment } from "../../src/config.ts";
import { BACKLOG_PER_SECOND, DISABLE_AFTER_MS, PROBE_INTERVAL_MS } from "../../src/domain/retry-schedule.ts";
import * as claims from "../../src/modules/webhooks/delivery-claims-repo.ts";
import * as repo from "../../src/modules/webhooks/repo.ts";
import type { Resolver } from "../../src/platform/http/outbound-guard.ts";
import { bearer } from "../support/app.ts";
import { installLoopbackOnly, type LoopbackOnly } from "../support/loopback-only.ts";
import { elapse } from "../support/poll.ts";
import type { ReceivedRequest } from "../support/receiver.ts";
import {
  claimTime,
  DAY,
  deliveryId,
  forwardedEvents,
  harness,
  type Json,
  until,
} from "../support/webhook-delivery.ts";

// Webhook delivery: recording attempts, resending, deactivation, which addresses deliveries reach,
// and environments; signatures, retries and leases: delivery.test.ts; harness: support/webhook-delivery.ts.

/** The service's defaults. */
const HEALTH: repo.HealthSettings = {
  disableAfterMs: DISABLE_AFTER_MS,
  backlogPerSecond: BACKLOG_PER_SECOND,
  probeMs: PROBE_INTERVAL_MS,
};

describe("webhook delivery", () => {
  const h = harness();

  describe("recording attempts in batches", () => {
    async function claimAll(endpointId: number, leaseMs = 60_000): Promise<claims.ClaimedDelivery[]> {
      const now = claimTime();
      const claimed = await claims.claimDueDeliveries(
        h.t.database.db,
        now,
        new Date(now.getTime() + leaseMs),
        100,
      );
      return claimed.filter((c) => c.endpointId === endpointId).sort((a, b) => a.id.localeCompare(b.id));
    }

    function attempt(
      delivery: claims.ClaimedDelivery,
      at: Date,
      result: Partial<repo.AttemptRecord> = {},
    ): repo.AttemptRecord {
      return {
        deliveryId: delivery.id,
        endpointId: delivery.endpointId,
        lease: delivery.lease,
        at,
        delivered: true,
        responseCode: 200,
        error: null,
        nextAttemptAt: null,
        ...result,
      };
    }

    async function endpointRow(id: number) {
      return h.t.database.db
        .selectFrom("webhook_endpoints")
        .select(["failing_since", "active", "disabled_reason", "next_probe_at"])
        .where("id", "=", id)
        .executeTakeFirstOrThrow();
    }

    it("records each outcome of a batch only under the lease it was claimed with", async () => {
      const ws = await h.workspace();
      const hook = await h.register(ws.testKey, "http://127.0.0.1:9/hook", ["payment.forwarded"]);
      await h.record(forwardedEvents(ws.id, 3));
      const [a, b, c] = (await claimAll(hook.id)) as [
        claims.ClaimedDelivery,
        claims.ClaimedDelivery,
        claims.ClaimedDelivery,
      ];
      const at = new Date();
      const failedAt = new Date(at.getTime() + 1);
      const retryAt = new Date(at.getTime() + 5_000);

      const recorded = await repo.recordAttempts(
        h.t.database.db,
        [
          attempt(a, at),
          // Its error text holds a NUL, which PostgreSQL text cannot: dropped, not failing the batch.
          attempt(b, failedAt, {
            delivered: false,
            responseCode: 500,
            error: "HTTP\u0000 500",
            nextAttemptAt: retryAt,
          }),
          // A lease this dispatcher does not hold (another one's, or a lapsed one): not recorded.
          attempt(c, at, { lease: new Date(c.lease.getTime() - 1) }),
        ],
        HEALTH,
      );
      expect(recorded).toEqual(new Set([a.id, b.id]));

      const log = new Map((await h.deliveries(ws.testKey, hook.id)).map((d) => [d.id, d]));
      expect(log.get(a.id)).toMatchObject({
        status: "delivered",
        attempts: 1,
        lastResponseCode: 200,
        deliveredAt: at.toISOString(),
      });
      expect(log.get(b.id)).toMatchObject({
        status: "pending",
        attempts: 1,
        lastResponseCode: 500,
        lastError: "HTTP 500",
        nextAttemptAt: retryAt.toISOString(),
      });
      expect(log.get(c.id)).toMatchObject({ status: "pending", attempts: 0, lastResponseCode: null });
      // The failure ended after the success: the registration has been failing since then, and
      // is first probed PROBE_INTERVAL_MS after it.
      expect(await endpointRow(hook.id)).toEqual({
        failing_since: failedAt,
        active: true,
        disabled_reason: null,
        next_probe_at: new Date(failedAt.getTime() + PROBE_INTERVAL_MS),
      });

      // The claimer that holds c's lease still records it.
      expect(await repo.recordAttempts(h.t.database.db, [attempt(c, at)], HEALTH)).toEqual(new Set([c.id]));
      expect(await endpointRow(hook.id)).toMatchObject({
        failing_since: null,
        active: true,
        next_probe_at: null,
      });
    });

    it("records nothing of a batch that cannot be written; its deliveries are due again once the lease runs out", async () => {
      const ws = await h.workspace();
      const hook = await h.register(ws.testKey, "http://127.0.0.1:9/hook", ["payment.forwarded"]);
      await h.record(forwardedEvents(ws.id, 2));
      const [a, b] = (await claimAll(hook.id, 1_000)) as [claims.ClaimedDelivery, claims.ClaimedDelivery];
      const at = new Date();

      await expect(
        repo.recordAttempts(
          h.t.database.db,
          [attempt(a, at), attempt(b, at), attempt({ ...a, id: "not-a-uuid" }, at)],
          HEALTH,
        ),
      ).rejects.toThrow();
      const log = await h.deliveries(ws.testKey, hook.id);
      expect(log.map((d) => [d.status, d.attempts])).toEqual([
        ["pending", 0],
        ["pending", 0],
      ]);

      expect(await claimAll(hook.id)).toHaveLength(0);
      // The lease is a point in time: what is awaited is that time passing (no event to poll for).
      await elapse(a.lease.getTime() - Date.now() + 50);
      expect((await claimAll(hook.id)).map((d) => d.id)).toEqual([a.id, b.id]);
    });

    it("deactivates a registration failing for too long and stops what it still has queued", async () => {
      const ws = await h.workspace();
      const hook = await h.register(ws.testKey, "http://127.0.0.1:9/hook", ["payment.forwarded"]);
      await h.t.database.db
        .updateTable("webhook_endpoints")
        .set({ failing_since: new Date(Date.now() - 6 * DAY) })
        .where("id", "=", hook.id)
        .execute();
      await h.record(forwardedEvents(ws.id, 2));
      const [a] = (await claimAll(hook.id)) as [claims.ClaimedDelivery];
      const at = new Date();

      await repo.recordAttempts(
        h.t.database.db,
        [attempt(a, at, { delivered: false, responseCode: 500, error: "HTTP 500", nextAttemptAt: at })],
        HEALTH,
      );
      expect(await endpointRow(hook.id)).toMatchObject({
        active: false,
        disabled_reason: "failing continuously for 5 days",
        next_probe_at: null,
      });
      const log = await h.deliveries(ws.testKey, hook.id);
      expect(log.map((d) => [d.status, d.lastError])).toEqual([
        ["failed", "registration deactivated"],
        ["failed", "registration deactivated"],
      ]);
    });
  });

  it("resends a delivered delivery on request, with the same delivery id", async () => {
    const receiver = await h.receiver();
    const ws = await h.workspace();
    const other = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url, ["payment.forwarded"]);
    h.dispatcher().start();

    await h.createPayment(ws.testKey);
    const [first] = (await receiver.waitFor(1)) as [ReceivedRequest];
    const [delivered] = await until("delivered", async () => {
      const log = await h.deliveries(ws.testKey, hook.id);
      return log[0]?.status === "delivered" && log;
    });
    expect(delivered?.id).toBe(deliveryId(first));

    // Not found for another workspace, an unknown delivery, or a malformed id.
    const url = (wh: number | string, d: string) => `/api/v1/webhooks/${wh}/deliveries/${d}/retry`;
    for (const [key, path] of [
      [other.testKey, url(hook.id, deliveryId(first))],
      [ws.liveKey, url(hook.id, deliveryId(first))],
      [ws.testKey, url(hook.id, "00000000-0000-4000-8000-000000000000")],
      [ws.testKey, url(hook.id, "not-a-uuid")],
    ] as const) {
      const res = await h.t.request({ method: "POST", url: path, headers: bearer(key) });
      expect(res.statusCode, path).toBe(404);
    }
    expect(receiver.received).toHaveLength(1);

    const res = await h.t.request({
      method: "POST",
      url: url(hook.id, deliveryId(first)),
      headers: bearer(ws.testKey),
    });
    expect(res.statusCode).toBe(202);
    expect(res.json().delivery.id).toBe(deliveryId(first));

    const [, again] = (await receiver.waitFor(2)) as [ReceivedRequest, ReceivedRequest];
    expect(deliveryId(again)).toBe(deliveryId(first));
    expect(again.rawBody).toBe(first.rawBody);
    const [after] = await until("delivered again", async () => {
      const log = await h.deliveries(ws.testKey, hook.id);
      return log[0]?.status === "delivered" && log[0]?.attempts === 2 && log;
    });
    expect(after).toMatchObject({ id: deliveryId(first), lastResponseCode: 200 });
  });

  it("deactivates a registration that has been failing for more than 5 days", async () => {
    const receiver = await h.receiver();
    receiver.respond = () => ({ status: 500 });
    const ws = await h.workspace();
    const old = await h.register(ws.testKey, receiver.url, ["payment.forwarded"]);
    const recent = await h.register(ws.testKey, receiver.url, ["payment.forwarded"]);
    const now = Date.now();
    await h.t.database.db
      .updateTable("webhook_endpoints")
      .set({ failing_since: new Date(now - 6 * DAY) })
      .where("id", "=", old.id)
      .execute();
    await h.t.database.db
      .updateTable("webhook_endpoints")
      .set({ failing_since: new Date(now - 4 * DAY) })
      .where("id", "=", recent.id)
      .execute();
    h.dispatcher({ retryDelaysMs: [60_000] }).start();

    await h.createPayment(ws.testKey);
    await receiver.waitFor(2);
    await until("both attempts recorded", async () => {
      const a = await h.deliveries(ws.testKey, old.id);
      const b = await h.deliveries(ws.testKey, recent.id);
      return a[0]?.attempts === 1 && b[0]?.attempts === 1;
    });

    const listed = await h.webhooks(ws.testKey);
    expect(listed.find((w) => w.id === old.id)?.active).toBe(false);
    expect(listed.find((w) => w.id === recent.id)?.active).toBe(true);
  });

  it("sends nothing more to a deactivated registration", async () => {
    const receiver = await h.receiver();
    receiver.respond = () => ({ status: 500 });
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url, ["payment.forwarded"]);
    await h.t.database.db
      .updateTable("webhook_endpoints")
      .set({ failing_since: new Date(Date.now() - 6 * DAY) })
      .where("id", "=", hook.id)
      .execute();
    h.dispatcher({ retryDelaysMs: [200, 200, 200, 200, 200] }).start();

    await h.createPayment(ws.testKey);
    await receiver.waitFor(1);
    await until("deactivated", async () => {
      const listed = await h.webhooks(ws.testKey);
      return listed.find((w) => w.id === hook.id)?.active === false;
    });
    // "active: whether delivery is on": neither the queued retries nor new events go out.
    await h.createPayment(ws.testKey);
    // A fixed wait on purpose: time for the queued retries (200 ms apart) to go out, were they going to.
    await elapse(1_500);
    const queued = await h.deliveries(ws.testKey, hook.id);
    expect(queued, "a new event was queued for a deactivated registration").toHaveLength(1);
    expect(
      receiver.received.map(deliveryId),
      "retries were still sent to a deactivated registration",
    ).toHaveLength(1);
  });
});

describe("deliveries reach public addresses only, in both environments (D7, D21; checked when the name resolves)", () => {
  // WEBHOOK_ALLOW_PRIVATE unset, as an operator runs the service. The dispatcher is handed a
  // resolver that maps made-up names to loopback, private and link-local addresses. The safety net
  // makes sure nothing of it leaves the machine whatever the code does: a connection anywhere but
  // loopback, or a name sent to a DNS server, fails and is recorded.
  const h = harness({ WEBHOOK_ALLOW_PRIVATE: "false" });
  let outside: LoopbackOnly;
  beforeAll(() => {
    outside = installLoopbackOnly();
  });
  afterAll(() => outside.uninstall());

  const ANSWERS: Record<string, string[]> = {
    "receiver.test": ["127.0.0.1"],
    "metadata.test": ["169.254.169.254"],
    "intranet.test": ["10.0.0.5"],
    "mapped.test": ["::ffff:10.0.0.5"],
    "compat.test": ["::a9fe:a9fe"],
    "ula.test": ["fd00::5"],
    "mixed.test": ["127.0.0.1", "10.0.0.5"],
  };

  function testResolver(): Resolver & { asked: string[] } {
    const asked: string[] = [];
    const resolve = async (hostname: string) => {
      asked.push(hostname);
      const found = ANSWERS[hostname];
      if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
      return found.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
    };
    return Object.assign(resolve, { asked });
  }

  /**
   * Points a registration of `environment` at `url` (written directly, as a row from before the
   * rule would be) and sends it one event; answers its delivery after the first attempt.
   */
  async function deliverTo(environment: Environment, url: string, resolve: Resolver): Promise<Json> {
    const ws = await h.workspace();
    const key = environment === "live" ? ws.liveKey : ws.testKey;
    const hook = await h.register(key, "https://example.com/placeholder", ["*"]);
    await h.t.database.db.updateTable("webhook_endpoints").set({ url }).where("id", "=", hook.id).execute();
    h.dispatcher({ retryDelaysMs: [60_000], resolve }).start();
    await h.record([{ workspaceId: ws.id, environment, type: "payment.forwarded", payload: { id: "p" } }]);
    const [delivery] = await until(`an attempt to ${url}`, async () => {
      const log = await h.deliveries(key, hook.id);
      return (log[0]?.attempts as number) >= 1 && log;
    });
    return delivery as Json;
  }

  const NAMES = [
    ["receiver.test", "127.0.0.1"],
    ["metadata.test", "169.254.169.254"],
    ["intranet.test", "10.0.0.5"],
    ["mapped.test", "10.0.0.5"],
    ["compat.test", "::a9fe:a9fe"],
    ["ula.test", "fd00::5"],
    ["mixed.test", "10.0.0.5"],
  ] as const;

  it.each(
    (["sandbox", "live"] as const).flatMap((environment) =>
      NAMES.map(([name, address]) => [environment, name, address] as const),
    ),
  )(
    "%s: refuses %s (→ %s) after resolving it and before connecting, naming no address",
    async (environment, name, address) => {
      const receiver = await h.receiver();
      const port = new URL(receiver.url).port;
      const resolve = testResolver();
      const delivery = await deliverTo(environment, `http://${name}:${port}/latest/meta-data`, resolve);
      expect(delivery.status).not.toBe("delivered");
      expect(delivery.lastResponseCode).toBeNull();
      expect(delivery.lastError).toBe("blocked destination");
      expect(JSON.stringify(delivery)).not.toContain(address);
      expect(resolve.asked).toContain(name);
      expect(outside.refused, "a connection was attempted").toEqual([]);
      expect(receiver.received).toHaveLength(0);
    },
  );

  it.each(
    (["sandbox", "live"] as const).flatMap((environment) =>
      [
        "http://127.0.0.1:{port}/hook",
        "https://127.0.0.1:{port}/hook",
        "http://localhost:{port}/hook",
        "http://[::ffff:127.0.0.1]:{port}/hook",
        "http://10.0.0.5:{port}/hook",
        "http://169.254.169.254:{port}/latest/meta-data",
        "http://[::a9fe:a9fe]:{port}/hook",
        "http://[fd00::1]:{port}/hook",
        "http://100.64.0.1:{port}/hook",
      ].map((template) => [environment, template] as const),
    ),
  )("%s: refuses the literal %s without connecting", async (environment, template) => {
    const receiver = await h.receiver();
    const url = template.replace("{port}", new URL(receiver.url).port);
    const resolve = testResolver();
    const delivery = await deliverTo(environment, url, resolve);
    expect(delivery.status).not.toBe("delivered");
    expect(delivery.lastResponseCode).toBeNull();
    expect(delivery.lastError).toBe("blocked destination");
    expect(resolve.asked).toEqual([]);
    expect(outside.refused, "a connection was attempted").toEqual([]);
    expect(receiver.received).toHaveLength(0);
  });
});

describe("WEBHOOK_ALLOW_PRIVATE=true lets deliveries reach loopback (the suites' receivers, a local devnet)", () => {
  const h = harness({ WEBHOOK_ALLOW_PRIVATE: "true" });
  let outside: LoopbackOnly;
  beforeAll(() => {
    outside = installLoopbackOnly();
  });
  afterAll(() => outside.uninstall());

  it("delivers to a name that the injected resolver maps to loopback, in both environments", async () => {
    const receiver = await h.receiver();
    const port = new URL(receiver.url).port;
    const asked: string[] = [];
    const resolve: Resolver = async (hostname) => {
      asked.push(hostname);
      return [{ address: "127.0.0.1", family: 4 }];
    };
    const ws = await h.workspace();
    const hooks = [
      await h.register(ws.testKey, `http://receiver.test:${port}/hook`, ["payment.forwarded"]),
      await h.register(ws.liveKey, `http://receiver.test:${port}/hook`, ["payment.forwarded"]),
    ];
    h.dispatcher({ resolve }).start();
    await h.record(
      (["sandbox", "live"] as const).map((environment) => ({
        workspaceId: ws.id,
        environment,
        type: "payment.forwarded",
        payload: { id: environment },
      })),
    );
    await receiver.waitFor(2);
    for (const [key, hook] of [
      [ws.testKey, hooks[0]],
      [ws.liveKey, hooks[1]],
    ] as const) {
      const [delivery] = await until("delivered", async () => {
        const log = await h.deliveries(key, hook?.id as number);
        return log[0]?.status === "delivered" && log;
      });
      expect(delivery?.status).toBe("delivered");
    }
    expect(asked).toContain("receiver.test");
    expect(outside.refused).toEqual([]);
  });
});

describe("webhook delivery per environment and workspace", () => {
  // Plain-http loopback receivers in live need the development escape hatch.
  const h = harness({ WEBHOOK_ALLOW_PRIVATE: "true" });

  it("never sends live events to a sandbox registration, nor sandbox events to a live one", async () => {
    const sandboxReceiver = await h.receiver();
    const liveReceiver = await h.receiver();
    const otherReceiver = await h.receiver();
    const ws = await h.workspace();
    const other = await h.workspace();
    const sandboxHook = await h.register(ws.testKey, sandboxReceiver.url, ["*"]);
    const liveHook = await h.register(ws.liveKey, liveReceiver.url, ["*"]);
    await h.register(other.testKey, otherReceiver.url, ["*"]);
    await h.register(other.liveKey, otherReceiver.url, ["*"]);
    const dispatcher = h.dispatcher();
    dispatcher.start();

    const payment = await h.createPayment(ws.testKey);
    await h.record([
      {
        workspaceId: ws.id,
        environment: "live",
        type: "payment.forwarded",
        payload: { id: "live-only-payment", environment: "live", status: "forwarded" },
      },
    ]);

    await sandboxReceiver.waitFor(2);
    await liveReceiver.waitFor(1);
    // A fixed wait on purpose: time for an event to reach the other environment's receiver, were it going to.
    await elapse(400);
    await dispatcher.drain();

    expect(sandboxReceiver.received).toHaveLength(2);
    for (const r of sandboxReceiver.received) {
      expect((r.json.data as Json).id).toBe(payment.id);
      expect((r.json.data as Json).environment).toBe("sandbox");
    }
    expect(liveReceiver.received).toHaveLength(1);
    expect(liveReceiver.received[0]?.json).toEqual({
      event: "payment.forwarded",
      data: { id: "live-only-payment", environment: "live", status: "forwarded" },
    });
    // Another workspace's registrations get neither.
    expect(otherReceiver.received).toHaveLength(0);

    // Each delivery log shows only its own environment's deliveries, and only to its own key.
    expect((await h.deliveries(ws.testKey, sandboxHook.id)).map((d) => d.event).sort()).toEqual([
      "payment.created",
      "payment.forwarded",
    ]);
    expect((await h.deliveries(ws.liveKey, liveHook.id)).map((d) => d.event)).toEqual(["payment.forwarded"]);
    for (const [key, id] of [
      [ws.liveKey, sandboxHook.id],
      [ws.testKey, liveHook.id],
      [other.testKey, sandboxHook.id],
    ] as const) {
      const res = await h.t.request({
        method: "GET",
        url: `/api/v1/webhooks/${id}/deliveries`,
        headers: bearer(key),
      });
      expect(res.statusCode).toBe(404);
    }
  });
});
