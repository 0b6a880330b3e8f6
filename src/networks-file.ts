import { readFileSync } from "node:fs";
import { parse } from "yaml";
import type { Environment } from "./config.ts";
import { ConfigError, type Env, optional } from "./config-values.ts";
import { networkPrefix } from "./network-config.ts";

// The networks of the environments as one file (D22, issue 38): NETWORKS_FILE names a JSON or
// YAML file (JSON is YAML) of `{sandbox?: [network…], live?: [network…]}`, each network an
// object of the fields below, the first of a list its environment's default. The file is read
// into the variables an operator would otherwise set (`<ENV>_NETWORKS`, `<ENV>_<ID>_…`), so one
// validator (network-config.ts) checks both ways, and its errors are told in the file's terms
// (`live[1] (polygon).tokens.USDC must be 0x…`). Variables already set for a network of the file
// (its RPC URL or gas funder key, which may carry secrets) are kept when they do not contradict
// the file; an environment the file names must not also be described by `<ENV>_NETWORKS`.

/** Each field of a network in the file, with the variable (after the network's prefix) it sets. */
const FIELDS: Readonly<Record<string, string>> = {
  name: "NAME",
  rpcUrl: "RPC_URL",
  chainId: "CHAIN_ID",
  confirmations: "CONFIRMATIONS",
  "tokens.USDC": "USDC_ADDRESS",
  "tokens.ADAO": "ADAO_ADDRESS",
  "tokens.DAI": "DAI_ADDRESS",
  treasuryAddress: "TREASURY_ADDRESS",
  gasFunderKey: "GAS_FUNDER_KEY",
  gasTopUpThresholdWei: "GAS_TOPUP_THRESHOLD_WEI",
  gasTopUpTargetWei: "GAS_TOPUP_TARGET_WEI",
  pollIntervalMs: "POLL_INTERVAL_MS",
  explorerUrl: "EXPLORER_URL",
  walletRpcUrl: "WALLET_RPC_URL",
  "bundler.url": "BUNDLER_URL",
  "bundler.paymasterUrl": "PAYMASTER_URL",
  "bundler.paymasterContext": "PAYMASTER_CONTEXT",
  "bundler.paymasterAddress": "PAYMASTER_ADDRESS",
  "bundler.entryPointAddress": "ENTRYPOINT_ADDRESS",
  "bundler.accountFactoryAddress": "ACCOUNT_FACTORY_ADDRESS",
  "bundler.instantBundling": "BUNDLER_INSTANT_BUNDLING",
  "swap.routerAddress": "SWAP_ROUTER_ADDRESS",
  "swap.quoterAddress": "SWAP_QUOTER_ADDRESS",
  "swap.factoryAddress": "SWAP_FACTORY_ADDRESS",
  "swap.wethAddress": "WETH_ADDRESS",
  "swap.feeTiers": "SWAP_FEE_TIERS",
};
const GROUPS = new Set(["tokens", "bundler", "swap"]);
const ENVIRONMENT_KEYS: readonly Environment[] = ["sandbox", "live"];

