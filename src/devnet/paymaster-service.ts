import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import {
  type Address,
  type Hex,
  hexToNumber,
  isAddress,
  isAddressEqual,
  isHex,
  keccak256,
  toHex,
} from "viem";
import { formatUserOperation, type RpcUserOperation, type UserOperation } from "viem/account-abstraction";
import { privateKeyToAccount } from "viem/accounts";
import { type Validity, verifyingPaymasterData, verifyingPaymasterHash } from "./verifying-paymaster.ts";

// The devnet's paymaster service: a small ERC-7677 JSON-RPC endpoint on 127.0.0.1 that signs for
// the devnet's VerifyingPaymaster, as a production paymaster service (Pimlico, Alchemy, Coinbase's)
// signs for its own. `pm_getPaymasterStubData` answers stub fields for the gas estimate (a
// well-formed signature by another key, so the simulation runs the real code path and fails only
// the signature check); `pm_getPaymasterData` signs the operation with every gas limit in it.
// It sponsors every operation it is asked about: a development tool only.

export interface PaymasterServiceOptions {
  chainId: number;
  entryPoint: Address;
  /** The VerifyingPaymaster whose signer `signerKey` is. */
  paymaster: Address;
  signerKey: Hex;
  /** Port on 127.0.0.1; a free one when omitted. */
  port?: number;
  /** How long a signature is good for, in seconds. Default one hour. */
  validForSeconds?: number;
}

export interface PaymasterService {
  /** http://127.0.0.1:<port> */
  url: string;
  /** Closes the server; resolves once it is closed. Idempotent. */
  stop(): Promise<void>;
}

/** A JSON-RPC error this endpoint answers with. */
class RpcError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

const MAX_BODY_BYTES = 1_000_000;
const GAS_FIELDS = ["callGasLimit", "verificationGasLimit", "preVerificationGas"] as const;
const REQUIRED_FIELDS = ["sender", "nonce", "callData", "maxFeePerGas", "maxPriorityFeePerGas"] as const;

export async function startPaymasterService(options: PaymasterServiceOptions): Promise<PaymasterService> {
  const signer = privateKeyToAccount(options.signerKey);
  const stubSignature = await stubSignatureOf();
  const validity = (): Validity => ({
    validUntil: Math.floor(Date.now() / 1000) + (options.validForSeconds ?? 3600),
    validAfter: 0,
  });

  const answer = async (method: unknown, params: unknown): Promise<unknown> => {
    if (method !== "pm_getPaymasterStubData" && method !== "pm_getPaymasterData")
      throw new RpcError(-32601, `method ${String(method)} is not served here`);
    const operation = operationOf(params, options);
    if (method === "pm_getPaymasterStubData") {
      // The paymaster has no postOp (it returns no context): nothing to reserve for one. Its
      // verification gas is left to the bundler's estimate.
      return {
        paymaster: options.paymaster,
        paymasterData: verifyingPaymasterData(validity(), stubSignature),
        paymasterPostOpGasLimit: "0x0",
        isFinal: false,
      };
    }
    if (
      operation.paymasterVerificationGasLimit === undefined ||
      operation.paymasterPostOpGasLimit === undefined
    )
      throw new RpcError(
        -32602,
        "paymasterVerificationGasLimit and paymasterPostOpGasLimit are signed: give them with every other limit",
      );
    const window = validity();
    const hash = verifyingPaymasterHash(operation, {
      chainId: options.chainId,
      paymaster: options.paymaster,
      ...window,
    });
    const signature = await signer.signMessage({ message: { raw: hash } });
    return { paymaster: options.paymaster, paymasterData: verifyingPaymasterData(window, signature) };
  };

  const server = createServer((req, res) => {
    void (async () => {
      let id: unknown = null;
      let body: Record<string, unknown>;
      try {
        const request = JSON.parse(await readBody(req)) as {
          id?: unknown;
          method?: unknown;
          params?: unknown;
        };
        id = request.id ?? null;
        body = { jsonrpc: "2.0", id, result: await answer(request.method, request.params) };
      } catch (err) {
        const code = err instanceof RpcError ? err.code : err instanceof SyntaxError ? -32700 : -32603;
        body = {
          jsonrpc: "2.0",
          id,
          error: { code, message: err instanceof Error ? err.message : String(err) },
        };
      }
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  let closed: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () => {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closed;
    },
  };
}

/** The user operation of `[userOp, entryPoint, chainId, context]`, checked to be for this paymaster's chain. */
function operationOf(params: unknown, options: PaymasterServiceOptions): UserOperation<"0.8"> {
  if (!Array.isArray(params) || params.length < 3)
    throw new RpcError(-32602, "params must be [userOp, entryPoint, chainId, context]");
  const [rpcOperation, entryPoint, chainId] = params as [unknown, unknown, unknown];
  if (
    typeof entryPoint !== "string" ||
    !isAddress(entryPoint) ||
    !isAddressEqual(entryPoint, options.entryPoint)
  )
    throw new RpcError(
      -32602,
      `entry point ${String(entryPoint)} is not served here (${options.entryPoint})`,
    );
  if (typeof chainId !== "string" || !isHex(chainId) || hexToNumber(chainId) !== options.chainId)
    throw new RpcError(-32602, `chain ${String(chainId)} is not served here (${toHex(options.chainId)})`);
  if (typeof rpcOperation !== "object" || rpcOperation === null)
    throw new RpcError(-32602, "userOp must be an object");
  const fields = rpcOperation as Record<string, unknown>;
  for (const name of [...REQUIRED_FIELDS, ...GAS_FIELDS])
    if (!isHex(fields[name])) throw new RpcError(-32602, `userOp.${name} must be hex`);
  for (const name of ["factory", "factoryData", "paymasterVerificationGasLimit", "paymasterPostOpGasLimit"])
    if (fields[name] !== undefined && fields[name] !== null && !isHex(fields[name]))
      throw new RpcError(-32602, `userOp.${name} must be hex`);
  // Checked field by field above: the wire form viem formats.
  return formatUserOperation(fields as RpcUserOperation<"0.8">) as UserOperation<"0.8">;
}

/**
 * A well-formed signature by a key that is not the signer's, with no zero byte: the stub's
 * paymasterData is as long as the real one and has no more zero bytes (ERC-7677's advice, so that
 * the bundler's preVerificationGas is enough), and the contract's ecrecover runs as it will.
 */
async function stubSignatureOf(): Promise<Hex> {
  const stubKey = privateKeyToAccount(keccak256(toHex("devnet paymaster stub signer")));
  for (let i = 0; ; i++) {
    const signature = await stubKey.signMessage({ message: { raw: keccak256(toHex(i)) } });
    if (!/^0x(?:[0-9a-f]{2})*?00/.test(signature)) return signature;
  }
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of req) {
    length += (chunk as Buffer).length;
    if (length > MAX_BODY_BYTES) throw new RpcError(-32600, "request too large");
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}
