import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import {
  type FacilitatorEvmSigner,
  isUptoPermit2Payload,
  toFacilitatorEvmSigner,
  type UptoPermit2Payload,
  PERMIT2_ADDRESS as X402_PERMIT2_ADDRESS,
  x402UptoPermit2ProxyABI,
  x402UptoPermit2ProxyAddress,
} from "@x402/evm";
import { UptoEvmScheme as UptoEvmClientScheme } from "@x402/evm/upto/client";
import { UptoEvmScheme as UptoEvmFacilitatorScheme } from "@x402/evm/upto/facilitator";
import {
  type Abi,
  type AbiParameter,
  type Address,
  BaseError,
  ContractFunctionRevertedError,
  createPublicClient,
  createWalletClient,
  erc20Abi,
  getTypesForEIP712Domain,
  type Hex,
  hashDomain,
  http,
  keccak256,
  maxUint256,
  type PublicClient,
  parseEther,
  parseEventLogs,
  type TypedData,
  toHex,
  zeroHash,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Devnet,
  PERMIT2_ABI,
  PERMIT2_ADDRESS,
  rpc,
  startDevnet,
  USDC_EIP712,
  X402_UPTO_PROXY_ADDRESS,
} from "../../src/devnet/chain.ts";
import { x402UptoPermit2ProxyArtifact } from "../../src/devnet/compile.ts";
import { creditToken } from "../support/devnet-credit.ts";

// The devnet as x402's `upto` scheme needs it: Permit2 and x402's upto Permit2 proxy at their
// canonical addresses (src/devnet/permit2.ts), our own contracts standing in for the real ones.
// Fidelity is judged by @x402/evm itself: its upto client signs (EIP-712 for Permit2 with the
// witness types x402 defines), its upto facilitator verifies, simulates and settles against them.

const PERMITTED = 5_000_000n;
const SETTLED = 1_234_567n;
/** The proxy's ABI with Permit2's errors, which a settle passes on, so that viem decodes them. */
const SETTLE_ABI = [...x402UptoPermit2ProxyABI, ...PERMIT2_ABI];
const freshAddress = () => privateKeyToAccount(generatePrivateKey()).address;

/**
 * A facilitator signer over viem clients. Its reads are made from the facilitator's address: the
 * proxy lets only the witness's facilitator settle, so x402's simulation of settle (a readContract)
 * must come from there, as a viem wallet client's reads do ("nobody": reads without a sender).
 */
function facilitatorSigner(
  devnet: Devnet,
  key: Hex,
  readFrom: "facilitator" | "nobody" = "facilitator",
): FacilitatorEvmSigner {
  const account = privateKeyToAccount(key);
  const reader = readFrom === "facilitator" ? account.address : undefined;
  const transport = http(devnet.rpcUrl, { retryCount: 0 });
  const chain = createPublicClient({ chain: devnet.chain, transport, pollingInterval: 50 });
  const wallet = createWalletClient({ chain: devnet.chain, transport, account });
  // x402 types its calls loosely (abi: readonly unknown[]); viem checks them against an Abi.
  return toFacilitatorEvmSigner({
    address: account.address,
    readContract: ({ address, abi, functionName, args }) =>
      chain.readContract({ address, abi: abi as Abi, functionName, args, account: reader }),
    verifyTypedData: ({ types, ...rest }) => chain.verifyTypedData({ ...rest, types: types as TypedData }),
    writeContract: ({ address, abi, functionName, args, gas, dataSuffix }) =>
      wallet.writeContract({ address, abi: abi as Abi, functionName, args, gas, dataSuffix }),
    sendTransaction: ({ to, data }) => wallet.sendTransaction({ to, data }),
    waitForTransactionReceipt: ({ hash, timeout }) => chain.waitForTransactionReceipt({ hash, timeout }),
    getCode: ({ address }) => chain.getCode({ address }),
  });
}