/** What the file adds to the variables, and the file's name of each variable it set. */
export interface NetworksFile {
  env: Env;
  /** Variable → where the file says it (`live[0] (base).rpcUrl`), for errors. */
  places: Map<string, string>;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * A field's value as a variable's text: strings, whole numbers and booleans; fee tiers a list; a
 * paymaster service's context an object (its JSON).
 */
function text(value: unknown, place: string, field: string): string {
  if (field === "swap.feeTiers" && Array.isArray(value))
    return value.map((v) => text(v, place, "tier")).join(",");
  if (field === "bundler.paymasterContext" && isObject(value)) return JSON.stringify(value);
  if (typeof value === "string") return value;
  if (typeof value === "number" && Number.isSafeInteger(value)) return String(value);
  if (typeof value === "boolean") return String(value);
  throw new ConfigError(`${place} must be a string, a whole number or true/false`);
}

/** The fields of one network as `path → value`, the groups (`tokens`, `bundler`, `swap`) flattened. */
function fieldsOf(network: Record<string, unknown>, at: string): Array<[field: string, value: unknown]> {
  const out: Array<[string, unknown]> = [];
  for (const [key, value] of Object.entries(network)) {
    if (key === "id") continue;
    if (GROUPS.has(key)) {
      if (!isObject(value)) throw new ConfigError(`${at}.${key} must be an object`);
      for (const [inner, v] of Object.entries(value)) out.push([`${key}.${inner}`, v]);
    } else out.push([key, value]);
  }
  for (const [field] of out)
    if (!(field in FIELDS))
      throw new ConfigError(
        `${at}.${field} is not a network field (fields: id, ${Object.keys(FIELDS).join(", ")})`,
      );
  return out;
}

/** The variables the file's text describes (parsed as YAML, of which JSON is a part). */
export function networksFileEnv(source: string, env: Env): NetworksFile {
  let doc: unknown;
  try {
    doc = parse(source);
  } catch (err) {
    throw new ConfigError(`NETWORKS_FILE is not JSON or YAML: ${(err as Error).message}`);
  }
  if (!isObject(doc))
    throw new ConfigError("NETWORKS_FILE must hold an object: {sandbox: [...], live: [...]}");
  for (const key of Object.keys(doc))
    if (!ENVIRONMENT_KEYS.includes(key as Environment))
      throw new ConfigError(`NETWORKS_FILE: "${key}" is not an environment (sandbox, live)`);
  const out: Env = {};
  const places = new Map<string, string>();
  for (const environment of ENVIRONMENT_KEYS) {
    const list = doc[environment];
    if (list === undefined) continue;
    const p = environment.toUpperCase();
    if (!Array.isArray(list) || list.length === 0)
      throw new ConfigError(`NETWORKS_FILE: ${environment} must be a non-empty list of networks`);
    if (optional(env, `${p}_NETWORKS`) !== undefined)
      throw new ConfigError(
        `${p}_NETWORKS is set and NETWORKS_FILE lists ${environment}'s networks: use one of them`,
      );
    const ids = list.map((network: unknown, i) => {
      const at = `${environment}[${i}]`;
      if (!isObject(network) || typeof network.id !== "string")
        throw new ConfigError(`${at} must be a network with an id`);
      const prefix = networkPrefix(environment, network.id);
      // A field the file leaves out is still the file's to name in an error (unless a variable gives it).
      for (const [field, suffix] of Object.entries(FIELDS))
        if (optional(env, `${prefix}_${suffix}`) === undefined)
          places.set(`${prefix}_${suffix}`, `${at} (${network.id}).${field}`);
      for (const [field, value] of fieldsOf(network, `${at} (${network.id})`)) {
        const variable = `${prefix}_${FIELDS[field]}`;
        const place = `${at} (${network.id}).${field}`;
        const given = text(value, place, field);
        const set = optional(env, variable);
        if (set !== undefined && set !== given)
          throw new ConfigError(`${variable} is set and differs from ${place} in NETWORKS_FILE: keep one`);
        out[variable] = given;
        places.set(variable, place);
      }
      return network.id;
    });
    out[`${p}_NETWORKS`] = ids.join(",");
    places.set(`${p}_NETWORKS`, `the ${environment} list`);
  }
  return { env: out, places };
}

/** The variables with NETWORKS_FILE's networks added (none without it). */
export function withNetworksFile(env: Env): NetworksFile {
  const file = optional(env, "NETWORKS_FILE");
  if (!file) return { env, places: new Map() };
  let source: string;
  try {
    source = readFileSync(file, "utf8");
  } catch (err) {
    throw new ConfigError(`NETWORKS_FILE cannot be read: ${(err as Error).message}`);
  }
  const read = networksFileEnv(source, env);
  return { env: { ...env, ...read.env }, places: read.places };
}

/** Runs `read`, telling a ConfigError about a variable the file set in the file's terms. */
export function inFileTerms<T>(places: Map<string, string>, read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (!(err instanceof ConfigError) || places.size === 0) throw err;
    // Longest first: LIVE_BASE_RPC_URL before LIVE_RPC_URL's shorter names inside it.
    const names = [...places.keys()].sort((a, b) => b.length - a.length);
    let message = err.message;
    for (const name of names)
      message = message.replace(new RegExp(`\\b${name}\\b`, "g"), `NETWORKS_FILE ${places.get(name)}`);
    throw new ConfigError(message);
  }
}
