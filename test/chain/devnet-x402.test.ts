import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { type FacilitatorEvmSigner, toFacilitatorEvmSigner } from "@x402/evm";
import { ExactEvmScheme as ExactEvmClientScheme } from "@x402/evm/exact/client";
import { ExactEvmScheme as ExactEvmFacilitatorScheme } from "@x402/evm/exact/facilitator";
import {
  type Abi,
  type Address,
  createPublicClient,
  createWalletClient,
  encodeFunctionData,
  erc20Abi,
  type Hex,
  http,
  type PublicClient,
  parseAbi,
  parseSignature,
  parseUnits,
  type TypedData,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from "../../src/chain/eip3009.ts";
import {
  type Devnet,
  MULTICALL3_ABI,
  MULTICALL3_ADDRESS,
  startDevnet,
  TOKENS,
  USDC_EIP712,
} from "../../src/devnet/chain.ts";
import { creditToken } from "../support/devnet-credit.ts";

// The devnet as x402's `exact` scheme needs it: USDC with EIP-3009 (transferWithAuthorization under
// the EIP-712 domain "USDC" version "2"), Multicall3 at its canonical address (the facilitator's
// failure diagnosis calls it) and a chain clock that keeps to the wall clock (an authorization's
// validBefore is checked against the block's timestamp). Ends with x402's own client and facilitator.

const USDC_ABI = parseAbi([
  "function name() view returns (string)",
  "function version() view returns (string)",
  "function balanceOf(address account) view returns (uint256)",
  "function authorizationState(address authorizer, bytes32 nonce) view returns (bool)",
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)",
  "error ERC3009InvalidSignature()",
  "error ERC3009InvalidAuthorizationTime(uint256 validAfter, uint256 validBefore)",
  "error ERC3009UsedAuthorization(address authorizer, bytes32 nonce)",
]);

const usdc = (amount: string) => parseUnits(amount, TOKENS.USDC.decimals);
const freshAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const randomNonce = (): Hex => `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex")}`;
const nowSeconds = () => BigInt(Math.floor(Date.now() / 1000));

interface Authorization {
  from: Address;
  to: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
}

/** A facilitator signer over viem clients, as a facilitator would build it for a real chain. */
function facilitatorSigner(devnet: Devnet, key: Hex): FacilitatorEvmSigner {
  const account = privateKeyToAccount(key);
  const transport = http(devnet.rpcUrl, { retryCount: 0 });
  const chain = createPublicClient({ chain: devnet.chain, transport, pollingInterval: 50 });
  const wallet = createWalletClient({ chain: devnet.chain, transport, account });
  // x402 types its calls loosely (abi: readonly unknown[]); viem checks them against an Abi.
  return toFacilitatorEvmSigner({
    address: account.address,
    readContract: ({ address, abi, functionName, args }) =>
      chain.readContract({ address, abi: abi as Abi, functionName, args }),
    verifyTypedData: ({ types, ...rest }) => chain.verifyTypedData({ ...rest, types: types as TypedData }),
    writeContract: ({ address, abi, functionName, args, gas, dataSuffix }) =>
      wallet.writeContract({ address, abi: abi as Abi, functionName, args, gas, dataSuffix }),
    sendTransaction: ({ to, data }) => wallet.sendTransaction({ to, data }),
    waitForTransactionReceipt: ({ hash, timeout }) => chain.waitForTransactionReceipt({ hash, timeout }),
    getCode: ({ address }) => chain.getCode({ address }),
  });
}

