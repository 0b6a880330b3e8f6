import type { Chain, PublicClient, Transport, WalletClient } from "viem";
import type { PrivateKeyAccount } from "viem/accounts";
import type { Devnet } from "./types.ts";

// The devnet's deployer account is shared by every helper that sends a transaction from it (token
// mints, the ERC-4337 deployment, snapshot reverts): its transactions go through one queue per
// devnet so that concurrent helpers never race for a nonce.

/** The deployer's clients, for helpers that send deployer transactions through {@link withDeployer}. */
export interface DeployerClients {
  publicClient: PublicClient;
  deployer: WalletClient<Transport, Chain, PrivateKeyAccount>;
}

interface DeployerState extends DeployerClients {
  queue: Promise<unknown>;
}

// Kept off the Devnet object so that its public shape holds no clients or queue.
const states = new WeakMap<Devnet, DeployerState>();

/** Gives a devnet its deployer's clients; called once by startDevnet(). */
export function registerDeployer(devnet: Devnet, clients: DeployerClients): void {
  states.set(devnet, { ...clients, queue: Promise.resolve() });
}

/**
 * Runs `task` with the deployer's clients once the deployer transactions already queued are done,
 * so that concurrent helpers never race for a nonce.
 */
export function withDeployer<T>(devnet: Devnet, task: (clients: DeployerClients) => Promise<T>): Promise<T> {
  const state = states.get(devnet);
  if (!state) throw new Error("Not a devnet returned by startDevnet()");
  const result = state.queue.then(() => task(state));
  state.queue = result.catch(() => {});
  return result;
}
