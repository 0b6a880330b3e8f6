import type { Hex } from "viem";
import type { UserOperation } from "viem/account-abstraction";
import type { UnestimatedOperation } from "./bundler-rpc.ts";

// The gas limits of a smart wallet operation (smart-accounts.ts `prepare`): the bundler's estimate,
// or the limits an account's earlier operation of the same kind was estimated with (a gas profile)
// beside the call gas the node measures; and the least call gas a contract call declares.

/** The gas limits of an account's operation that do not depend on what its calls do, with their paymaster. */
export interface GasProfile {
  verificationGasLimit: bigint;
  preVerificationGas: bigint;
  paymaster: Hex;
  paymasterVerificationGasLimit: bigint;
  paymasterPostOpGasLimit: bigint;
}

/** What an estimated operation's gas profile is (none without a paymaster, which every operation has). */
export function profileOf(operation: UserOperation<"0.8">): GasProfile | undefined {
  if (!operation.paymaster || operation.paymasterVerificationGasLimit === undefined) return undefined;
  return {
    verificationGasLimit: operation.verificationGasLimit,
    preVerificationGas: operation.preVerificationGas,
    paymaster: operation.paymaster,
    paymasterVerificationGasLimit: operation.paymasterVerificationGasLimit,
    paymasterPostOpGasLimit: operation.paymasterPostOpGasLimit ?? 0n,
  };
}

/** The bundler's estimate, as viem's BundlerClient gives it (eth_estimateUserOperationGas). */
interface Estimator {
  estimateUserOperationGas: (args: UserOperation<"0.8"> & { entryPointAddress: Hex }) => Promise<{
    callGasLimit: bigint;
    verificationGasLimit: bigint;
    preVerificationGas: bigint;
    paymasterVerificationGasLimit?: bigint | undefined;
    paymasterPostOpGasLimit?: bigint | undefined;
  }>;
}

/**
 * The operation with the bundler's estimate of its limits. A paymaster's own limits (an ERC-7677
 * stub's) are kept: the service vouches for what its contract needs, and it signs them later.
 */
export async function estimated(
  bundler: Estimator,
  operation: UnestimatedOperation,
  entryPointAddress: Hex,
): Promise<UserOperation<"0.8">> {
  const gas = await bundler.estimateUserOperationGas({
    ...operation,
    callGasLimit: 0n,
    verificationGasLimit: 0n,
    preVerificationGas: 0n,
    ...(operation.paymaster
      ? {
          paymasterVerificationGasLimit: operation.paymasterVerificationGasLimit ?? 0n,
          paymasterPostOpGasLimit: operation.paymasterPostOpGasLimit ?? 0n,
        }
      : {}),
    entryPointAddress,
  });
  return {
    ...operation,
    callGasLimit: gas.callGasLimit,
    verificationGasLimit: gas.verificationGasLimit,
    preVerificationGas: gas.preVerificationGas,
    ...(operation.paymaster
      ? {
          paymasterVerificationGasLimit:
            operation.paymasterVerificationGasLimit ?? gas.paymasterVerificationGasLimit ?? 0n,
          paymasterPostOpGasLimit: operation.paymasterPostOpGasLimit ?? gas.paymasterPostOpGasLimit ?? 0n,
        }
      : {}),
  };
}

/**
 * A contract call's own least call gas (a swap's: the quoter's figure plus the router's work), summed
 * over the calls, holds when the pool has moved since the estimate (more ticks crossed, the oracle's
 * write of a later second); an estimate made at one state would run out of gas at another. The
 * unused part costs the sponsor a tenth of it (EntryPoint v0.8's penalty), not the wallet anything.
 */
export function declaredCallGas(
  calls: ReadonlyArray<{ call?: { gas?: bigint | undefined } | undefined }>,
): bigint {
  return calls.reduce((sum, call) => sum + (call.call?.gas ?? 0n), 0n);
}
