import { readdirSync, readFileSync } from "node:fs";
import { toSimpleSmartAccount } from "permissionless/accounts";
import {
  type Address,
  createPublicClient,
  createWalletClient,
  erc20Abi,
  http,
  type PublicClient,
  parseAbi,
  parseEther,
  parseUnits,
} from "viem";
import {
  type BundlerClient,
  createBundlerClient,
  createPaymasterClient,
  type PaymasterClient,
  toPackedUserOperation,
  type UserOperation,
} from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ENTRYPOINT_V08, SIMPLE_ACCOUNT_FACTORY_V08 } from "../../src/devnet/account-abstraction.ts";
import { type Devnet, mintToken, rpc, startDevnet } from "../../src/devnet/chain.ts";
import { verifyingPaymasterHash } from "../../src/devnet/verifying-paymaster.ts";

// Starts the devnet with its ERC-4337 stack (EntryPoint v0.8, SimpleAccountFactory, a verifying
// paymaster and the ERC-7677 endpoint that signs for it, a bare sponsoring paymaster, Alto bundler)
// on free ports, and sends sponsored user operations from a SimpleAccount through it with viem +
// permissionless, as the smart wallet path of D11 does.

const PAYMASTER_ABI = parseAbi([
  "function getDeposit() view returns (uint256)",
  "function verifyingSigner() view returns (address)",
  "struct PackedUserOperation { address sender; uint256 nonce; bytes initCode; bytes callData; bytes32 accountGasLimits; uint256 preVerificationGas; bytes32 gasFees; bytes paymasterAndData; bytes signature; }",
  "function getHash(PackedUserOperation userOp, uint48 validUntil, uint48 validAfter) view returns (bytes32)",
  "function parsePaymasterAndData(bytes paymasterAndData) pure returns (uint48 validUntil, uint48 validAfter, bytes signature)",
]);
const usdc = (amount: string) => parseUnits(amount, 6);

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Command lines of this process's live children (Linux /proc), zombies excluded. */
function childCommandLines(): string[] {
  const lines: string[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // pid (comm) state ppid …: comm may hold spaces, so split after its closing parenthesis.
      const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(ppid) !== process.pid || state === "Z") continue;
      lines.push(readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " "));
    } catch {
      // The process went away meanwhile.
    }
  }
  return lines;
}

