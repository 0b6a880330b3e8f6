import { toSimpleSmartAccount } from "permissionless/accounts";
import { type Address, encodeFunctionData, erc20Abi, type Hex, parseUnits } from "viem";
import { getUserOperationHash, type UserOperation } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { operationOf } from "../../src/chain/evm/bundler-rpc.ts";
import { PaymasterServiceError } from "../../src/chain/evm/paymaster.ts";
import { SmartAccounts, type SmartCall } from "../../src/chain/evm/smart-accounts.ts";
import { loadConfig } from "../../src/config.ts";
import { freePort, mintToken } from "../../src/devnet/chain.ts";
import type { NetworkConfig } from "../../src/network-config.ts";
import { createWorkspace, startTestApp } from "../support/app.ts";
import { liveSmartWalletEnv } from "../support/devnet-env.ts";
import {
  aa,
  chain,
  createSmartWallet,
  devnet,
  env,
  expectCarriedUserOperation,
  extraApps,
  payout,
  randomAddress,
  same,
  t,
  usdcBalance,
  useSmartWalletsLive,
} from "../support/smart-wallets-live.ts";

// Smart wallet operations through a signing paymaster (ERC-7677): the devnet's paymaster service
// signs each operation for its VerifyingPaymaster, every gas limit included, so each limit must be
// fixed before it signs (smart-accounts.ts `prepare`). Beside it, the bare-address mode.

useSmartWalletsLive();

/** A contract call declaring far more call gas than the transfer needs, as a swap's does. */
const DECLARED_GAS = 400_000n;

function liveNetwork(variables: Record<string, string>): NetworkConfig {
  const network = loadConfig(variables).networks.live[0];
  if (!network) throw new Error("no live network in the configuration");
  return network;
}

/** A USDC transfer made as a contract call with its own least call gas (network.ts `ContractCall`). */
function declaredTransfer(to: Address, amount: string): SmartCall {
  const units = parseUnits(amount, 6);
  const data = encodeFunctionData({ abi: erc20Abi, functionName: "transfer", args: [to, units] });
  return { token: "USDC", to: devnet.tokens.USDC, amount: 0n, call: { data, value: 0n, gas: DECLARED_GAS } };
}

const operation = (serialized: string) => operationOf(serialized) as UserOperation<"0.8">;

