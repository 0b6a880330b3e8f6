import { expect } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { ConfigError } from "../../src/config-values.ts";

/** The message of the ConfigError `env` is refused with at start; fails if it is accepted. */
export function configRefusal(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error("the configuration was accepted");
}