describe("devnet with account abstraction", () => {
  let devnet: Devnet;
  let aa: NonNullable<Devnet["aa"]>;
  let client: PublicClient;
  let bundler: BundlerClient;
  let paymasterService: PaymasterClient;
  let startMs: number;

  beforeAll(async () => {
    const started = performance.now();
    devnet = await startDevnet({ accountAbstraction: true });
    startMs = Math.round(performance.now() - started);
    if (!devnet.aa) throw new Error("startDevnet({ accountAbstraction: true }) returned no aa");
    aa = devnet.aa;
    client = createPublicClient({
      chain: devnet.chain,
      transport: http(devnet.rpcUrl, { retryCount: 0 }),
      pollingInterval: 50,
    });
    bundler = createBundlerClient({
      client,
      transport: http(aa.bundlerUrl, { retryCount: 0 }),
      pollingInterval: 100,
    });
    paymasterService = createPaymasterClient({ transport: http(aa.paymasterUrl, { retryCount: 0 }) });
    console.log(`AA devnet up in ${startMs} ms`, devnet.timings);
  });

  afterAll(async () => {
    await devnet?.stop();
  });

  /** A SimpleAccount owned by a fresh key; counterfactual until its first user operation. */
  async function newSmartAccount() {
    return toSimpleSmartAccount({
      client,
      owner: privateKeyToAccount(generatePrivateKey()),
      entryPoint: { address: aa.entryPoint, version: "0.8" },
      factoryAddress: aa.accountFactory,
    });
  }

  const usdcBalance = (address: Address) =>
    client.readContract({
      address: devnet.tokens.USDC,
      abi: erc20Abi,
      functionName: "balanceOf",
      args: [address],
    });
  const deposit = (paymaster: Address = aa.paymaster) =>
    client.readContract({ address: paymaster, abi: PAYMASTER_ABI, functionName: "getDeposit" });

  it("deploys the contracts on their canonical addresses and starts the bundler and the paymaster service", async () => {
    expect(aa.entryPoint).toBe(ENTRYPOINT_V08);
    expect(aa.entryPoint).toBe("0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108");
    expect(aa.accountFactory).toBe(SIMPLE_ACCOUNT_FACTORY_V08);
    expect(aa.accountFactory).toBe("0x13E9ed32155810FDbd067D4522C492D6f68E5944");
    for (const address of [aa.entryPoint, aa.accountFactory, aa.paymaster, aa.sponsoringPaymaster]) {
      expect((await client.getCode({ address }))?.length ?? 0).toBeGreaterThan(2);
    }
    expect(await deposit(aa.paymaster)).toBe(parseEther("100"));
    expect(await deposit(aa.sponsoringPaymaster)).toBe(parseEther("100"));
    expect(
      await client.readContract({
        address: aa.paymaster,
        abi: PAYMASTER_ABI,
        functionName: "verifyingSigner",
      }),
    ).toBe(aa.paymasterSigner);
    expect(aa.paymasterUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(aa.bundlerUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(aa.bundlerUrl).not.toBe(devnet.rpcUrl);
    expect(await bundler.getSupportedEntryPoints()).toEqual([aa.entryPoint]);
    expect(await bundler.getChainId()).toBe(31337);
  });

  it("sends a batch (USDC + ETH) from a counterfactual SimpleAccount, signed for by the ERC-7677 service", async () => {
    const account = await newSmartAccount();
    const sender = account.address;
    expect(await client.getCode({ address: sender })).toBeUndefined(); // counterfactual
    // Funds reach the address before the account exists (D11).
    await mintToken(devnet, "USDC", sender, "100");
    const ethForTransfer = parseEther("0.01"); // for the ETH transfer only: gas is sponsored
    const payer = createWalletClient({
      chain: devnet.chain,
      transport: http(devnet.rpcUrl, { retryCount: 0 }),
      account: privateKeyToAccount(devnet.accounts.payer.privateKey),
    });
    await client.waitForTransactionReceipt({
      hash: await payer.sendTransaction({ to: sender, value: ethForTransfer }),
    });

    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const ethBefore = await client.getBalance({ address: sender });
    const depositBefore = await deposit();
    const value = parseEther("0.004");

    const started = performance.now();
    const hash = await bundler.sendUserOperation({
      account,
      calls: [
        { to: devnet.tokens.USDC, abi: erc20Abi, functionName: "transfer", args: [recipient, usdc("25")] },
        { to: recipient, value },
      ],
      // viem's own ERC-7677 flow: stub, the bundler's estimate, then the service's signature.
      paymaster: paymasterService,
    });
    const receipt = await bundler.waitForUserOperationReceipt({ hash, timeout: 20_000 });
    const latencyMs = Math.round(performance.now() - started);
    console.log(`first user operation (deploys the account): ${latencyMs} ms`);

    expect(receipt.success).toBe(true);
    expect(receipt.receipt.status).toBe("success");
    expect(receipt.sender.toLowerCase()).toBe(sender.toLowerCase());
    expect(receipt.paymaster?.toLowerCase()).toBe(aa.paymaster.toLowerCase());
    expect(receipt.actualGasCost).toBeGreaterThan(0n);
    expect((await client.getCode({ address: sender }))?.length ?? 0).toBeGreaterThan(2); // deployed now
    expect(await usdcBalance(recipient)).toBe(usdc("25"));
    expect(await usdcBalance(sender)).toBe(usdc("75"));
    expect(await client.getBalance({ address: recipient })).toBe(value);
    // Gas came from the paymaster's deposit: the account lost exactly the value sent.
    expect(await client.getBalance({ address: sender })).toBe(ethBefore - value);
    expect(await deposit()).toBe(depositBefore - receipt.actualGasCost);
  });

  it("sends a batch of two transfers in one operation (net + fee), sponsored by the bare paymaster", async () => {
    const account = await newSmartAccount();
    const sender = account.address;
    await mintToken(devnet, "USDC", sender, "50");
    // A first operation deploys the account, so that the one measured below is a warm one.
    const deployHash = await bundler.sendUserOperation({
      account,
      calls: [{ to: devnet.tokens.USDC, abi: erc20Abi, functionName: "approve", args: [sender, 0n] }],
      paymaster: aa.sponsoringPaymaster,
    });
    expect((await bundler.waitForUserOperationReceipt({ hash: deployHash, timeout: 20_000 })).success).toBe(
      true,
    );

    const merchant = privateKeyToAccount(generatePrivateKey()).address;
    const treasury = devnet.accounts.treasury.address;
    const treasuryBefore = await usdcBalance(treasury);
    const depositBefore = await deposit(aa.sponsoringPaymaster);
    const started = performance.now();
    const hash = await bundler.sendUserOperation({
      account,
      calls: [
        { to: devnet.tokens.USDC, abi: erc20Abi, functionName: "transfer", args: [merchant, usdc("49")] },
        { to: devnet.tokens.USDC, abi: erc20Abi, functionName: "transfer", args: [treasury, usdc("1")] },
      ],
      // A bare address: no paymaster data, nothing signed (the <P>_PAYMASTER_ADDRESS mode).
      paymaster: aa.sponsoringPaymaster,
    });
    const receipt = await bundler.waitForUserOperationReceipt({ hash, timeout: 20_000 });
    const latencyMs = Math.round(performance.now() - started);
    console.log(`warm user operation (batch of two): ${latencyMs} ms`);

    expect(receipt.success).toBe(true);
    expect(await usdcBalance(merchant)).toBe(usdc("49"));
    expect(await usdcBalance(treasury)).toBe(treasuryBefore + usdc("1"));
    expect(await usdcBalance(sender)).toBe(0n);
    expect(await client.getBalance({ address: sender })).toBe(0n); // never held ETH
    expect(receipt.paymaster?.toLowerCase()).toBe(aa.sponsoringPaymaster.toLowerCase());
    expect(await deposit(aa.sponsoringPaymaster)).toBe(depositBefore - receipt.actualGasCost);
    // Both transfers are in the one transaction the bundler sent.
    const transferLogs = receipt.logs.filter(
      (log) => log.address.toLowerCase() === devnet.tokens.USDC.toLowerCase(),
    );
    expect(transferLogs).toHaveLength(2);
  });

  describe("the paymaster service's signature covers every gas limit", () => {
    const GAS_FIELDS = [
      "callGasLimit",
      "verificationGasLimit",
      "preVerificationGas",
      "paymasterVerificationGasLimit",
      "paymasterPostOpGasLimit",
      "maxFeePerGas",
    ] as const;
    let account: Awaited<ReturnType<typeof newSmartAccount>>;
    let signed: UserOperation<"0.8">;

    beforeAll(async () => {
      account = await newSmartAccount();
      await mintToken(devnet, "USDC", account.address, "10");
      // Prepared as viem does with a paymaster service: every limit fixed, then the service signs.
      signed = (await bundler.prepareUserOperation({
        account,
        calls: [
          {
            to: devnet.tokens.USDC,
            abi: erc20Abi,
            functionName: "transfer",
            args: [devnet.accounts.treasury.address, usdc("1")],
          },
        ],
        paymaster: paymasterService,
      })) as UserOperation<"0.8">;
    });

    it("signs the hash the contract checks", async () => {
      expect(signed.paymaster).toBe(aa.paymaster);
      const packed = toPackedUserOperation(signed);
      const [validUntil, validAfter] = await client.readContract({
        address: aa.paymaster,
        abi: PAYMASTER_ABI,
        functionName: "parsePaymasterAndData",
        args: [packed.paymasterAndData],
      });
      expect(validAfter).toBe(0);
      expect(validUntil).toBeGreaterThan(Date.now() / 1000);
      const onChain = await client.readContract({
        address: aa.paymaster,
        abi: PAYMASTER_ABI,
        functionName: "getHash",
        args: [packed, validUntil, validAfter],
      });
      expect(
        verifyingPaymasterHash(signed, {
          chainId: devnet.chainId,
          paymaster: aa.paymaster,
          validUntil,
          validAfter,
        }),
      ).toBe(onChain);
    });

    it.each(GAS_FIELDS)("refuses the operation once %s changed after the service signed", async (field) => {
      const changed = { ...signed, [field]: (signed[field] ?? 0n) + 1_000n };
      const sent = bundler.sendUserOperation({
        ...changed,
        signature: await account.signUserOperation(changed),
      });
      // AA34: the paymaster's signature check failed (the account's own signature is valid).
      await expect(sent).rejects.toThrow(/AA34/);
    });

    it("includes the operation as the service signed it", async () => {
      const hash = await bundler.sendUserOperation({
        ...signed,
        signature: await account.signUserOperation(signed),
      });
      const receipt = await bundler.waitForUserOperationReceipt({ hash, timeout: 20_000 });
      expect(receipt.success).toBe(true);
      expect(receipt.paymaster?.toLowerCase()).toBe(aa.paymaster.toLowerCase());
    });

    it("answers ERC-7677 only for its own chain and entry point", async () => {
      const [operation, entryPoint, chainId] = [
        { ...signed },
        aa.entryPoint,
        `0x${devnet.chainId.toString(16)}`,
      ];
      const ask = (params: unknown[]) => rpc(aa.paymasterUrl, "pm_getPaymasterStubData", params);
      const wire = JSON.parse(
        JSON.stringify(operation, (_k, v) => (typeof v === "bigint" ? `0x${v.toString(16)}` : v)),
      );
      await expect(ask([wire, entryPoint, chainId, {}])).resolves.toMatchObject({
        paymaster: aa.paymaster,
        isFinal: false,
      });
      await expect(ask([wire, entryPoint, "0x1", {}])).rejects.toThrow(/chain 0x1 is not served here/);
      await expect(ask([wire, aa.accountFactory, chainId, {}])).rejects.toThrow(/is not served here/);
      await expect(rpc(aa.paymasterUrl, "eth_chainId", [])).rejects.toThrow(/not served here/);
    });
  });

  it("stops the bundler, the paymaster service and the node, leaving no Alto or Hardhat process behind", async () => {
    const pids = [devnet.pid, aa.bundlerPid];
    for (const pid of pids) expect(processAlive(pid)).toBe(true);
    const ours = (line: string) => /@pimlico\/alto|hardhat/.test(line);
    expect(childCommandLines().filter(ours)).toHaveLength(2);

    const started = performance.now();
    await devnet.stop();
    console.log(`stack stopped in ${Math.round(performance.now() - started)} ms`);
    for (const pid of pids) expect(processAlive(pid)).toBe(false);
    expect(childCommandLines().filter(ours)).toEqual([]);
    expect(await aa.bundlerExited).toBeDefined();
    await expect(bundler.getChainId()).rejects.toThrow();
    await expect(client.getChainId()).rejects.toThrow();
    await expect(rpc(aa.paymasterUrl, "pm_getPaymasterStubData", [], 1_000)).rejects.toThrow();
    await devnet.stop(); // idempotent
  });
});
