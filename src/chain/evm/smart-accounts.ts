import { randomBytes } from "node:crypto";
import { LRUCache } from "lru-cache";
import { toSimpleSmartAccount } from "permissionless/accounts";
import { getAccountNonce } from "permissionless/actions";
import { createPublicClient, encodeFunctionData, erc20Abi, http, type Log, type PublicClient } from "viem";
import {
  createBundlerClient,
  entryPoint08Address,
  getUserOperationHash,
  type UserOperation,
} from "viem/account-abstraction";
import { privateKeyToAccount } from "viem/accounts";
import type { NetworkConfig } from "../../config.ts";
import type { ChainToken, ContractCall, FeeQuote, Hex } from "../network.ts";
import {
  answeredWithError,
  bundlerCall,
  bundlerFees,
  bundlerMessage,
  fillOperation,
  neverReached,
  type OperationOutcome,
  operationOf,
  outcomeOf,
  type RpcUserOperationReceipt,
  serializeForRpc,
} from "./bundler-rpc.ts";
import { chainOf } from "./chain-of.ts";
import { declaredCallGas, estimated, type GasProfile, profileOf } from "./operation-gas.ts";
import { type Paymaster, paymasterOf } from "./paymaster.ts";

export type { OperationOutcome } from "./bundler-rpc.ts";

// ERC-4337 smart wallets (D11): SimpleAccount (EntryPoint v0.8) owned by the workspace EOA, gas
// sponsored by the paymaster (paymaster.ts), operations sent through the bundler. The address is counterfactual:
// it is known (and can receive funds) before the first operation deploys the account.

export interface SmartCall {
  token: ChainToken;
  to: Hex;
  amount: bigint;
  /** A contract call instead of a transfer (network.ts `TransferRequest.call`; its gas is the least call gas). */
  call?: ContractCall;
}

export interface PreparedOperation {
  userOpHash: Hex;
  /** Everything needed to send exactly this signed operation again after a restart. */
  serialized: string;
  /**
   * Where its gas limits came from: the bundler's estimate, or the account's last estimate with
   * the call's gas measured on the node (see `prepare`). Absent for an operation read back.
   */
  gasFrom?: "bundler" | "known";
  /** The kind of operation whose known limits it used; forgotten if the bundler refuses it. */
  gasKind?: string;
  /** The operation's nonce key (see `prepare`). Absent for an operation read back. */
  nonceKey?: bigint;
}

const RECEIPT_TIMEOUT_MS = 60_000;
/**
 * A nonce key of its own for one operation. ERC-4337 nonces are two-dimensional: a 192-bit key,
 * each key with its own sequence, and the EntryPoint accepts sequence 0 of a key never used, so
 * an operation on a key of its own waits for no other and can be included once. viem's default
 * key is the time in milliseconds (plus a counter kept by the account object, which `#account`
 * makes anew for every operation): two operations of one account prepared in the same
 * millisecond (a payout beside a settlement, or two instances) took the same nonce, and the
 * bundler took only one of them. 24 random bytes fill the key's 192 bits instead. Given the
 * nonce, the fill also skips the EntryPoint's nonce read (an eth_call) of every operation.
 */
function freshNonceKey(): bigint {
  return BigInt(`0x${randomBytes(24).toString("hex")}`);
}

/** Sequence 0 of the key: the nonce is the key in its upper 192 bits. */
function firstNonceOf(nonceKey: bigint): bigint {
  return nonceKey << 64n;
}

/** The bundler's statuses of an operation it holds: waiting in its mempool, or in a bundle sent. */
const HELD_STATUSES = new Set(["not_submitted", "submitted", "included"]);

export class SmartAccounts {
  readonly #client: PublicClient;
  readonly #aa: NonNullable<NetworkConfig["accountAbstraction"]>;
  readonly #tokens: Record<string, string | undefined>;
  readonly #bundler;
  readonly #paymaster: Paymaster;
  /** Owner EOA → its smart account's address (fixed per factory, entry point and owner). */
  readonly #addresses = new LRUCache<Hex, Hex>({ max: 10_000 });
  /**
   * A deployed account's last bundler estimate per kind of operation (the tokens of its calls).
   * Kept a minute: on a rollup the pre-verification gas follows the price of L1 data.
   */
  readonly #gasProfiles = new LRUCache<string, GasProfile>({ max: 10_000, ttl: 60_000 });
  /**
   * Accounts seen deployed: their operations carry no deployment, so the fill skips the account's
   * code read (viem keeps that knowledge on the account object, which `#account` makes anew for
   * every operation). Forgotten when the bundler refuses one of their operations (a deployment a
   * reorganisation undid would be refused so), so the next fill reads the code again.
   */
  readonly #deployed = new LRUCache<Hex, true>({ max: 10_000 });

