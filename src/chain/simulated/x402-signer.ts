import type { SchemeNetworkFacilitator } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/facilitator";
import { UptoEvmScheme } from "@x402/evm/upto/facilitator";
import {
  decodeFunctionData,
  encodeAbiParameters,
  encodeEventTopics,
  encodeFunctionResult,
  type Hex,
  isAddressEqual,
  type Log,
  parseAbi,
  serializeSignature,
  type TypedData,
  verifyTypedData,
} from "viem";
import type { X402Scheme } from "../../domain/x402.ts";
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from "../eip3009.ts";
import type { ChainToken } from "../network.ts";
import { receiptLog } from "../x402-scheme.ts";
import type { SimulatedLedger } from "./ledger.ts";
import { type SimulatedNetwork, tokenAt } from "./networks.ts";
import { signedBy } from "./signatures.ts";
import { isUptoContract, LedgerUpto, settleArgs, UPTO_PROXY_ABI, UPTO_PROXY_ADDRESS } from "./x402-upto.ts";

// x402's `exact` and `upto` schemes on a simulated network (D23): @x402/evm's own facilitators,
// whose signer answers as the network's USDC contract would — balances from the simulated ledger,
// EIP-3009 nonces from its record of used authorizations, the authorization's signature and
// validity checked as the contract checks them — or as Permit2 and x402's upto proxy would
// (x402-upto.ts), and whose settle call makes the payer's transfer on the ledger (through
// `settle`, which writes it with its payment). Nothing is sent anywhere.

/** The EIP-712 domain of the simulated networks' USDC (D23). */
export const SANDBOX_USDC_DOMAIN = { name: "USDC", version: "2" } as const;

/** The arguments of a `transferWithAuthorization` call. */
export interface LedgerAuthorization {
  from: Hex;
  to: Hex;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
}

export interface LedgerFacilitator {
  /** The workspace's facilitator wallet (it pays no gas here). */
  address: Hex;
  /**
   * Makes the authorized transfer on the ledger: its simulated transaction's hash. Throws, as
   * the contract would revert, when the nonce was used or the balance is short meanwhile.
   */
  settle(transfer: { from: Hex; to: Hex; value: bigint }): Promise<Hex>;
}

const MULTICALL3 = "0xcA11bde05977b3631167028862bE2a173976CA11";
const TOKEN_ABI = parseAbi([
  "function balanceOf(address account) view returns (uint256)",
  "function name() view returns (string)",
  "function version() view returns (string)",
  "function authorizationState(address authorizer, bytes32 nonce) view returns (bool)",
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)",
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)",
  "event Transfer(address indexed from, address indexed to, uint256 value)",
]);
/** What x402's diagnoses ask through Multicall3: the token's functions, its allowance, the proxy's. */
const DIAGNOSED_ABI = [
  ...TOKEN_ABI,
  ...parseAbi(["function allowance(address owner, address spender) view returns (uint256)"]),
  ...UPTO_PROXY_ABI,
];
/** Code the simulated contracts "have", so that x402 sees them as deployed (payers have none). */
const CONTRACT_CODE: Hex = "0xfe";

export function ledgerX402Scheme(
  ledger: SimulatedLedger,
  network: SimulatedNetwork,
  facilitator: LedgerFacilitator,
  scheme: X402Scheme,
): SchemeNetworkFacilitator {
  const signer = new LedgerToken(ledger, network, facilitator).signer();
  return scheme === "upto" ? new UptoEvmScheme(signer) : new ExactEvmScheme(signer);
}

type FacilitatorSigner = ConstructorParameters<typeof ExactEvmScheme>[0];

class LedgerToken {
  readonly #ledger: SimulatedLedger;
  readonly #network: SimulatedNetwork;
  readonly #facilitator: LedgerFacilitator;
  readonly #upto: LedgerUpto;
  /** The Transfer log of each settlement made, for its receipt. */
  readonly #logs = new Map<Hex, Log>();

  constructor(ledger: SimulatedLedger, network: SimulatedNetwork, facilitator: LedgerFacilitator) {
    this.#ledger = ledger;
    this.#network = network;
    this.#facilitator = facilitator;
    this.#upto = new LedgerUpto(ledger, network, facilitator.address);
  }

