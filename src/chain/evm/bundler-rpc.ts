import { BaseError, HttpRequestError, RpcRequestError } from "viem";
import type { UserOperation } from "viem/account-abstraction";
import { firstLine } from "../../domain/errors.ts";
import type { FeeQuote, Hex } from "../network.ts";

// The boundary with the bundler's JSON-RPC: the methods viem does not type (Alto's and Pimlico's
// `pimlico_*`, and the raw sends of an already signed operation), the wire forms of an operation
// and its receipt, and what a bundler's error says. The casts to and from viem's types are made
// here and only here: `bundlerCall` is the one untyped request, documented below.

/** How a user operation ended, as far as the bundler tells. */
export type OperationOutcome =
  | { status: "success"; userOpHash: Hex; txHash: Hex }
  | {
      status: "reverted";
      userOpHash: Hex;
      txHash: Hex | null;
      error: string;
      /** The bundler answered the send with an error: the operation is not in its mempool. */
      refused?: boolean;
    }
  | { status: "pending"; userOpHash: Hex };

type GasLimit = "callGasLimit" | "verificationGasLimit" | "preVerificationGas";

/** An EntryPoint v0.8 operation before its gas limits are known (and before its paymaster's fields). */
export type UnestimatedOperation = Omit<UserOperation<"0.8">, GasLimit> &
  Partial<Pick<UserOperation<"0.8">, GasLimit>>;

/**
 * viem's prepareUserOperation asked for all but the gas and the paymaster: the calls' data, the
 * factory (until the account is deployed; not asked for once it is known `deployed`), the fees,
 * the given nonce and a stub signature. Its parameter and result types are computed from the
 * account's generics, which the account made per operation does not carry through: one cast in,
 * one out, here. The account object it hands back beside the operation is left out (only the
 * operation's own fields go to the bundler and the database).
 */
export async function fillOperation(
  bundler: { prepareUserOperation: (args: never) => Promise<unknown> },
  args: { account: unknown; calls: unknown[]; nonce: bigint; deployed: boolean },
): Promise<UnestimatedOperation> {
  const { deployed, ...asked } = args;
  const filled = (await bundler.prepareUserOperation({
    ...asked,
    parameters: deployed ? ["fees", "nonce", "signature"] : ["factory", "fees", "nonce", "signature"],
  } as never)) as UnestimatedOperation & { account?: unknown };
  const { account: _, ...operation } = filled;
  return operation;
}

/**
 * An operation's fees from the network's estimate, doubled as viem's own fill doubles its estimate
 * for a bundler ("bundlers have strict rules on fee prechecks"): the prices operations always had.
 */
export function bundlerFees(fees: FeeQuote): FeeQuote {
  return { maxFeePerGas: 2n * fees.maxFeePerGas, maxPriorityFeePerGas: 2n * fees.maxPriorityFeePerGas };
}

/**
 * A bundler request viem's BundlerClient has no type for. viem types `request` by its own method
 * list; these methods are the bundler's, so the request object is cast once, here.
 */
export function bundlerCall(
  bundler: { request: (args: never, options?: { retryCount?: number }) => Promise<unknown> },
  method: string,
  params: unknown[],
  options?: { retryCount?: number },
): Promise<unknown> {
  return bundler.request({ method, params } as never, options);
}

/** What viem's receipt and the JSON-RPC receipt (the instant bundling answer) both carry. */
export interface RpcUserOperationReceipt {
  success: boolean;
  reason?: string | undefined;
  receipt: { transactionHash: Hex };
}

export function outcomeOf(userOpHash: Hex, receipt: RpcUserOperationReceipt): OperationOutcome {
  return receipt.success
    ? { status: "success", userOpHash, txHash: receipt.receipt.transactionHash }
    : {
        status: "reverted",
        userOpHash,
        txHash: receipt.receipt.transactionHash,
        error: receipt.reason || "user operation reverted",
      };
}

/** A recorded operation read back: bigints were written as "123n". */
export function operationOf(serialized: string): UserOperation {
  return JSON.parse(serialized, (_k, v) =>
    typeof v === "string" && /^[0-9]+n$/.test(v) ? BigInt(v.slice(0, -1)) : v,
  ) as UserOperation;
}

/** The bundler answered, with a JSON-RPC error. */
export function answeredWithError(err: unknown): boolean {
  return err instanceof BaseError && err.walk((e) => e instanceof RpcRequestError) !== null;
}

/**
 * The request never reached a bundler that could act on it: no connection (refused, or the host
 * unknown), or an HTTP 4xx answer (a bundler or its gateway turning the request away).
 */
export function neverReached(err: unknown): boolean {
  const codes = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN"]);
  let cause: unknown = err;
  for (let depth = 0; cause && typeof cause === "object" && depth < 8; depth++) {
    if (codes.has(String((cause as { code?: unknown }).code))) return true;
    if (
      cause instanceof HttpRequestError &&
      cause.status !== undefined &&
      cause.status >= 400 &&
      cause.status < 500
    )
      return true;
    cause = (cause as { cause?: unknown }).cause;
  }
  return false;
}

/** The JSON-RPC form of a v0.8 user operation: numbers as hex quantities. */
export function serializeForRpc(op: UserOperation): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(op)) {
    if (value === undefined) continue;
    out[key] = typeof value === "bigint" ? `0x${value.toString(16)}` : value;
  }
  return out;
}

export function bundlerMessage(err: unknown): string {
  const e = err as { details?: string; shortMessage?: string; message?: string };
  return `bundler refused the operation: ${firstLine(e.details || e.shortMessage || e.message || "unknown error")}`.slice(
    0,
    300,
  );
}
