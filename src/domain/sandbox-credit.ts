import { type CryptoToken, isCryptoToken, TOKEN_DECIMALS } from "./money.ts";
import type { Validated, WalletType } from "./payment-request.ts";
import { parseAmountField } from "./validation.ts";

// What money the sandbox hands a workspace wallet out of nowhere asks for: the faucet (D13), and a
// simulated payer's transfer to it (D19). The first problem is answered, in this order.

export interface SandboxCredit {
  token: CryptoToken;
  amount: bigint;
  /** Which workspace wallet; null: the workspace's default for the sandbox (walletTypeFor). */
  walletType: WalletType | null;
}

export function validateSandboxCredit(input: Record<string, unknown>): Validated<SandboxCredit> {
  const token = input.tokenSymbol;
  if (!isCryptoToken(token)) return { ok: false, message: "Invalid token symbol" };
  const amount = parseAmountField(input.amount, TOKEN_DECIMALS[token]);
  if (amount === null) return { ok: false, message: "Amount must be a positive number" };
  const walletType = input.walletType ?? null;
  if (walletType !== null && walletType !== "eoa" && walletType !== "smart_wallet")
    return { ok: false, message: "Invalid walletType: use eoa or smart_wallet" };
  return { ok: true, value: { token, amount, walletType } };
}
