import {
  PERMIT2_ADDRESS,
  uptoPermit2WitnessTypes,
  x402UptoPermit2ProxyABI,
  x402UptoPermit2ProxyAddress,
} from "@x402/evm";
import { type Hex, isAddressEqual, maxUint256, zeroAddress } from "viem";
import { permit2NonceKey } from "../../domain/x402.ts";
import type { SimulatedLedger } from "./ledger.ts";
import { type SimulatedNetwork, tokenAt } from "./networks.ts";
import { signedBy } from "./signatures.ts";

// x402's `upto` scheme on a simulated network (D23): Permit2 and x402's upto proxy as the
// sandbox's ledger "has" them, answering @x402/evm's UptoEvmScheme as the contracts would. The
// proxy's `settle` checks what the contract checks (the facilitator the payer named sends it, not
// before validAfter, at most the permitted amount) and Permit2's (the deadline, the payer's
// signature over the witness transfer to the proxy, the nonce unused, the balance). One thing is
// simpler than on a chain: every sandbox payer has approved Permit2 for any amount (a payer
// approves it once per token on a chain; there is no approval to make on the ledger).

export const UPTO_PROXY_ADDRESS: Hex = x402UptoPermit2ProxyAddress;
export { PERMIT2_ADDRESS };

/** The arguments of the proxy's `settle(permit, amount, owner, witness, signature)`. */
export interface UptoSettle {
  permit: { permitted: { token: Hex; amount: bigint }; nonce: bigint; deadline: bigint };
  amount: bigint;
  owner: Hex;
  witness: { to: Hex; facilitator: Hex; validAfter: bigint };
  signature: Hex;
}

export function isUptoContract(address: Hex): boolean {
  return isAddressEqual(address, PERMIT2_ADDRESS) || isAddressEqual(address, UPTO_PROXY_ADDRESS);
}

export class LedgerUpto {
  readonly #ledger: SimulatedLedger;
  readonly #network: SimulatedNetwork;
  /** The workspace's facilitator wallet: the one sender the proxy takes. */
  readonly #facilitator: Hex;

  constructor(ledger: SimulatedLedger, network: SimulatedNetwork, facilitator: Hex) {
    this.#ledger = ledger;
    this.#network = network;
    this.#facilitator = facilitator;
  }

  /** A view (or a simulated call) of Permit2 or the proxy. */
  async read(address: Hex, functionName: string, args: readonly unknown[]): Promise<unknown> {
    if (isAddressEqual(address, UPTO_PROXY_ADDRESS)) {
      if (functionName === "PERMIT2") return PERMIT2_ADDRESS;
      if (functionName === "settle") {
        await this.check(settleArgs(args));
        return undefined;
      }
    }
    throw new Error(`execution reverted: ${functionName} is not simulated`);
  }

  /** An ERC-20 `allowance(owner, PERMIT2)` on the ledger: every sandbox payer has approved Permit2. */
  allowance(spender: Hex): bigint {
    return isAddressEqual(spender, PERMIT2_ADDRESS) ? maxUint256 : 0n;
  }

  /** What the proxy's and Permit2's settle check before moving anything, reverting as they would. */
  async check(call: UptoSettle): Promise<UptoSettle> {
    const { permit, amount, owner, witness, signature } = call;
    if (!isAddressEqual(witness.facilitator, this.#facilitator))
      throw new Error("execution reverted: UnauthorizedFacilitator");
    if (isAddressEqual(owner, zeroAddress)) throw new Error("execution reverted: InvalidOwner");
    if (isAddressEqual(witness.to, zeroAddress)) throw new Error("execution reverted: InvalidDestination");
    const now = BigInt(Math.floor(Date.now() / 1000));
    if (now < witness.validAfter) throw new Error("execution reverted: PaymentTooEarly");
    if (amount > permit.permitted.amount) throw new Error("execution reverted: AmountExceedsPermitted");
    if (now > permit.deadline) throw new Error(`execution reverted: SignatureExpired(${permit.deadline})`);
    const token = tokenAt(this.#network, permit.permitted.token);
    if (!token) throw new Error(`execution reverted: no token at ${permit.permitted.token}`);
    const typedData = {
      domain: { name: "Permit2", chainId: this.#network.chainId, verifyingContract: PERMIT2_ADDRESS },
      types: uptoPermit2WitnessTypes,
      primaryType: "PermitWitnessTransferFrom",
      message: {
        permitted: permit.permitted,
        spender: UPTO_PROXY_ADDRESS,
        nonce: permit.nonce,
        deadline: permit.deadline,
        witness,
      },
    } as const;
    if (!signedBy(owner, typedData, signature)) throw new Error("execution reverted: InvalidSigner");
    const key = permit2NonceKey(permit.nonce);
    const { usedBy, balance } = await this.#ledger.authorizationCheck(this.#network.id, token, owner, key);
    if (usedBy !== null) throw new Error("execution reverted: InvalidNonce");
    if (balance < amount)
      throw new Error("execution reverted: ERC20InsufficientBalance (transfer amount exceeds balance)");
    return call;
  }
}

/** The proxy's settle arguments, as x402 passes them (buildUptoPermit2SettleArgs). */
export function settleArgs(args: readonly unknown[]): UptoSettle {
  const [permit, amount, owner, witness, signature] = args as [
    UptoSettle["permit"],
    bigint,
    Hex,
    UptoSettle["witness"],
    Hex,
  ];
  return { permit, amount, owner, witness, signature };
}

/** The proxy's ABI, for decoding what x402's diagnosis asks of it through Multicall3. */
export const UPTO_PROXY_ABI = x402UptoPermit2ProxyABI;
