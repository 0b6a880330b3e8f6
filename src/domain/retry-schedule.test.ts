import { describe, expect, it } from "vitest";
import {
  MAX_ATTEMPTS,
  nextRetryDelay,
  parseRetryAfter,
  probeDelay,
  RETRY_DELAYS_MS,
} from "./retry-schedule.ts";

describe("retry schedule", () => {
  it("follows D7: 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 3 h, 6 h, 12 h, 24 h", () => {
    expect(RETRY_DELAYS_MS.map((ms) => ms / 1000)).toEqual([
      5, 30, 120, 600, 1800, 3600, 10800, 21600, 43200, 86400,
    ]);
    expect(MAX_ATTEMPTS).toBe(11);
    const total = RETRY_DELAYS_MS.reduce((a, b) => a + b, 0);
    expect(total / 3_600_000).toBeGreaterThan(46); // about two days
    expect(total / 3_600_000).toBeLessThan(50);
  });

  it("applies ±20% jitter around each step", () => {
    expect(nextRetryDelay(1, 0)).toBe(4000);
    expect(nextRetryDelay(1, 0.5)).toBe(5000);
    expect(nextRetryDelay(1, 0.999999)).toBe(6000);
    expect(nextRetryDelay(10, 0.5)).toBe(86_400_000);
  });

  it("gives up after the last step", () => {
    expect(nextRetryDelay(11, 0.5)).toBeNull();
    expect(() => nextRetryDelay(0, 0.5)).toThrow(RangeError);
  });

  it("honours a longer Retry-After, capped at the longest step, and ignores a shorter one", () => {
    expect(nextRetryDelay(1, 0.5, 60_000)).toBe(60_000);
    expect(nextRetryDelay(1, 0.5, 1000)).toBe(5000);
    expect(nextRetryDelay(1, 0.5, 10 * 86_400_000)).toBe(86_400_000);
  });

  it("follows another schedule when given one", () => {
    expect(nextRetryDelay(1, 0.5, null, [100, 200])).toBe(100);
    expect(nextRetryDelay(2, 0.5, null, [100, 200])).toBe(200);
    expect(nextRetryDelay(3, 0.5, null, [100, 200])).toBeNull();
  });

  it("probes a failing registration every 5 s, then every twentieth of how long it has failed", () => {
    expect(probeDelay(0)).toBe(5_000);
    expect(probeDelay(60_000)).toBe(5_000);
    expect(probeDelay(100_000)).toBe(5_000);
    expect(probeDelay(3_600_000)).toBe(180_000);
    expect(probeDelay(60_000, 1_000)).toBe(3_000);
    // Over a delivery's two days of retries, with nothing else sent: about 150 probes.
    let probes = 0;
    for (let at = 0; at < 2 * 24 * 3_600_000; at += probeDelay(at)) probes++;
    expect(probes).toBeGreaterThan(100);
    expect(probes).toBeLessThan(200);
  });

  it("parses Retry-After seconds and dates", () => {
    const now = new Date("2026-01-01T00:00:00Z");
    expect(parseRetryAfter("120", now)).toBe(120_000);
    expect(parseRetryAfter("Thu, 01 Jan 2026 00:01:00 GMT", now)).toBe(60_000);
    expect(parseRetryAfter("Wed, 31 Dec 2025 00:00:00 GMT", now)).toBe(0);
    expect(parseRetryAfter("soon", now)).toBeNull();
    expect(parseRetryAfter(undefined, now)).toBeNull();
  });
});
