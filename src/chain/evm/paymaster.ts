import { BaseError, type Hex, http, RpcRequestError } from "viem";
import {
  createPaymasterClient,
  getPaymasterData,
  getPaymasterStubData,
  type UserOperation,
} from "viem/account-abstraction";
import { firstLine } from "../../domain/errors.ts";
import type { PaymasterConfig } from "../../network-config.ts";
import type { UnestimatedOperation } from "./bundler-rpc.ts";

// Who pays a smart wallet operation's gas (D11), asked twice while it is prepared (smart-accounts.ts
// `prepare`): once for the fields the bundler estimates gas with, then, with every gas limit fixed,
// for the final fields the account signs over. A paymaster service (ERC-7677) answers a stub, then
// signs the operation: its signature covers the limits, so none may change after it. A paymaster
// named by its bare address has empty data that signs nothing: its fields are known beforehand.

/** The paymaster fields of an EntryPoint v0.8 user operation. */
export interface PaymasterFields {
  paymaster: Hex;
  paymasterData?: Hex | undefined;
  paymasterVerificationGasLimit?: bigint | undefined;
  paymasterPostOpGasLimit?: bigint | undefined;
}

export interface Paymaster {
  /**
   * The fields to estimate the operation's gas with (a service's own gas limits among them, when
   * it gives them; the bundler estimates the others). `final`: they are the final fields too.
   */
  stub(operation: UnestimatedOperation): Promise<{ fields: PaymasterFields; final: boolean }>;
  /** The final fields of an operation whose every gas limit is fixed. */
  sign(operation: UserOperation<"0.8">): Promise<PaymasterFields>;
}

/** The paymaster service did not sponsor the operation: it refused it, or did not answer. */
export class PaymasterServiceError extends BaseError {
  override name = "PaymasterServiceError";
  readonly code = "PAYMASTER_SERVICE";
  constructor(method: string, cause: unknown) {
    // The service's own words when it answered; never its URL (it may carry an API key).
    const answered = cause instanceof BaseError && cause.walk((e) => e instanceof RpcRequestError) !== null;
    const said =
      cause instanceof BaseError
        ? cause.details || cause.shortMessage
        : cause instanceof Error
          ? cause.message
          : String(cause);
    super(
      `paymaster service ${answered ? "refused" : "failed"} (${method}): ${firstLine(said)}`.slice(0, 300),
      { cause: cause instanceof Error ? cause : undefined },
    );
  }
}

export function paymasterOf(
  config: PaymasterConfig,
  at: { chainId: number; entryPointAddress: Hex },
): Paymaster {
  if (config.kind === "address") {
    const fields = { paymaster: config.address as Hex };
    return { stub: async () => ({ fields, final: true }), sign: async () => fields };
  }
  const client = createPaymasterClient({ transport: http(config.url, { timeout: 10_000 }) });
  const ask = { ...at, ...(config.context ? { context: config.context } : {}) };
  return {
    stub: (operation) =>
      asked("pm_getPaymasterStubData", async () => {
        const {
          isFinal,
          sponsor: _,
          ...fields
        } = await getPaymasterStubData(client, { ...operation, ...ask });
        return { fields: paymasterFields(fields), final: isFinal === true };
      }),
    sign: (operation) =>
      asked("pm_getPaymasterData", async () =>
        paymasterFields(await getPaymasterData(client, { ...operation, ...ask })),
      ),
  };
}

async function asked<T>(method: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw err instanceof PaymasterServiceError ? err : new PaymasterServiceError(method, err);
  }
}

/** A v0.7+ answer (paymaster and its data); a v0.6 `paymasterAndData` is not for this EntryPoint. */
function paymasterFields(answer: {
  paymaster?: Hex | undefined;
  paymasterData?: Hex | undefined;
  paymasterVerificationGasLimit?: bigint | undefined;
  paymasterPostOpGasLimit?: bigint | undefined;
}): PaymasterFields {
  if (!answer.paymaster) throw new Error("the answer has no paymaster address (an EntryPoint v0.6 answer?)");
  return {
    paymaster: answer.paymaster,
    paymasterData: answer.paymasterData ?? "0x",
    ...(answer.paymasterVerificationGasLimit !== undefined
      ? { paymasterVerificationGasLimit: answer.paymasterVerificationGasLimit }
      : {}),
    ...(answer.paymasterPostOpGasLimit !== undefined
      ? { paymasterPostOpGasLimit: answer.paymasterPostOpGasLimit }
      : {}),
  };
}
