import type { Environment } from "../../../config.ts";
import { type NetworkBalances, walletBalances } from "./balances.ts";
import { copyButton, empty, hex, time } from "./format.ts";
import { type HtmlSafeString, html, nothing, safe } from "./html.ts";

// The workspace's wallets: addresses with copy and QR, balances, creating the smart wallet and
// choosing the default (both through the part 4.14 endpoints, called by our script with the
// session's CSRF token).

export interface WalletCard {
  label: string;
  address: string;
  createdAt: string;
  /** Its balances on each network (D22), the default first. */
  balances: NetworkBalances;
  /** The QR code of the address, an SVG we drew (qrcode). */
  qrSvg: string;
}

export function walletsBody(options: {
  environment: Environment;
  eoa: WalletCard | null;
  smartWallet: WalletCard | null;
  defaultWalletType: "workspace" | "smart_wallet";
}): HtmlSafeString {
  const card = (
    w: WalletCard,
    id: string,
  ) => html`<section class="card wallet" id="${id}" aria-labelledby="${id}-title">
<h2 id="${id}-title">${w.label}</h2>
<p>${hex(w.address)} ${copyButton(w.address, "Copy address")}</p>
<figure class="qr"><div role="img" aria-label="QR code of the address ${w.address}">${safe(w.qrSvg)}</div></figure>
${walletBalances(w.balances, options.environment)}
<p class="muted">Created ${time(w.createdAt)}</p></section>`;
  const smart = options.smartWallet
    ? card(options.smartWallet, "smart-wallet")
    : html`<section class="card" id="smart-wallet" aria-labelledby="smart-wallet-title"><h2 id="smart-wallet-title">Smart wallet</h2>
${empty("No smart wallet yet.", html`<p>A smart wallet (ERC-4337) pays its own gas through the paymaster.</p>`)}
<button type="button" class="primary" id="create-smart-wallet" data-action="create-smart-wallet">Create the smart wallet</button>
<p class="action-status" role="status" aria-live="polite"></p></section>`;
  return html`<div class="grid two">${options.eoa ? card(options.eoa, "eoa-wallet") : empty("No workspace wallet.")}${smart}</div>
<section class="card" aria-labelledby="default-title"><h2 id="default-title">Default wallet</h2>
<p>New ${options.environment} payments and payouts use this wallet unless they name one (<code>walletType</code>); each environment has its own default.</p>
<fieldset class="choice"><legend>Default wallet type</legend>
<label class="inline-label"><input type="radio" name="defaultWalletType" value="workspace" ${options.defaultWalletType === "workspace" ? html`checked` : nothing}> Workspace wallet (EOA)</label>
<label class="inline-label"><input type="radio" name="defaultWalletType" value="smart_wallet" ${options.defaultWalletType === "smart_wallet" ? html`checked` : nothing} ${options.smartWallet ? nothing : html`disabled`}> Smart wallet</label>
</fieldset>
<button type="button" id="save-default" data-action="save-default" data-environment="${options.environment}">Save default</button>
<p class="action-status" role="status" aria-live="polite"></p>
<noscript><p class="muted">Changing wallets needs JavaScript.</p></noscript></section>`;
}
