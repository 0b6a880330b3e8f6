import { mkdir, rename, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import {
  type Devnet,
  MULTICALL3_ADDRESS,
  PERMIT2_ADDRESS,
  SEEDED_POOLS,
  startDevnet,
  USDC_EIP712,
  X402_UPTO_PROXY_ADDRESS,
} from "./chain.ts";
import { envFileText, furtherNetworkId } from "./env-file.ts";

// `npm run devnet`: local chains standing in for the live networks (D3, D11, D14, D22). Starts the
// Hardhat node on DEVNET_PORT (default 8545) with the test tokens (USDC with EIP-3009, for x402),
// Multicall3 at its canonical address, the ERC-4337 contracts and Uniswap v3 with seeded pools
// (D16) deployed, an Alto bundler on DEVNET_BUNDLER_PORT (default:
// a free port; Alto binds 0.0.0.0) and the ERC-7677 paymaster service on DEVNET_PAYMASTER_PORT
// (default: a free port on 127.0.0.1), in this process; then a second chain (chain id 31338, on the next port) with the
// tokens, the ERC-4337 contracts and a bundler of its own (`--networks 1` starts the first alone;
// up to 4). Writes DATA_DIR/devnet.env once every chain and bundler answers, and stays in the
// foreground until Ctrl-C or SIGTERM, which stop them (nothing else is removed: the env file stays
// for the next run to overwrite).

/** How many chains: `--networks N` (or DEVNET_NETWORKS), 1 to 4; default 2 (D22). */
function chainCount(): number {
  const flag = process.argv.indexOf("--networks");
  const raw = flag >= 0 ? process.argv[flag + 1] : process.env.DEVNET_NETWORKS || "2";
  if (raw === undefined || !/^[1-4]$/.test(raw)) {
    process.stderr.write(`--networks (DEVNET_NETWORKS) must be 1 to 4, got "${raw ?? ""}"\n`);
    process.exit(2);
  }
  return Number(raw);
}

function portFromEnv(name: string, fallback: string | undefined): number | undefined {
  const raw = process.env[name] || fallback;
  if (raw === undefined) return undefined;
  const port = Number(raw);
  if (!/^[0-9]+$/.test(raw) || port < 1 || port > 65535) {
    process.stderr.write(`${name} must be a port number (1-65535), got "${raw}"\n`);
    process.exit(2);
  }
  return port;
}

async function main(): Promise<void> {
  const port = portFromEnv("DEVNET_PORT", "8545") as number;
  const bundlerPort = portFromEnv("DEVNET_BUNDLER_PORT", undefined);
  const paymasterPort = portFromEnv("DEVNET_PAYMASTER_PORT", undefined);
  const dataDir = resolve(process.env.DATA_DIR || "./data");
  const envFile = join(dataDir, "devnet.env");
  const verbose = process.env.DEVNET_VERBOSE === "1";
  const chains = chainCount();

  // Signal handlers first: a Ctrl-C during start-up stops the node as soon as it exists.
  let devnet: Devnet | undefined;
  const further: Devnet[] = [];
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      if (devnet) process.exit(130); // a second Ctrl-C: do not wait any longer
      return;
    }
    stopping = true;
    if (!devnet) return; // still starting: stopped right after start-up below (or failed)
    process.stdout.write(`\n${signal}: stopping the devnet…\n`);
    await Promise.all([devnet.stop(), ...further.map((chain) => chain.stop())]);
    process.stdout.write("Devnet stopped.\n");
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));

  process.stdout.write(`Starting the devnet on 127.0.0.1:${port}…\n`);
  devnet = await startDevnet({
    port,
    accountAbstraction: true,
    swaps: true,
    bundlerPort,
    paymasterPort,
    onOutput: verbose ? (text) => process.stdout.write(text) : undefined,
    // Alto logs at "warn" and up only: always worth seeing.
    onBundlerOutput: (text) => process.stderr.write(text),
  });
  // Each further chain has the test tokens and accounts and the ERC-4337 contracts (the same
  // addresses: one deployer, one nonce sequence), its own chain id and bundler, and no Uniswap.
  for (let i = 1; i < chains && !stopping; i++) {
    further.push(
      await startDevnet({
        port: port + i,
        chainId: 31_337 + i,
        accountAbstraction: true,
        onBundlerOutput: (text) => process.stderr.write(text),
      }),
    );
  }
  if (stopping) {
    await Promise.all([devnet.stop(), ...further.map((chain) => chain.stop())]);
    process.exit(0);
  }
  void devnet.exited.then(({ code, signal }) => {
    if (stopping) return;
    process.stderr.write(`The Hardhat node exited unexpectedly (code ${code}, signal ${signal}).\n`);
    process.exit(1);
  });
  const { aa, swap } = devnet;
  if (!aa) throw new Error("The devnet started without its ERC-4337 stack");
  if (!swap) throw new Error("The devnet started without Uniswap v3");
  for (const chain of [devnet, ...further]) {
    void chain.aa?.bundlerExited.then(async ({ code, signal }) => {
      if (stopping) return;
      stopping = true;
      process.stderr.write(
        `The bundler of chain ${chain.chainId} exited unexpectedly (code ${code}, signal ${signal}); stopping the devnet.\n`,
      );
      await Promise.all([devnet?.stop(), ...further.map((one) => one.stop())]);
      process.exit(1);
    });
  }

  // Written only now that the chain answers, the contracts exist and the bundler answers (D13);
  // tmp + rename so that a reader never sees half a file.
  await mkdir(dataDir, { recursive: true });
  const tmp = `${envFile}.${process.pid}.tmp`;
  await writeFile(tmp, envFileText(devnet, further), { mode: 0o600 });
  await rename(tmp, envFile);

  const { tokens, accounts, timings } = devnet;
  process.stdout.write(
    [
      `Devnet ready: ${devnet.rpcUrl} (chain id ${devnet.chainId}), node up in ${timings.nodeStartMs} ms, tokens deployed in ${timings.deployMs} ms,`,
      `ERC-4337 contracts in ${timings.aaDeployMs} ms, bundler up in ${timings.bundlerStartMs} ms,`,
      `Uniswap v3 deployed and seeded in ${timings.swapDeployMs} ms (while the bundler started).`,
      "A block is mined every second and on each transaction.",
      "",
      `  USDC  ${tokens.USDC}  (6 decimals; EIP-3009, EIP-712 domain "${USDC_EIP712.name}" version "${USDC_EIP712.version}")`,
      `  ADAO  ${tokens.ADAO}  (18 decimals)`,
      `  DAI   ${tokens.DAI}  (18 decimals)`,
      `  Multicall3  ${MULTICALL3_ADDRESS}`,
      `  Permit2     ${PERMIT2_ADDRESS}  (SignatureTransfer only)`,
      `  upto proxy  ${X402_UPTO_PROXY_ADDRESS}  (x402UptoPermit2Proxy, x402's upto scheme)`,
      "",
      `  treasury    ${accounts.treasury.address}`,
      `  gas funder  ${accounts.gasFunder.address}`,
      `  payer       ${accounts.payer.address}  (holds every test token; key in DEVNET_PAYER_KEY)`,
      "",
      `  bundler     ${aa.bundlerUrl}  (Alto, listening on all interfaces)`,
      `  EntryPoint  ${aa.entryPoint}  (v0.8)`,
      `  factory     ${aa.accountFactory}  (SimpleAccountFactory)`,
      `  paymaster   ${aa.paymaster}  (VerifyingPaymaster: pays what its signer ${aa.paymasterSigner} signed)`,
      `  pm service  ${aa.paymasterUrl}  (ERC-7677, signs every user operation for it: devnet only)`,
      `  bare pm     ${aa.sponsoringPaymaster}  (SponsoringPaymaster: sponsors anything, signs nothing)`,
      "",
      `  swap router ${swap.router}  (Uniswap v3 SwapRouter)`,
      `  quoter      ${swap.quoter}  (QuoterV2)`,
      `  v3 factory  ${swap.factory}`,
      `  WETH        ${swap.weth}  (WETH9)`,
      ...SEEDED_POOLS.map(({ pair, asset, fee, assetAmount, usdcAmount }) => {
        const address = swap.pools.find((p) => p.pair === pair)?.address;
        const price = Number(usdcAmount) / Number(assetAmount);
        return `  ${pair.padEnd(11)} ${address}  (fee ${fee}, 1 ${asset} = ${price} USDC, held by the deployer)`;
      }),
      "",
      ...further.map(
        (chain, i) =>
          `  ${furtherNetworkId(i)}    ${chain.rpcUrl} (chain id ${chain.chainId}): the same test tokens, accounts and ERC-4337 contracts, bundler ${chain.aa?.bundlerUrl}, paymaster service ${chain.aa?.paymasterUrl}, no Uniswap`,
      ),
      ...(further.length > 0 ? [""] : []),
      `Env file: ${envFile}`,
      "Start the service against it with:",
      "",
      `  NETWORK_ENV_FILE=${envFile} npm start`,
      "",
      "Press Ctrl-C to stop the devnet.",
      "",
    ].join("\n"),
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`Devnet failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
