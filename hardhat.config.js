// Hardhat 3 configuration for the local devnet (`npm run devnet`, src/devnet/chain.ts).
// Only the in-process EDR network is used: no Solidity build through Hardhat (contracts are
// compiled with solc-js by src/devnet/compile.ts, so no compiler is ever downloaded).
// Blocks mined in the same second (one per transaction) may share its timestamp, as on a real
// chain: otherwise each one adds a second and the chain's clock runs ahead of the wall clock, and
// a swap's deadline (its quote's expiry, D16) would be past before it is sent.
// `hardhat node` runs the network named "node".
const devnet = { type: "edr-simulated", chainType: "l1", allowBlocksWithSameTimestamp: true };
export default {
  networks: { hardhat: devnet, node: devnet },
};
