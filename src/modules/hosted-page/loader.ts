import type { AppContext } from "../../context.ts";
import type { PaymentsService } from "../payments/service.ts";
import type { Branding, WorkspacesService } from "../workspaces/service.ts";
import { type Merchant, type NetworkFacts, type PublicPayment, toPublicPayment } from "./public-payment.ts";

// What the hosted page and its receipt show of a payment, read for a payer: the payment's public
// facts (public-payment.ts) and the facts of the network it is paid on.

/** `load(id, chosen?)`: the payment as a payer sees it, or null when there is none. */
export function payerView(ctx: AppContext, payments: PaymentsService, workspaces: WorkspacesService) {
  /** A chain's facts for the payer; none for the sandbox's simulated networks (no wallet pays there). */
  const networkFacts = (environment: string, network: string | null): NetworkFacts | null => {
    const listed = ctx.directory
      .list(environment === "live" ? "live" : "sandbox")
      .networks.find((chain) => chain.id === network && !chain.simulated);
    if (!listed) return null;
    const tokens = new Map(listed.tokens.map((token) => [token.symbol as string, token.address]));
    const config = ctx.chains.of(environment === "live" ? "live" : "sandbox", listed.id)?.config;
    return {
      id: listed.id,
      chainId: listed.chainId,
      name: listed.name,
      explorerUrl: config?.explorerUrl ?? null,
      walletRpcUrl: config?.walletRpcUrl ?? null,
      tokenAddress: (symbol) => tokens.get(symbol) ?? null,
    };
  };

  /**
   * Who the payer pays (D25): the workspace's display name (else its name), logo and colour, read
   * with the payment on every load and never kept, so a change shows at once on every instance.
   * The logo's URL carries a prefix of its hash: a new logo is a new URL past any cache.
   */
  const merchantOf = (found: Branding | null, paymentId: string): Merchant => {
    // A payment's workspace cannot go (a foreign key), so none here is a broken database.
    if (!found) throw new Error(`The workspace of payment ${paymentId} is missing`);
    return {
      name: found.displayName ?? found.name,
      logoUrl: found.logoSha256 ? `/pay/${paymentId}/logo?v=${found.logoSha256.slice(0, 12)}` : null,
      brandColor: found.brandColor,
    };
  };

  /**
   * The page of a payment; one payable on several networks and on none yet shows the network
   * the payer chose (`?network=`, one of its own), else its first, and offers the others.
   */
  const load = async (id: string, chosen?: unknown): Promise<PublicPayment | null> => {
    const row = await payments.forPayerWith(id, (workspaceId) => workspaces.brandingOf(workspaceId));
    if (!row) return null;
    const merchant = merchantOf(row.alongside, row.id);
    if (row.network !== null || !row.networks)
      return toPublicPayment(row, networkFacts(row.environment, row.network), merchant);
    const choices = row.networks.flatMap((network) => networkFacts(row.environment, network) ?? []);
    const shown = choices.find((choice) => choice.id === chosen) ?? choices[0] ?? null;
    return toPublicPayment(row, shown, merchant, choices);
  };
  return load;
}
