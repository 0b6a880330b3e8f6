import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { configRefusal } from "../test/support/config.ts";
import { loadConfig } from "./config.ts";

// NETWORKS_FILE (networks-file.ts): the environments' networks as one JSON or YAML file, checked
// by the same rules as the variables, its errors told in the file's terms.

const dir = mkdtempSync(join(tmpdir(), "networks-file-"));
let n = 0;
/** NETWORKS_FILE pointing at a new file holding `text`. */
function fileOf(text: string): { NETWORKS_FILE: string } {
  const path = join(dir, `networks-${n++}.yaml`);
  writeFileSync(path, text);
  return { NETWORKS_FILE: path };
}

const A1 = `0x${"1".repeat(40)}`;
const A2 = `0x${"2".repeat(40)}`;
const A3 = `0x${"3".repeat(40)}`;

const YAML = `
live:
  - id: base
    name: Base
    rpcUrl: https://rpc.example.com/base
    chainId: 8453
    confirmations: 3
    tokens: { USDC: "${A1}", ADAO: "${A2}" }
    treasuryAddress: "${A3}"
    swap:
      routerAddress: "${A1}"
      quoterAddress: "${A2}"
      factoryAddress: "${A3}"
      wethAddress: "${A1}"
      feeTiers: [500, 3000]
  - id: polygon
    rpcUrl: https://rpc.example.com/polygon
    chainId: 137
    tokens: { USDC: "${A2}", ADAO: "${A1}", DAI: "${A3}" }
    treasuryAddress: "${A3}"
    bundler:
      url: https://bundler.example.com/polygon
      paymasterAddress: "${A1}"
`;

const refusal = configRefusal;

describe("NETWORKS_FILE", () => {
  it("reads each environment's networks from YAML, the first the default, as the variables would", () => {
    const config = loadConfig(fileOf(YAML));
    const [base, polygon] = config.networks.live;
    expect(config.networks.live.map((network) => network.id)).toEqual(["base", "polygon"]);
    expect(base).toMatchObject({
      environment: "live",
      name: "Base",
      caip2: "eip155:8453",
      chainId: 8453,
      confirmations: 3,
      tokens: { USDC: A1, ADAO: A2, DAI: undefined },
      treasuryAddress: A3,
      accountAbstraction: undefined,
      swap: { routerAddress: A1, wethAddress: A1, feeTiers: [500, 3000] },
    });
    expect(polygon).toMatchObject({
      name: "Chain 137",
      confirmations: 2,
      tokens: { DAI: A3 },
      accountAbstraction: {
        bundlerUrl: "https://bundler.example.com/polygon",
        paymaster: { kind: "address", address: A1 },
      },
      swap: undefined,
    });
    expect(config.networks.sandbox).toEqual([]);
  });

  it("reads JSON, and keeps a secret the variables give (a gas funder key, a keyed RPC URL) beside the file", () => {
    const key = `0x${"a".repeat(64)}`;
    const json = JSON.stringify({
      sandbox: [
        {
          id: "default",
          chainId: 84532,
          tokens: { USDC: A1, ADAO: A2 },
          treasuryAddress: A3,
        },
      ],
    });
    const config = loadConfig({
      ...fileOf(json),
      SANDBOX_RPC_URL: "https://rpc.example.com/sepolia?key=secret",
      SANDBOX_GAS_FUNDER_KEY: key,
    });
    expect(config.networks.sandbox).toMatchObject([
      {
        id: "default",
        chainId: 84532,
        rpcUrl: "https://rpc.example.com/sepolia?key=secret",
        gasFunderKey: key,
      },
    ]);
  });

  it("reads a paymaster service's URL and context object from the bundler group", () => {
    const service = YAML.replace(
      `paymasterAddress: "${A1}"`,
      "paymasterUrl: https://paymaster.example.com/polygon\n      paymasterContext: { sponsorshipPolicyId: sp_1 }",
    );
    expect(loadConfig(fileOf(service)).networks.live[1]?.accountAbstraction?.paymaster).toEqual({
      kind: "service",
      url: "https://paymaster.example.com/polygon",
      context: { sponsorshipPolicyId: "sp_1" },
    });
    // A keyed URL may come from its variable instead; beside the file's bare address, it is one too many.
    expect(refusal({ ...fileOf(YAML), LIVE_POLYGON_PAYMASTER_URL: "https://paymaster.example.com/k" })).toBe(
      "LIVE_POLYGON_PAYMASTER_URL and NETWORKS_FILE live[1] (polygon).bundler.paymasterAddress are both set: a network has one paymaster, a service or a bare address",
    );
  });

  it("names the field of the file that is wrong", () => {
    const bad = YAML.replace(`USDC: "${A2}"`, `USDC: "0x12"`);
    expect(refusal(fileOf(bad))).toBe(
      "NETWORKS_FILE live[1] (polygon).tokens.USDC must be 0x followed by 40 hex characters",
    );
    expect(refusal(fileOf(YAML.replace("chainId: 137", "chainId: 8453")))).toBe(
      "NETWORKS_FILE live[0] (base).chainId and NETWORKS_FILE live[1] (polygon).chainId name the same chain (8453): the networks of live must be different chains",
    );
    expect(refusal(fileOf(YAML.replace("    chainId: 137\n", "")))).toBe(
      "NETWORKS_FILE live[1] (polygon).chainId is required when NETWORKS_FILE live[1] (polygon).rpcUrl is set",
    );
    expect(refusal(fileOf(YAML.replace("confirmations: 3", "confirmations: many")))).toBe(
      'NETWORKS_FILE live[0] (base).confirmations must be a whole number, got "many"',
    );
    expect(refusal(fileOf(YAML.replace("    name: Base\n", "    colour: blue\n")))).toMatch(
      /^live\[0\] \(base\)\.colour is not a network field \(fields: id, name, rpcUrl/,
    );
    expect(refusal(fileOf(YAML.replace("tokens: { USDC", "tokens: { USDT: x, USDC")))).toMatch(
      /^live\[0\] \(base\)\.tokens\.USDT is not a network field/,
    );
  });

  it("refuses a file that is not one, or not of networks, and a list given both ways", () => {
    expect(refusal({ NETWORKS_FILE: join(dir, "missing.yaml") })).toMatch(/^NETWORKS_FILE cannot be read: /);
    expect(refusal(fileOf("live: [ {id: base"))).toMatch(/^NETWORKS_FILE is not JSON or YAML: /);
    expect(refusal(fileOf("- base"))).toBe(
      "NETWORKS_FILE must hold an object: {sandbox: [...], live: [...]}",
    );
    expect(refusal(fileOf("staging: []"))).toBe(
      'NETWORKS_FILE: "staging" is not an environment (sandbox, live)',
    );
    expect(refusal(fileOf("live: []"))).toBe("NETWORKS_FILE: live must be a non-empty list of networks");
    expect(refusal(fileOf("live: [{name: Base}]"))).toBe("live[0] must be a network with an id");
    expect(refusal({ ...fileOf(YAML), LIVE_NETWORKS: "base" })).toBe(
      "LIVE_NETWORKS is set and NETWORKS_FILE lists live's networks: use one of them",
    );
    expect(refusal({ ...fileOf(YAML), LIVE_BASE_CHAIN_ID: "1" })).toBe(
      "LIVE_BASE_CHAIN_ID is set and differs from live[0] (base).chainId in NETWORKS_FILE: keep one",
    );
    expect(refusal(fileOf(YAML.replace("- id: polygon", "- id: Polygon")))).toMatch(
      /^NETWORKS_FILE the live list must list network ids/,
    );
  });
});