/** Each item of an ABI as one line: kind, name, parameters (tuples spelled out), mutability, outputs. */
function signatures(abi: Abi): string[] {
  const param = (p: AbiParameter): string => {
    const components = "components" in p ? `(${p.components.map(param).join(",")})` : "";
    const indexed = "indexed" in p && p.indexed ? " indexed" : "";
    return `${components}${p.type}${indexed}`;
  };
  return abi.map((item) => {
    const name = "name" in item ? item.name : "";
    const inputs = "inputs" in item ? item.inputs.map(param).join(",") : "";
    const mutability = "stateMutability" in item ? ` ${item.stateMutability}` : "";
    const outputs = "outputs" in item ? ` returns (${item.outputs.map(param).join(",")})` : "";
    return `${item.type} ${name}(${inputs})${mutability}${outputs}`;
  });
}

/** The custom error a contract call reverted with, by name ("" if it did not revert with one). */
async function revertName(call: Promise<unknown>): Promise<string> {
  try {
    await call;
  } catch (err) {
    if (err instanceof BaseError) {
      const reverted = err.walk((e) => e instanceof ContractFunctionRevertedError);
      if (reverted instanceof ContractFunctionRevertedError) {
        return reverted.data?.errorName ?? `undecoded revert ${reverted.raw ?? "(no data)"}`;
      }
    }
    throw err;
  }
  return "";
}