describe("devnet for x402 (EIP-3009 USDC, Multicall3)", () => {
  let devnet: Devnet;
  let client: PublicClient;
  let token: Address;

  beforeAll(async () => {
    devnet = await startDevnet();
    client = createPublicClient({
      chain: devnet.chain,
      transport: http(devnet.rpcUrl, { retryCount: 0 }),
      pollingInterval: 50,
    });
    token = devnet.tokens.USDC;
  });

  afterAll(async () => {
    await devnet?.stop();
  });

  const balanceOf = (account: Address) =>
    client.readContract({ address: token, abi: USDC_ABI, functionName: "balanceOf", args: [account] });

  /** `authorization` signed by the payer under USDC's EIP-712 domain. */
  function sign(authorization: Authorization, key: Hex = devnet.accounts.payer.privateKey): Promise<Hex> {
    return privateKeyToAccount(key).signTypedData({
      domain: { ...USDC_EIP712, chainId: devnet.chainId, verifyingContract: token },
      types: TRANSFER_WITH_AUTHORIZATION_TYPES,
      primaryType: "TransferWithAuthorization",
      message: authorization,
    });
  }

  /** Submits transferWithAuthorization from the treasury account (not the payer: a relayer). */
  async function submit(authorization: Authorization, signature: Hex) {
    const { v, r, s } = parseSignature(signature);
    if (v === undefined) throw new Error("expected a legacy (v, r, s) signature");
    const relayer = createWalletClient({
      chain: devnet.chain,
      transport: http(devnet.rpcUrl, { retryCount: 0 }),
      account: privateKeyToAccount(devnet.accounts.treasury.privateKey),
    });
    const { from, to, value, validAfter, validBefore, nonce } = authorization;
    const hash = await relayer.writeContract({
      address: token,
      abi: USDC_ABI,
      functionName: "transferWithAuthorization",
      args: [from, to, value, validAfter, validBefore, nonce, Number(v), r, s],
    });
    return client.waitForTransactionReceipt({ hash });
  }

  const authorizationFor = (
    to: Address,
    value: bigint,
    validBefore = nowSeconds() + 300n,
  ): Authorization => ({
    from: devnet.accounts.payer.address,
    to,
    value,
    validAfter: 0n,
    validBefore,
    nonce: randomNonce(),
  });

  it('has USDC\'s EIP-712 domain "USDC" version "2", which name() and version() report too', async () => {
    const { domain } = await client.getEip712Domain({ address: token });
    expect(domain).toEqual({
      name: "USDC",
      version: "2",
      chainId: devnet.chainId,
      verifyingContract: token,
      salt: `0x${"0".repeat(64)}`,
    });
    expect(USDC_EIP712).toEqual({ name: "USDC", version: "2" });
    // x402's facilitator compares these with the payment's `extra` when a settlement would fail.
    expect(await client.readContract({ address: token, abi: USDC_ABI, functionName: "name" })).toBe("USDC");
    expect(await client.readContract({ address: token, abi: USDC_ABI, functionName: "version" })).toBe("2");
  });

  it("keeps USDC's balances at storage slot 0, where creditToken writes them", async () => {
    const holder = freshAddress();
    await creditToken(devnet, "USDC", holder, "7.25");
    expect(await balanceOf(holder)).toBe(usdc("7.25"));
    await creditToken(devnet, "USDC", holder, 750_000n);
    expect(await balanceOf(holder)).toBe(usdc("8"));
  });

  it("moves the payer's USDC on a transferWithAuthorization sent by another account, once", async () => {
    const payer = devnet.accounts.payer.address;
    const to = freshAddress();
    const authorization = authorizationFor(to, usdc("12.5"));
    const signature = await sign(authorization);
    const payerBefore = await balanceOf(payer);
    const payerEth = await client.getBalance({ address: payer });

    const receipt = await submit(authorization, signature);
    expect(receipt.status).toBe("success");
    expect(receipt.from.toLowerCase()).toBe(devnet.accounts.treasury.address.toLowerCase());
    expect(await balanceOf(to)).toBe(usdc("12.5"));
    expect(await balanceOf(payer)).toBe(payerBefore - usdc("12.5"));
    expect(await client.getBalance({ address: payer })).toBe(payerEth); // the payer paid no gas
    const used = await client.readContract({
      address: token,
      abi: USDC_ABI,
      functionName: "authorizationState",
      args: [payer, authorization.nonce],
    });
    expect(used).toBe(true);

    await expect(submit(authorization, signature)).rejects.toThrow(/ERC3009UsedAuthorization/);
    expect(await balanceOf(to)).toBe(usdc("12.5"));
  });

  it("refuses an authorization that has expired, is not valid yet or was signed by someone else", async () => {
    const to = freshAddress();
    const expired = authorizationFor(to, usdc("1"), nowSeconds() - 60n);
    await expect(submit(expired, await sign(expired))).rejects.toThrow(/ERC3009InvalidAuthorizationTime/);

    const early = { ...authorizationFor(to, usdc("1")), validAfter: nowSeconds() + 120n };
    await expect(submit(early, await sign(early))).rejects.toThrow(/ERC3009InvalidAuthorizationTime/);

    const forged = authorizationFor(to, usdc("1"));
    const stranger = generatePrivateKey();
    await expect(submit(forged, await sign(forged, stranger))).rejects.toThrow(/ERC3009InvalidSignature/);
    expect(await balanceOf(to)).toBe(0n);
  });

  it("has Multicall3 at its canonical address (aggregate3, tryAggregate, viem's multicall)", async () => {
    const payer = devnet.accounts.payer.address;
    const holder = freshAddress();
    await creditToken(devnet, "USDC", holder, "3");
    const balanceCall = (account: Address) =>
      encodeFunctionData({ abi: erc20Abi, functionName: "balanceOf", args: [account] });

    const results = await client.readContract({
      address: MULTICALL3_ADDRESS,
      abi: MULTICALL3_ABI,
      functionName: "aggregate3",
      args: [
        [
          { target: token, allowFailure: false, callData: balanceCall(payer) },
          { target: token, allowFailure: false, callData: balanceCall(holder) },
          { target: devnet.tokens.DAI, allowFailure: true, callData: "0xdeadbeef" },
        ],
      ],
    });
    expect(results.map((r) => r.success)).toEqual([true, true, false]);
    expect(BigInt(results[0]?.returnData ?? "0x")).toBe(await balanceOf(payer));
    expect(BigInt(results[1]?.returnData ?? "0x")).toBe(usdc("3"));

    // x402's facilitator diagnoses with tryAggregate(false, …): a failed call is reported, not thrown.
    const tried = await client.readContract({
      address: MULTICALL3_ADDRESS,
      abi: MULTICALL3_ABI,
      functionName: "tryAggregate",
      args: [
        false,
        [
          { target: token, callData: balanceCall(holder) },
          { target: token, callData: "0xdeadbeef" },
        ],
      ],
    });
    expect(tried.map((r) => r.success)).toEqual([true, false]);
    await expect(
      client.readContract({
        address: MULTICALL3_ADDRESS,
        abi: MULTICALL3_ABI,
        functionName: "aggregate3",
        args: [[{ target: token, allowFailure: false, callData: "0xdeadbeef" }]],
      }),
    ).rejects.toThrow(/Multicall3: call failed/);

    // devnet.chain names it, so viem's multicall finds it.
    const [balance, symbol] = await client.multicall({
      contracts: [
        { address: token, abi: erc20Abi, functionName: "balanceOf", args: [holder] },
        { address: devnet.tokens.DAI, abi: erc20Abi, functionName: "symbol" },
      ],
      allowFailure: false,
    });
    expect(balance).toBe(usdc("3"));
    expect(symbol).toBe("DAI");
    const [ethBalance, blockNumber] = await Promise.all([
      client.readContract({
        address: MULTICALL3_ADDRESS,
        abi: MULTICALL3_ABI,
        functionName: "getEthBalance",
        args: [payer],
      }),
      client.readContract({
        address: MULTICALL3_ADDRESS,
        abi: MULTICALL3_ABI,
        functionName: "getBlockNumber",
      }),
    ]);
    expect(ethBalance).toBe(await client.getBalance({ address: payer }));
    expect(blockNumber).toBeGreaterThan(0n);
  });

  it("keeps the chain's clock at the wall clock's through 50 quick transactions", async () => {
    // One block per transaction: were each a second later than the last, an authorization's
    // validAfter/validBefore (wall-clock seconds) would be judged against a clock running ahead.
    const sender = createWalletClient({
      chain: devnet.chain,
      transport: http(devnet.rpcUrl, { retryCount: 0 }),
      account: privateKeyToAccount(devnet.accounts.gasFunder.privateKey),
    });
    const first = await client.getBlockNumber({ cacheTime: 0 });
    const to = freshAddress();
    for (let i = 0; i < 50; i++) await sender.sendTransaction({ to, value: 1n });
    const latest = await client.getBlock({ blockTag: "latest" });
    expect(latest.number - first).toBeGreaterThanOrEqual(50n);
    expect(Number(latest.timestamp)).toBeLessThanOrEqual(Date.now() / 1000 + 1);
  });

  describe("x402's own client and facilitator (exact, EIP-3009)", () => {
    let facilitator: ExactEvmFacilitatorScheme;
    let requirements: PaymentRequirements;

    beforeAll(() => {
      facilitator = new ExactEvmFacilitatorScheme(
        facilitatorSigner(devnet, devnet.accounts.treasury.privateKey),
      );
      requirements = {
        scheme: "exact",
        network: `eip155:${devnet.chainId}`,
        asset: token,
        amount: usdc("0.25").toString(),
        payTo: freshAddress(),
        maxTimeoutSeconds: 120,
        extra: { ...USDC_EIP712 },
      };
    });

    async function paymentFrom(key: Hex, accepted: PaymentRequirements): Promise<PaymentPayload> {
      const scheme = new ExactEvmClientScheme(privateKeyToAccount(key));
      const { payload } = await scheme.createPaymentPayload(2, accepted);
      return { x402Version: 2, accepted, payload };
    }

    it("verifies and settles the payer's payment", async () => {
      const payer = devnet.accounts.payer.address;
      const payment = await paymentFrom(devnet.accounts.payer.privateKey, requirements);
      expect(await facilitator.verify(payment, requirements)).toMatchObject({ isValid: true, payer });

      const settled = await facilitator.settle(payment, requirements);
      expect(settled).toMatchObject({ success: true, payer, network: requirements.network });
      expect(settled.transaction).toMatch(/^0x[0-9a-f]{64}$/);
      expect(await balanceOf(requirements.payTo as Address)).toBe(usdc("0.25"));
      // Its nonce is spent now: the same payment no longer verifies (found by the diagnosis).
      expect(await facilitator.verify(payment, requirements)).toMatchObject({
        isValid: false,
        invalidReason: "invalid_exact_evm_nonce_already_used",
      });
    });

    it("refuses a payment to another address than payTo", async () => {
      const payment = await paymentFrom(devnet.accounts.payer.privateKey, requirements);
      const elsewhere = { ...requirements, payTo: freshAddress() };
      expect(await facilitator.verify(payment, elsewhere)).toMatchObject({
        isValid: false,
        invalidReason: "invalid_exact_evm_recipient_mismatch",
      });
    });

    it("names a payer's missing balance, through Multicall3 (the diagnosis of a failed simulation)", async () => {
      const broke = generatePrivateKey();
      const payment = await paymentFrom(broke, requirements);
      expect(await facilitator.verify(payment, requirements)).toMatchObject({
        isValid: false,
        invalidReason: "invalid_exact_evm_insufficient_balance",
        payer: privateKeyToAccount(broke).address,
      });
    });
  });
});