describe("operations through the devnet's paymaster service", () => {
  it("a call's declared gas is in the limits the service signs, with the bundler's estimate and with a known profile", async () => {
    const accounts = new SmartAccounts(liveNetwork(env));
    const owner = generatePrivateKey();
    const smart = await accounts.address(owner);
    await mintToken(devnet, "USDC", smart, "10");
    const destination = randomAddress();
    // The first deploys the account, the second is estimated for the deployed account, the third
    // reuses that profile with the call gas measured by the node.
    const gasFrom: Array<string | undefined> = [];
    for (let i = 0; i < 3; i++) {
      const prepared = await accounts.prepare(owner, [declaredTransfer(destination, "1")]);
      gasFrom.push(prepared.gasFrom);
      const op = operation(prepared.serialized);
      // Raised to the declared floor before the service signed: on chain, its signature holds.
      expect(op.callGasLimit).toBe(DECLARED_GAS);
      expect(same(op.paymaster, aa.paymaster)).toBe(true);
      expect(op.paymasterData?.length).toBe(2 + 2 * (6 + 6 + 65));
      const outcome = await accounts.send(prepared);
      expect(outcome).toMatchObject({ status: "success", userOpHash: prepared.userOpHash });
      await expectCarriedUserOperation(
        outcome.status === "success" ? outcome.txHash : "",
        prepared.userOpHash,
        smart,
      );
    }
    expect(gasFrom).toEqual(["bundler", "bundler", "known"]);
    expect(await usdcBalance(destination)).toBe(parseUnits("3", 6));
  });

  it("an operation whose gas limit changed after the service signed is refused (AA34)", async () => {
    const accounts = new SmartAccounts(liveNetwork(env));
    const owner = generatePrivateKey();
    const smart = await accounts.address(owner);
    await mintToken(devnet, "USDC", smart, "5");
    const destination = randomAddress();
    const prepared = await accounts.prepare(owner, [{ token: "USDC", to: destination, amount: 1_000_000n }]);
    // What the code before this change did: the call gas raised after the paymaster's step, the
    // account signing the raised operation.
    const account = await toSimpleSmartAccount({
      client: chain,
      owner: privateKeyToAccount(owner),
      entryPoint: { address: aa.entryPoint, version: "0.8" },
      factoryAddress: aa.accountFactory,
    });
    const raised = { ...operation(prepared.serialized), callGasLimit: DECLARED_GAS };
    const signed = { ...raised, signature: await account.signUserOperation(raised) };
    const userOpHash = getUserOperationHash({
      userOperation: signed,
      entryPointAddress: aa.entryPoint,
      entryPointVersion: "0.8",
      chainId: devnet.chainId,
    });
    const serialized = JSON.stringify(signed, (_k, v) => (typeof v === "bigint" ? `${v}n` : v));
    const refused = await accounts.send({ userOpHash, serialized });
    expect(refused).toMatchObject({ status: "reverted", refused: true, txHash: null });
    expect(refused.status === "reverted" ? refused.error : "").toMatch(/AA34/);
    // The operation as prepared goes through.
    expect(await accounts.send(prepared)).toMatchObject({ status: "success" });
    expect(await usdcBalance(destination)).toBe(1_000_000n);
  });

  it("the bare-address mode: the sponsoring paymaster, no paymaster data, the declared gas kept", async () => {
    const accounts = new SmartAccounts(liveNetwork(liveSmartWalletEnv(devnet, aa, {}, "address")));
    const owner = generatePrivateKey();
    const smart = await accounts.address(owner);
    await mintToken(devnet, "USDC", smart, "5");
    const destination = randomAddress();
    const prepared = await accounts.prepare(owner, [declaredTransfer(destination, "2")]);
    const op = operation(prepared.serialized);
    expect(op.callGasLimit).toBe(DECLARED_GAS);
    expect(same(op.paymaster, aa.sponsoringPaymaster)).toBe(true);
    expect(op.paymasterData ?? "0x").toBe("0x");
    expect(await accounts.send(prepared)).toMatchObject({ status: "success" });
    expect(await usdcBalance(destination)).toBe(parseUnits("2", 6));
  });

  it("a paymaster service that does not answer fails the preparation, never naming its key", async () => {
    const key = "pm_test_key_0123456789";
    const url = `http://127.0.0.1:${await freePort()}/rpc?apikey=${key}`;
    const accounts = new SmartAccounts(liveNetwork({ ...env, LIVE_PAYMASTER_URL: url }));
    const owner: Hex = generatePrivateKey();
    const failure = await accounts.prepare(owner, [{ token: "USDC", to: randomAddress(), amount: 1n }]).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(PaymasterServiceError);
    expect(failure).toMatchObject({ code: "PAYMASTER_SERVICE" });
    const message = (failure as Error).message.split("\n")[0] ?? "";
    expect(message).toMatch(/^paymaster service failed \(pm_getPaymasterStubData\): /);
    expect(message).not.toContain(key);
  });
});

describe("payouts through a paymaster service", () => {
  it("one that is down → 500 PAYOUT_FAILED naming the paymaster service (not its key); nothing moved", async () => {
    const key = "pm_test_key_9876543210";
    const down = await startTestApp(
      { ...env, LIVE_PAYMASTER_URL: `http://127.0.0.1:${await freePort()}/v2/rpc?apikey=${key}` },
      { database: t.database },
    );
    extraApps.push(down);
    const ws = await createWorkspace(down);
    const smart = (await createSmartWallet(ws, down)).body.smartWallet.address as Address;
    await mintToken(devnet, "USDC", smart, "5");
    const destination = randomAddress();
    const res = await payout(
      ws,
      { tokenSymbol: "USDC", amount: "1", destinationAddress: destination, walletType: "smart_wallet" },
      down,
    );
    expect(res.statusCode, res.body).toBe(500);
    expect(res.json()).toMatchObject({
      code: "PAYOUT_FAILED",
      detail: expect.stringMatching(/paymaster service/),
    });
    expect(res.body).not.toContain(key);
    expect(await usdcBalance(smart)).toBe(parseUnits("5", 6));
    expect(await usdcBalance(destination)).toBe(0n);
  });
});