  signer(): FacilitatorSigner {
    return {
      getAddresses: () => [this.#facilitator.address],
      readContract: (args) => this.#read(args.address, args.functionName, args.args ?? []),
      verifyTypedData: (args) =>
        verifyTypedData({
          address: args.address,
          signature: args.signature,
          domain: args.domain,
          types: args.types as TypedData,
          primaryType: args.primaryType,
          message: args.message,
        }),
      writeContract: (args) => this.#write(args.address, args.functionName, args.args),
      sendTransaction: () => {
        throw new Error("the sandbox facilitator deploys no smart wallet");
      },
      waitForTransactionReceipt: async ({ hash }) => {
        const log = this.#logs.get(hash);
        return log ? { status: "success", logs: [log] } : { status: "reverted", logs: [] };
      },
      getCode: async ({ address }) => (this.#isContract(address) ? CONTRACT_CODE : "0x"),
    };
  }

  #isContract(address: Hex): boolean {
    return (
      isAddressEqual(address, MULTICALL3) || isUptoContract(address) || this.#token(address) !== undefined
    );
  }

  #token(address: Hex): ChainToken | undefined {
    return tokenAt(this.#network, address);
  }

  async #read(address: Hex, functionName: string, args: readonly unknown[]): Promise<unknown> {
    if (isAddressEqual(address, MULTICALL3) && functionName === "tryAggregate")
      return this.#tryAggregate(args);
    if (isUptoContract(address)) return this.#upto.read(address, functionName, args);
    const token = this.#token(address);
    if (!token) throw new Error(`execution reverted: no contract at ${address}`);
    switch (functionName) {
      case "balanceOf":
        return this.#ledger.balance(this.#network.id, args[0] as Hex, token);
      case "allowance":
        return this.#upto.allowance(args[1] as Hex);
      case "name":
        return this.#eip3009(token).name;
      case "version":
        return this.#eip3009(token).version;
      case "authorizationState":
        this.#eip3009(token);
        return (
          (await this.#ledger.authorizationTx(this.#network.id, token, args[0] as Hex, args[1] as Hex)) !==
          null
        );
      case "transferWithAuthorization":
        await this.#check(address, token, args);
        return undefined;
      default:
        throw new Error(`execution reverted: ${functionName} is not simulated`);
    }
  }

  /** Multicall3's tryAggregate(false, calls), over the simulated contracts. */
  async #tryAggregate(args: readonly unknown[]): Promise<Array<{ success: boolean; returnData: Hex }>> {
    const calls = args[1] as ReadonlyArray<{ target: Hex; callData: Hex }>;
    return Promise.all(
      calls.map(async ({ target, callData }) => {
        try {
          const call = decodeFunctionData({ abi: DIAGNOSED_ABI, data: callData });
          const result = await this.#read(target, call.functionName, call.args ?? []);
          const returnData = encodeFunctionResult({
            abi: DIAGNOSED_ABI,
            functionName: call.functionName,
            result: result as never,
          });
          return { success: true, returnData };
        } catch {
          return { success: false, returnData: "0x" as Hex };
        }
      }),
    );
  }

  /** Only USDC has EIP-3009 in the sandbox (D23). */
  #eip3009(token: ChainToken): typeof SANDBOX_USDC_DOMAIN {
    if (token !== "USDC") throw new Error(`execution reverted: ${token} has no EIP-3009`);
    return SANDBOX_USDC_DOMAIN;
  }

  /** What transferWithAuthorization checks before it moves anything, reverting as the contract would. */
  async #check(address: Hex, token: ChainToken, args: readonly unknown[]): Promise<LedgerAuthorization> {
    const domain = this.#eip3009(token);
    const [from, to, value, validAfter, validBefore, nonce] = args as [Hex, Hex, bigint, bigint, bigint, Hex];
    const signature =
      args.length === 9
        ? serializeSignature({ v: BigInt(args[6] as number), r: args[7] as Hex, s: args[8] as Hex })
        : (args[6] as Hex);
    const authorization = { from, to, value, validAfter, validBefore, nonce };
    const typedData = {
      domain: { ...domain, chainId: this.#network.chainId, verifyingContract: address },
      types: TRANSFER_WITH_AUTHORIZATION_TYPES,
      primaryType: "TransferWithAuthorization",
      message: authorization,
    } as const;
    if (!signedBy(from, typedData, signature))
      throw new Error("execution reverted: ERC3009InvalidSignature (invalid signature)");
    const now = BigInt(Math.floor(Date.now() / 1000));
    if (now <= validAfter) throw new Error("execution reverted: authorization is not yet valid");
    if (now >= validBefore) throw new Error("execution reverted: authorization is expired");
    const { usedBy, balance } = await this.#ledger.authorizationCheck(this.#network.id, token, from, nonce);
    if (usedBy !== null)
      throw new Error("execution reverted: authorization is used (AuthorizationUsedOrCanceled)");
    if (balance < value)
      throw new Error("execution reverted: ERC20InsufficientBalance (transfer amount exceeds balance)");
    return authorization;
  }

  async #write(address: Hex, functionName: string, args: readonly unknown[]): Promise<Hex> {
    if (isAddressEqual(address, UPTO_PROXY_ADDRESS) && functionName === "settle") {
      const call = await this.#upto.check(settleArgs(args));
      const transfer = { from: call.owner, to: call.witness.to, value: call.amount };
      return this.#transfer(call.permit.permitted.token, transfer);
    }
    const token = this.#token(address);
    if (!token || functionName !== "transferWithAuthorization")
      throw new Error(`execution reverted: ${functionName} is not simulated`);
    const authorization = await this.#check(address, token, args);
    return this.#transfer(address, authorization);
  }

  /** Makes the transfer on the ledger, with the Transfer log its receipt shows. */
  async #transfer(token: Hex, transfer: { from: Hex; to: Hex; value: bigint }): Promise<Hex> {
    const hash = await this.#facilitator.settle(transfer);
    const topics = encodeEventTopics({
      abi: TOKEN_ABI,
      eventName: "Transfer",
      args: { from: transfer.from, to: transfer.to },
    }) as [Hex, ...Hex[]];
    const data = encodeAbiParameters([{ type: "uint256" }], [transfer.value]);
    this.#logs.set(hash, receiptLog({ address: token, topics, data }, hash));
    return hash;
  }
}
