import { amount } from "./format.ts";
import { type HtmlSafeString, html } from "./html.ts";

// A wallet's balances on each of the environment's networks (D22), for the overview's and the
// wallets page's cards: a list where the environment has one network, as the page always
// showed; a table of networks by token where it has several, the default network first.

/** The wallet's balances per network, the default first; a wallet shows the same tokens on each. */
export type NetworkBalances = ReadonlyArray<readonly [network: string, balances: Record<string, string>]>;

export function walletBalances(perNetwork: NetworkBalances, environment: string): HtmlSafeString {
  const [first] = perNetwork;
  if (!first || Object.keys(first[1]).length === 0)
    return html`<p class="muted">Balances need a network: none is configured for ${environment}.</p>`;
  if (perNetwork.length === 1)
    return html`<ul class="balances">${Object.entries(first[1]).map(([token, value]) => html`<li>${amount(value, token)}</li>`)}</ul>`;
  const tokens = Object.keys(first[1]);
  return html`<div class="table-wrap flat"><table class="compact" aria-label="Balances by network"><thead><tr><th scope="col">Network</th>${tokens.map(
    (token) => html`<th scope="col" class="num">${token}</th>`,
  )}</tr></thead><tbody>${perNetwork.map(
    ([network, balances]) =>
      html`<tr><th scope="row">${network}</th>${tokens.map((token) => html`<td class="num">${balances[token] ?? "0.00"}</td>`)}</tr>`,
  )}</tbody></table></div>`;
}

/** One wallet's (`which`) balances out of the balance answer's `networks`. */
export function balancesOf(
  networks: Record<
    string,
    Partial<Record<"eoa" | "smartWallet", { balances: Record<string, string> } | null>>
  >,
  which: "eoa" | "smartWallet",
): NetworkBalances {
  return Object.entries(networks).map(
    ([network, wallets]) => [network, wallets[which]?.balances ?? {}] as const,
  );
}