describe("devnet for x402's upto scheme (Permit2, x402UptoPermit2Proxy)", () => {
  let devnet: Devnet;
  let client: PublicClient;
  let usdcToken: Address;
  let facilitatorKey: Hex;
  let facilitatorAddress: Address;
  let facilitator: UptoEvmFacilitatorScheme;

  beforeAll(async () => {
    devnet = await startDevnet();
    client = createPublicClient({
      chain: devnet.chain,
      transport: http(devnet.rpcUrl, { retryCount: 0 }),
      pollingInterval: 50,
    });
    usdcToken = devnet.tokens.USDC;
    facilitatorKey = generatePrivateKey();
    facilitatorAddress = privateKeyToAccount(facilitatorKey).address;
    await rpc(devnet.rpcUrl, "hardhat_setBalance", [facilitatorAddress, toHex(parseEther("10"))]);
    facilitator = new UptoEvmFacilitatorScheme(facilitatorSigner(devnet, facilitatorKey));
    // The payer lets Permit2 move its USDC, as x402's createPermit2ApprovalTx would have it do.
    const payer = createWalletClient({
      chain: devnet.chain,
      transport: http(devnet.rpcUrl, { retryCount: 0 }),
      account: privateKeyToAccount(devnet.accounts.payer.privateKey),
    });
    const hash = await payer.writeContract({
      address: usdcToken,
      abi: erc20Abi,
      functionName: "approve",
      args: [PERMIT2_ADDRESS, maxUint256],
    });
    expect((await client.waitForTransactionReceipt({ hash })).status).toBe("success");
  });

  afterAll(async () => {
    await devnet?.stop();
  });

  const balanceOf = (account: Address) =>
    client.readContract({ address: usdcToken, abi: erc20Abi, functionName: "balanceOf", args: [account] });

  const requirementsFor = (payTo: Address, amount: bigint, facilitatorFor = facilitatorAddress) =>
    ({
      scheme: "upto",
      network: `eip155:${devnet.chainId}`,
      asset: usdcToken,
      amount: amount.toString(),
      payTo,
      maxTimeoutSeconds: 300,
      extra: { ...USDC_EIP712, facilitatorAddress: facilitatorFor },
    }) satisfies PaymentRequirements;

  /** An upto payment of at most `accepted.amount`, signed by x402's own upto client. */
  async function paymentFrom(key: Hex, accepted: PaymentRequirements): Promise<PaymentPayload> {
    const scheme = new UptoEvmClientScheme(privateKeyToAccount(key));
    const { payload } = await scheme.createPaymentPayload(2, accepted);
    return { x402Version: 2, accepted, payload };
  }

  it("has the contracts at the addresses @x402/evm uses, the proxy with x402's ABI", async () => {
    expect(PERMIT2_ADDRESS).toBe(X402_PERMIT2_ADDRESS);
    expect(X402_UPTO_PROXY_ADDRESS).toBe(x402UptoPermit2ProxyAddress);
    expect(await client.getCode({ address: PERMIT2_ADDRESS })).toMatch(/^0x[0-9a-f]{100,}$/);
    expect(await client.getCode({ address: X402_UPTO_PROXY_ADDRESS })).toMatch(/^0x[0-9a-f]{100,}$/);

    // Every function, error and event of x402's ABI is the artifact's, with the same parameters,
    // outputs and mutability (internal type names aside).
    const ours = signatures((await x402UptoPermit2ProxyArtifact()).abi);
    expect(ours).toEqual(expect.arrayContaining(signatures(x402UptoPermit2ProxyABI)));

    const read = (functionName: "PERMIT2" | "WITNESS_TYPEHASH" | "WITNESS_TYPE_STRING") =>
      client.readContract({ address: X402_UPTO_PROXY_ADDRESS, abi: x402UptoPermit2ProxyABI, functionName });
    expect(await read("PERMIT2")).toBe(PERMIT2_ADDRESS);
    expect(await read("WITNESS_TYPEHASH")).toBe(
      keccak256(toHex("Witness(address to,address facilitator,uint256 validAfter)")),
    );
    expect(await read("WITNESS_TYPE_STRING")).toBe(
      "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,address facilitator,uint256 validAfter)",
    );
  });

  it("has Permit2's EIP-712 domain (name, chainId, verifyingContract; no version) at its address", async () => {
    const domain = { name: "Permit2", chainId: devnet.chainId, verifyingContract: PERMIT2_ADDRESS };
    const types = {
      EIP712Domain: [
        { name: "name", type: "string" },
        { name: "chainId", type: "uint256" },
        { name: "verifyingContract", type: "address" },
      ],
    } as const;
    // The domain's fields are those viem derives from what x402 signs with.
    expect(getTypesForEIP712Domain({ domain })).toEqual(types.EIP712Domain);
    const expected = hashDomain({ domain: { ...domain, chainId: BigInt(devnet.chainId) }, types });
    expect(
      await client.readContract({
        address: PERMIT2_ADDRESS,
        abi: PERMIT2_ABI,
        functionName: "DOMAIN_SEPARATOR",
      }),
    ).toBe(expected);
  });

  it("verifies x402's upto payment and settles part of it, once", async () => {
    const payer = devnet.accounts.payer.address;
    const payTo = freshAddress();
    const accepted = requirementsFor(payTo, PERMITTED);
    const payment = await paymentFrom(devnet.accounts.payer.privateKey, accepted);
    expect(await facilitator.verify(payment, accepted)).toMatchObject({ isValid: true, payer });

    const payerBefore = await balanceOf(payer);
    const settleRequirements = { ...accepted, amount: SETTLED.toString() };
    const settled = await facilitator.settle(payment, settleRequirements);
    expect(settled).toMatchObject({ success: true, payer, amount: SETTLED.toString() });
    expect(settled.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await balanceOf(payTo)).toBe(SETTLED);
    expect(await balanceOf(payer)).toBe(payerBefore - SETTLED);

    // Permit2 marked the nonce used in the payer's bitmap (word nonce >> 8, bit nonce & 0xff).
    const nonce = BigInt(uptoPayloadOf(payment).permit2Authorization.nonce);
    const word = await client.readContract({
      address: PERMIT2_ADDRESS,
      abi: PERMIT2_ABI,
      functionName: "nonceBitmap",
      args: [payer, nonce >> 8n],
    });
    expect((word >> (nonce & 0xffn)) & 1n).toBe(1n);

    // The same payment again: x402's simulation fails (the nonce is used), and no money moves.
    const again = await facilitator.settle(payment, settleRequirements);
    expect(again).toMatchObject({
      success: false,
      errorReason: "permit2_simulation_failed",
      transaction: "",
    });
    expect(await balanceOf(payTo)).toBe(SETTLED);
    expect(await balanceOf(payer)).toBe(payerBefore - SETTLED);
  });

  it("refuses to settle more than the permitted amount", async () => {
    const payTo = freshAddress();
    const accepted = requirementsFor(payTo, PERMITTED);
    const payment = await paymentFrom(devnet.accounts.payer.privateKey, accepted);
    const settled = await facilitator.settle(payment, { ...accepted, amount: (PERMITTED + 1n).toString() });
    expect(settled).toMatchObject({
      success: false,
      errorReason: "invalid_upto_evm_payload_settlement_exceeds_amount",
    });
    expect(await balanceOf(payTo)).toBe(0n);
  });

  it("refuses a payment whose witness names another facilitator", async () => {
    const accepted = requirementsFor(freshAddress(), PERMITTED, freshAddress());
    const payment = await paymentFrom(devnet.accounts.payer.privateKey, accepted);
    expect(await facilitator.verify(payment, accepted)).toMatchObject({
      isValid: false,
      invalidReason: "upto_facilitator_mismatch",
    });
  });

  it("fails x402's simulation when the facilitator's reads do not come from its address", async () => {
    // As the real proxy does, ours checks msg.sender even in an eth_call: a signer whose
    // readContract sends no `from` cannot verify an upto payment.
    const blind = new UptoEvmFacilitatorScheme(facilitatorSigner(devnet, facilitatorKey, "nobody"));
    const accepted = requirementsFor(freshAddress(), PERMITTED);
    const payment = await paymentFrom(devnet.accounts.payer.privateKey, accepted);
    expect(await blind.verify(payment, accepted)).toMatchObject({
      isValid: false,
      invalidReason: "permit2_simulation_failed",
    });
    expect(await facilitator.verify(payment, accepted)).toMatchObject({ isValid: true });
  });

  it("names a payer's missing Permit2 allowance (the diagnosis of a failed simulation)", async () => {
    const key = generatePrivateKey();
    const payer = privateKeyToAccount(key).address;
    await creditToken(devnet, "USDC", payer, PERMITTED * 2n);
    const accepted = requirementsFor(freshAddress(), PERMITTED);
    const payment = await paymentFrom(key, accepted);
    expect(await facilitator.verify(payment, accepted)).toMatchObject({
      isValid: false,
      invalidReason: "permit2_allowance_required",
      payer,
    });
  });

  describe("the contracts' own checks (called directly, past x402's off-chain ones)", () => {
    type SettleArgs = ReturnType<typeof settleArgs>;

    /** The proxy's settle arguments for `payment`, settling `amount`. */
    function settleArgs(payment: PaymentPayload, amount: bigint) {
      const { permit2Authorization: auth, signature } = uptoPayloadOf(payment);
      return [
        {
          permitted: { token: auth.permitted.token, amount: BigInt(auth.permitted.amount) },
          nonce: BigInt(auth.nonce),
          deadline: BigInt(auth.deadline),
        },
        amount,
        auth.from,
        {
          to: auth.witness.to,
          facilitator: auth.witness.facilitator,
          validAfter: BigInt(auth.witness.validAfter),
        },
        signature,
      ] as const;
    }

    const simulateSettle = (args: SettleArgs, from: Address = facilitatorAddress) =>
      client.simulateContract({
        address: X402_UPTO_PROXY_ADDRESS,
        abi: SETTLE_ABI,
        functionName: "settle",
        args,
        account: from,
      });

    const facilitatorWallet = () =>
      createWalletClient({
        chain: devnet.chain,
        transport: http(devnet.rpcUrl, { retryCount: 0 }),
        account: privateKeyToAccount(facilitatorKey),
      });

    const signedPayment = () =>
      paymentFrom(devnet.accounts.payer.privateKey, requirementsFor(freshAddress(), PERMITTED));

    it("lets only the witness's facilitator settle, at most the permitted amount, to the witness's payee", async () => {
      const payment = await signedPayment();
      expect(await revertName(simulateSettle(settleArgs(payment, SETTLED), freshAddress()))).toBe(
        "UnauthorizedFacilitator",
      );
      expect(await revertName(simulateSettle(settleArgs(payment, PERMITTED + 1n)))).toBe(
        "AmountExceedsPermitted",
      );
      expect(await revertName(simulateSettle(settleArgs(payment, PERMITTED)))).toBe("");
      // Another payee than the signed one changes the witness hash: Permit2 recovers someone else.
      const [permit, amount, owner, witness, signature] = settleArgs(payment, SETTLED);
      const redirected = { ...witness, to: freshAddress() };
      expect(await revertName(simulateSettle([permit, amount, owner, redirected, signature]))).toBe(
        "InvalidSigner",
      );
    });

    it("spends a nonce once (Permit2's InvalidNonce) and refuses an expired permit (SignatureExpired)", async () => {
      const payment = await signedPayment();
      const hash = await facilitatorWallet().writeContract({
        address: X402_UPTO_PROXY_ADDRESS,
        abi: x402UptoPermit2ProxyABI,
        functionName: "settle",
        args: settleArgs(payment, 1n),
      });
      expect((await client.waitForTransactionReceipt({ hash })).status).toBe("success");
      expect(await revertName(simulateSettle(settleArgs(payment, 1n)))).toBe("InvalidNonce");

      const [permit, ...rest] = settleArgs(await signedPayment(), 1n);
      expect(await revertName(simulateSettle([{ ...permit, deadline: 1n }, ...rest]))).toBe(
        "SignatureExpired",
      );
    });

    it("settleWithPermit settles when the token has no EIP-2612 permit, and checks the permit's value", async () => {
      // The devnet's USDC has EIP-3009 but not EIP-2612: the permit call fails, the proxy says why
      // in an event and settles on the payer's existing Permit2 approval, as the real one does.
      const args = settleArgs(await signedPayment(), SETTLED);
      const permit2612 = { value: PERMITTED, deadline: maxUint256, r: zeroHash, s: zeroHash, v: 27 };
      const simulateWithPermit = (value: bigint) =>
        client.simulateContract({
          address: X402_UPTO_PROXY_ADDRESS,
          abi: SETTLE_ABI,
          functionName: "settleWithPermit",
          args: [{ ...permit2612, value }, ...args],
          account: facilitatorAddress,
        });
      expect(await revertName(simulateWithPermit(PERMITTED - 1n))).toBe("Permit2612AmountMismatch");
      expect(await revertName(simulateWithPermit(PERMITTED))).toBe("");

      const hash = await facilitatorWallet().writeContract({
        address: X402_UPTO_PROXY_ADDRESS,
        abi: x402UptoPermit2ProxyABI,
        functionName: "settleWithPermit",
        args: [permit2612, ...args],
      });
      const receipt = await client.waitForTransactionReceipt({ hash });
      expect(receipt.status).toBe("success");
      const { abi } = await x402UptoPermit2ProxyArtifact();
      const events = parseEventLogs({ abi, logs: receipt.logs }).map((log) => log.eventName);
      expect(events).toEqual(["EIP2612PermitFailedWithData", "SettledWithPermit"]);
      expect(await balanceOf(args[3].to)).toBe(SETTLED);
    });
  });
});

/** The Permit2 authorization and signature x402's upto client put in `payment`. */
function uptoPayloadOf(payment: PaymentPayload): UptoPermit2Payload {
  if (!isUptoPermit2Payload(payment.payload)) throw new Error("not an upto Permit2 payload");
  return payment.payload;
}
