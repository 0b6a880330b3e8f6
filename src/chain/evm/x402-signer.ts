import { ExactEvmScheme } from "@x402/evm/exact/facilitator";
import { UptoEvmScheme } from "@x402/evm/upto/facilitator";
import {
  type Abi,
  concat,
  encodeFunctionData,
  type Hex,
  type PublicClient,
  parseAbi,
  type TypedData,
} from "viem";
import {
  type AuthorizationUse,
  type FacilitatorWallet,
  receiptLog,
  type X402SchemeFactory,
} from "../x402-scheme.ts";

// x402's `exact` and `upto` schemes on an EVM chain (chain/x402-scheme.ts): @x402/evm's facilitator, with a
// signer that reads the chain through the network's client and sends through the facilitator
// wallet (recorded before broadcast, nonce-ordered across instances) instead of viem's in-memory
// nonce manager. The types x402 gives its signer are loose (`abi: readonly unknown[]`): they are
// narrowed to viem's here, the one boundary where x402 and viem meet.

/** Headroom over the node's gas estimate: state may change a little between estimate and inclusion. */
const GAS_HEADROOM_PERCENT = 120n;

export function evmX402Scheme(client: PublicClient): X402SchemeFactory {
  return (wallet, scheme) => {
    const signer = facilitatorSigner(client, wallet);
    return scheme === "upto" ? new UptoEvmScheme(signer) : new ExactEvmScheme(signer);
  };
}

type FacilitatorSigner = ConstructorParameters<typeof ExactEvmScheme>[0];

function facilitatorSigner(client: PublicClient, wallet: FacilitatorWallet): FacilitatorSigner {
  return {
    getAddresses: () => [wallet.address],
    // From the facilitator wallet: upto's proxy lets only the facilitator its payer named settle,
    // and x402 simulates the settle with this read.
    readContract: (args) =>
      client.readContract({
        account: wallet.address,
        address: args.address,
        abi: args.abi as Abi,
        functionName: args.functionName,
        args: args.args ?? [],
      }),
    verifyTypedData: (args) =>
      client.verifyTypedData({
        address: args.address,
        signature: args.signature,
        domain: args.domain,
        types: args.types as TypedData,
        primaryType: args.primaryType,
        message: args.message,
      }),
    writeContract: async (args) => {
      const call = encodeFunctionData({
        abi: args.abi as Abi,
        functionName: args.functionName,
        args: args.args,
      });
      const data = args.dataSuffix ? concat([call, args.dataSuffix]) : call;
      const gas =
        args.gas ??
        ((await client.estimateGas({ account: wallet.address, to: args.address, data })) *
          GAS_HEADROOM_PERCENT) /
          100n;
      return wallet.send({ to: args.address, data, gas });
    },
    sendTransaction: () => {
      // Only ERC-6492 deployments send one, and no factory is allowed (ExactEvmScheme's default).
      throw new Error("the facilitator deploys no smart wallet");
    },
    waitForTransactionReceipt: async ({ hash }) => {
      const { status, logs } = await wallet.outcome(hash);
      return { status, logs: logs.map((log) => receiptLog(log, hash)) };
    },
    getCode: ({ address }) => client.getCode({ address }),
  };
}

const AUTHORIZATION_ABI = parseAbi([
  "function authorizationState(address authorizer, bytes32 nonce) view returns (bool)",
  "event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)",
]);
/**
 * How far back the transaction that used an authorization is looked for: an agent's authorization
 * is valid for minutes (its requirement's maxTimeoutSeconds), and is looked at while it is open.
 */
const USE_LOOKBACK_BLOCKS = 10_000n;

/** Whether `token`'s EIP-3009 `nonce` of `authorizer` was used, and the transaction (AuthorizationUsed) that did. */
export async function authorizationUse(
  client: PublicClient,
  token: Hex,
  authorizer: Hex,
  nonce: Hex,
): Promise<AuthorizationUse> {
  const used = await client.readContract({
    address: token,
    abi: AUTHORIZATION_ABI,
    functionName: "authorizationState",
    args: [authorizer, nonce],
  });
  if (!used) return { used: false };
  // Not viem's cached block number (seconds old): the state read above may be of a newer block,
  // and the search runs to the latest one, so the block that used the nonce is always in it.
  const head = await client.getBlockNumber({ cacheTime: 0 });
  const logs = await client.getLogs({
    address: token,
    event: AUTHORIZATION_ABI[1],
    args: { authorizer, nonce },
    fromBlock: head > USE_LOOKBACK_BLOCKS ? head - USE_LOOKBACK_BLOCKS : 0n,
    toBlock: "latest",
  });
  return { used: true, txHash: logs[0]?.transactionHash ?? null };
}