  /**
   * `fees`: the network's shared fee estimate (the port's `fees`), which operations are priced
   * from instead of two node reads of their own each, one after the other; without it, viem's.
   */
  constructor(config: NetworkConfig, fees?: () => Promise<FeeQuote>) {
    if (!config.accountAbstraction) throw new Error("no bundler configured");
    this.#aa = config.accountAbstraction;
    this.#tokens = config.tokens;
    const chain = chainOf(config);
    this.#client = createPublicClient({ chain, transport: http(config.rpcUrl) }) as PublicClient;
    this.#bundler = createBundlerClient({
      client: this.#client,
      transport: http(this.#aa.bundlerUrl, { timeout: 20_000 }),
      // A payout's response waits for this receipt; one bundler call per 25 ms while it does.
      pollingInterval: 25,
      ...(fees ? { userOperation: { estimateFeesPerGas: async () => bundlerFees(await fees()) } } : {}),
    });
    this.#paymaster = paymasterOf(this.#aa.paymaster, {
      chainId: config.chainId,
      entryPointAddress: this.#entryPoint,
    });
  }

  get #entryPoint(): Hex {
    return (this.#aa.entryPointAddress ?? entryPoint08Address) as Hex;
  }

  async #account(ownerKey: Hex) {
    const owner = privateKeyToAccount(ownerKey);
    const account = await toSimpleSmartAccount({
      client: this.#client,
      owner,
      entryPoint: { address: this.#entryPoint, version: "0.8" },
      factoryAddress: this.#aa.accountFactoryAddress as Hex,
      // Without an address, every call asks the factory (an eth_call) for the counterfactual
      // address, which for this network's factory and entry point depends on the owner alone.
      address: this.#addresses.get(owner.address),
    });
    this.#addresses.set(owner.address, account.address);
    return account;
  }

  /** The counterfactual address of the account the EOA owns (no transaction needed). */
  /** Resolves once the bundler answers (the readiness check); throws when it does not. */
  async bundlerAnswers(): Promise<void> {
    await this.#bundler.getSupportedEntryPoints();
  }

  async address(ownerKey: Hex): Promise<Hex> {
    return (await this.#account(ownerKey)).address;
  }

  #callsOf(calls: SmartCall[]) {
    return calls.map((call) => {
      if (call.call) return { to: call.to, value: call.call.value, data: call.call.data };
      if (call.token === "ETH") return { to: call.to, value: call.amount, data: "0x" as Hex };
      const token = this.#tokens[call.token];
      if (!token) throw new Error(`${call.token} is not configured on this network`);
      return {
        to: token as Hex,
        value: 0n,
        data: encodeFunctionData({ abi: erc20Abi, functionName: "transfer", args: [call.to, call.amount] }),
      };
    });
  }

  /**
   * Prepares and signs one operation (several calls = one batch), without sending it.
   *
   * The bundler's gas estimate is a binary search of simulations (most of an operation's
   * preparation time). Only the call gas depends on what the calls do and on the chain's state;
   * the other limits are the account's and the paymaster's own. So once a deployed account has
   * had an operation of a kind estimated by the bundler, its next ones of that kind reuse those
   * limits, and the call gas is measured by the node (`eth_estimateGas` of the calls, sent by the
   * EntryPoint as it will be). That figure includes the transaction's intrinsic 21,000 gas, which
   * the call frame does not spend: headroom below the 40,000 of unused call gas that EntryPoint
   * v0.8 starts to charge for. Should the bundler refuse such an operation, its caller prepares
   * it again with `estimate: "bundler"` and the refused one's `nonceKey` (the refused one was never
   * in the mempool, and both have the same nonce, so at most one of them can ever be included).
   *
   * The order matters for a paymaster service, whose signature covers every gas limit: its stub
   * for the estimate, then every limit fixed (the estimate or the profile with the measured call
   * gas, then a contract call's declared floor), then the paymaster's signature, then the account's.
   *
   * Each operation has a nonce key of its own (`freshNonceKey`), unless `nonceKey` is given.
   */
  async prepare(
    ownerKey: Hex,
    calls: SmartCall[],
    options: { estimate?: "bundler"; nonceKey?: bigint } = {},
  ): Promise<PreparedOperation> {
    const account = await this.#account(ownerKey);
    const nonceKey = options.nonceKey ?? freshNonceKey();
    const operationCalls = this.#callsOf(calls);
    // A contract call's gas depends on what it calls: its kind names the contract and function.
    const kind = `${account.address} ${calls.map((call) => (call.call ? `${call.to}:${call.call.data.slice(0, 10)}` : call.token)).join(",")}`;
    const known = options.estimate === "bundler" ? undefined : this.#gasProfiles.get(kind);
    // All but gas and paymaster; the fees and whether the account is deployed do not depend on the
    // call gas, so with a known profile this runs beside the measurement.
    const unpaid = fillOperation(this.#bundler, {
      account,
      calls: operationCalls,
      nonce: firstNonceOf(nonceKey),
      deployed: this.#deployed.has(account.address),
    }).then((filled) => {
      if (!filled.factory) this.#deployed.set(account.address, true);
      return filled;
    });
    let operation: UserOperation<"0.8"> | undefined;
    let paymasterFinal = false;
    if (known) {
      const [callGasLimit, filled] = await Promise.all([
        this.#client
          .estimateGas({
            account: this.#entryPoint,
            to: account.address,
            data: await account.encodeCalls(operationCalls),
          })
          // A call that would fail now: the bundler's estimate gives the reason.
          .catch(() => undefined),
        unpaid,
      ]);
      if (callGasLimit !== undefined) operation = { ...filled, ...known, callGasLimit };
    }
    const gasFrom = operation ? "known" : "bundler";
    if (!operation) {
      const stub = await this.#paymaster.stub(await unpaid);
      paymasterFinal = stub.final;
      operation = await estimated(this.#bundler, { ...(await unpaid), ...stub.fields }, this.#entryPoint);
      // Deployed before this operation: its verification costs what the next ones' will.
      const profile = operation.factory ? undefined : profileOf(operation);
      if (profile) this.#gasProfiles.set(kind, profile);
    }
    const declared = declaredCallGas(calls);
    if (declared > operation.callGasLimit) operation.callGasLimit = declared;
    // Every limit is fixed: now the paymaster signs them, then the account signs the whole.
    if (!paymasterFinal) operation = { ...operation, ...(await this.#paymaster.sign(operation)) };
    const signed: UserOperation = { ...operation, signature: await account.signUserOperation(operation) };
    const userOpHash = getUserOperationHash({
      userOperation: signed,
      entryPointAddress: account.entryPoint.address,
      entryPointVersion: "0.8",
      chainId: this.#client.chain?.id ?? 0,
    });
    return {
      userOpHash,
      serialized: JSON.stringify(signed, (_k, v) => (typeof v === "bigint" ? `${v}n` : v)),
      ...(gasFrom === "known" ? { gasFrom, gasKind: kind } : { gasFrom }),
      nonceKey,
    };
  }

  /**
   * Sends a prepared operation (again, after a restart: the same signed bytes) and waits for it.
   * It fails only when the bundler refused it (a JSON-RPC error) or never got it (no connection,
   * an HTTP 4xx); a send with no answer may still be included, so it is pending.
   *
   * `resend`: the operation was recorded (and maybe sent) before a restart. A bundler may refuse
   * a duplicate it still holds; that is no evidence of failure, so a resend that is refused and
   * has no receipt yet stays pending (the next reconcile looks again) instead of failing a payout
   * whose money may still move.
   */
  async send(prepared: PreparedOperation, options: { resend?: boolean } = {}): Promise<OperationOutcome> {
    const operation = operationOf(prepared.serialized);
    const params = [serializeForRpc(operation), this.#aa.entryPointAddress as Hex];
    let instantAnsweredError = false;
    try {
      if (this.#aa.instantBundling && !options.resend) {
        try {
          // Not retried by the transport: an attempt without an answer may have been bundled.
          const receipt = await bundlerCall(this.#bundler, "pimlico_sendUserOperationNow", params, {
            retryCount: 0,
          });
          return outcomeOf(prepared.userOpHash, receipt as RpcUserOperationReceipt);
        } catch (err) {
          if (!answeredWithError(err)) throw err;
          // The bundler answered with an error, which says less than a refused send: it may have
          // refused the operation before bundling it, dropped it when its simulation failed, or
          // put it back in its mempool when the bundle could not be sent. The standard send of
          // the same signed operation tells these apart (below).
          instantAnsweredError = true;
        }
      }
      await bundlerCall(this.#bundler, "eth_sendUserOperation", params);
    } catch (err) {
      const existing = await this.receipt(prepared.userOpHash);
      if (existing.status !== "pending" || options.resend) return existing;
      const refused = answeredWithError(err);
      if (!refused && !neverReached(err)) {
        // No answer (a timeout, a connection lost before the answer): the bundler may hold the
        // operation and include it. Failing the payout could let a retry pay twice; it stays
        // pending, and the reconciler sends the same signed operation again.
        return { status: "pending", userOpHash: prepared.userOpHash };
      }
      // Refused after an instant bundling error: refused as a duplicate when the bundler holds it.
      if (!(refused && instantAnsweredError && (await this.#holds(prepared.userOpHash)))) {
        // Limits that were known may be what the bundler refuses: the next operation of this kind
        // asks the bundler again.
        if (refused && prepared.gasKind) this.#gasProfiles.delete(prepared.gasKind);
        if (refused) this.#deployed.delete(operation.sender);
        return {
          status: "reverted",
          userOpHash: prepared.userOpHash,
          txHash: null,
          error: bundlerMessage(err),
          refused,
        };
      }
    }
    try {
      const receipt = await this.#bundler.waitForUserOperationReceipt({
        hash: prepared.userOpHash,
        timeout: RECEIPT_TIMEOUT_MS,
      });
      return outcomeOf(prepared.userOpHash, receipt);
    } catch {
      return { status: "pending", userOpHash: prepared.userOpHash };
    }
  }

  /**
   * Whether the bundler still holds the operation (in its mempool, or in a bundle it sent).
   * `pimlico_getUserOperationStatus` is part of the same API as instant bundling.
   */
  async #holds(userOpHash: Hex): Promise<boolean> {
    try {
      const answer = (await bundlerCall(this.#bundler, "pimlico_getUserOperationStatus", [userOpHash])) as {
        status?: string;
      } | null;
      return answer?.status !== undefined && HELD_STATUSES.has(answer.status);
    } catch {
      // Unknown: as if held. The payout stays pending and the reconciler looks again, rather
      // than failing a payout whose operation may still be included.
      return true;
    }
  }

  /**
   * Sends a recorded operation again (the reconciler's pass over a payout left pending). Still
   * pending, it is reverted if it can never be included: that fails its payout, which gives back
   * the amount the wallet's balance checks keep for it.
   */
  async sendAgain(prepared: PreparedOperation): Promise<OperationOutcome> {
    const outcome = await this.send(prepared, { resend: true });
    if (outcome.status !== "pending" || (await this.#canStillBeIncluded(prepared.serialized))) return outcome;
    return {
      status: "reverted",
      userOpHash: prepared.userOpHash,
      txHash: null,
      error:
        "user operation never included: it deploys the smart wallet, which another operation deployed first",
    };
  }

  /**
   * Whether a recorded operation can still be included. One that deploys its account cannot once
   * the account is deployed by another operation: the EntryPoint deploys an account once (AA10).
   * The account's code is read first, then the nonce of the operation's key: a key still at the
   * operation's own nonce after the account was deployed was never used, so neither this
   * operation nor one with its key was included, and none ever can be. Anything else may be.
   */
  async #canStillBeIncluded(serialized: string): Promise<boolean> {
    const operation = operationOf(serialized) as UserOperation<"0.8">;
    if (!operation.factory) return true;
    const code = await this.#client.getCode({ address: operation.sender });
    if (!code || code === "0x") return true;
    const nonce = await getAccountNonce(this.#client, {
      address: operation.sender,
      entryPointAddress: this.#entryPoint,
      key: operation.nonce >> 64n,
    });
    return nonce !== operation.nonce;
  }

  /** The logs one included operation emitted (not the rest of its bundle's), as the bundler tells them. */
  async operationLogs(userOpHash: Hex): Promise<Log[]> {
    return (await this.#bundler.getUserOperationReceipt({ hash: userOpHash })).logs;
  }

  async receipt(userOpHash: Hex): Promise<OperationOutcome> {
    try {
      return outcomeOf(userOpHash, await this.#bundler.getUserOperationReceipt({ hash: userOpHash }));
    } catch {
      return { status: "pending", userOpHash };
    }
  }
}
