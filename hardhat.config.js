// Hardhat 3 configuration for the local devnet (`npm run devnet`, src/devnet/chain.ts).
// Only the in-process EDR network is used: no Solidity build through Hardhat (contracts are
// compiled with solc-js by src/devnet/compile.ts, so no compiler is ever downloaded).
export default {
  networks: {
    hardhat: { type: "edr-simulated", chainType: "l1" },
  },
};
