import {
  type Account,
  type Address,
  type Chain,
  encodeFunctionData,
  erc20Abi,
  type Hex,
  keccak256,
  type PublicClient,
  type Transport,
  type WalletClient,
} from "viem";
import type { CardEvent, RecordedRequest, SignedDelivery } from "./fake-card-provider.ts";
import type { Fail, IdempotentResult, Reply } from "./fake-card-refunds.ts";

// The crypto on-ramp part of the fake card provider (fake-card-provider.ts): Stripe's
// /v1/crypto/onramp_sessions (create, retrieve) with their state, the answers the next creations
// and reads give (`failNext`, `refuseNext`, `failRetrieve`, `answerRetrieve`; `holdRetrieve` keeps
// a read's answer until the test releases it), the inbound
// `crypto.onramp_session_updated` events (`setStatus` alone moves a session without one: an event
// lost), and the provider's delivery itself: `fulfil` sends real devnet crypto to the session's
// wallet and names its transaction in the session, as the provider does at the end.
// FakeCardProvider owns one and delegates to it; tests use it through FakeCardProvider.

type Json = Record<string, unknown>;

export const ONRAMP_SESSIONS_PATH = "/v1/crypto/onramp_sessions";
export const ONRAMP_UPDATED = "crypto.onramp_session_updated";

export type OnrampStatus =
  | "initialized"
  | "rejected"
  | "requires_payment"
  | "fulfillment_processing"
  | "fulfillment_complete";

export interface OnrampTransactionDetails {
  destination_currency: string | null;
  destination_amount: string | null;
  destination_network: string | null;
  destination_currencies: string[];
  destination_networks: string[];
  source_currency: string | null;
  source_amount: string | null;
  wallet_address: string | null;
  wallet_addresses: Record<string, string>;
  transaction_id: string | null;
  lock_wallet_address: boolean;
}

export interface OnrampSessionObject {
  id: string;
  object: "crypto.onramp_session";
  client_secret: string;
  created: number;
  livemode: boolean;
  status: OnrampStatus;
  redirect_url: string;
  customer_ip_address: string | null;
  metadata: Record<string, string>;
  transaction_details: OnrampTransactionDetails;
}

/** What the on-ramp part uses of the provider it belongs to. */
export interface OnrampHost {
  readonly requests: RecordedRequest[];
  /** Idempotent results per account (`${secretKey}\n${key}`), shared with the other calls. */
  readonly idempotency: Map<string, IdempotentResult>;
  now(): number;
  randomId(prefix: string, length?: number): string;
  event(type: string, object: Json, options: { livemode: boolean; created?: number }): CardEvent;
  sign(event: CardEvent, secret: string): SignedDelivery;
}

/** A retrieve kept waiting by `holdRetrieve`: read when it arrives, answered on `release()`. */
export interface RetrieveHold {
  /** Resolves once the retrieve has arrived (and the session has been read). */
  readonly reached: Promise<void>;
  release(): void;
}

/** Where `fulfil` sends the crypto from, and how it reads the chain. */
export interface OnrampDelivery {
  /** A funded devnet account (the provider's hot wallet). */
  wallet: WalletClient<Transport, Chain, Account>;
  chain: PublicClient;
  /** The devnet's USDC (for a `usdc` session). */
  usdc: Address;
  /** What is sent, in the currency's smallest unit. */
  units: bigint;
  /** What the provider says it delivered (transaction_details.destination_amount); default: `units` as decimals. */
  destinationAmount?: string;
  livemode: boolean;
  /** The card webhook signing secret the delivery is signed with. */
  secret: string;
}

export interface Fulfilment {
  txHash: Hex;
  /** The `crypto.onramp_session_updated` event (fulfillment_complete), signed. */
  delivery: SignedDelivery;
}

const DECIMALS: Record<string, number> = { usdc: 6, eth: 18 };
const NETWORKS = new Set(["ethereum", "base", "polygon", "solana", "bitcoin", "avalanche", "stellar"]);

/** Units as the provider writes amounts: a decimal string without trailing zeros. */
function decimal(units: bigint, decimals: number): string {
  const scale = 10n ** BigInt(decimals);
  const fraction = (units % scale).toString().padStart(decimals, "0").replace(/0+$/, "");
  return fraction ? `${units / scale}.${fraction}` : `${units / scale}`;
}

export class FakeCardOnramp {
  readonly sessions = new Map<string, OnrampSessionObject>();
  readonly #host: OnrampHost;
  #failCreates = 0;
  /** Retrieves still to fail, per session id. */
  readonly #failRetrieves = new Map<string, number>();
  #refusals: Array<{ message: string; extra: Json }> = [];
  /** What the next retrieve of a session answers in its place, per session id. */
  readonly #retrieveAnswers = new Map<string, Json>();
  /** Retrieves to keep waiting, per session id. */
  readonly #holds = new Map<string, { arrived(): void; released: Promise<void> }>();

  constructor(host: OnrampHost) {
    this.#host = host;
  }

  /** The next `times` creations answer 500 `api_error` (not stored under their key: a retry reaches the fake again). */
  failNext(times = 1): void {
    this.#failCreates = times;
  }

  /**
   * The next `times` retrieves of session `id` answer 500 `api_error` (the SDK retries a 500
   * twice: 3 fail one read of it); other sessions answer as usual.
   */
  failRetrieve(id: string, times = 3): void {
    this.#failRetrieves.set(id, times);
  }

  /**
   * The next retrieve of session `id` answers 200 with `body` in place of the session (another
   * session's object, a status the service does not know); later ones answer as usual.
   */
  answerRetrieve(id: string, body: Json): void {
    this.#retrieveAnswers.set(id, body);
  }

  /**
   * The next retrieve of session `id` is read when it arrives but answered only on `release()`,
   * so a test can act between the caller's read and its use of the answer.
   */
  holdRetrieve(id: string): RetrieveHold {
    let arrived = () => {};
    const reached = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    this.#holds.set(id, { arrived, released });
    return { reached, release };
  }

  /** The next creation is refused: 400 `invalid_request_error` with this message. */
  refuseNext(message: string, extra: Json = {}): void {
    this.#refusals.push({ message, extra });
  }

  /** On-ramp requests: `create` (POST) or `retrieve` (GET …/:id). */
  calls(kind: "create" | "retrieve" = "create"): RecordedRequest[] {
    return this.#host.requests.filter((r) =>
      kind === "create"
        ? r.method === "POST" && r.path === ONRAMP_SESSIONS_PATH
        : r.method === "GET" && r.path.startsWith(`${ONRAMP_SESSIONS_PATH}/`),
    );
  }

  session(id: string): OnrampSessionObject {
    const session = this.sessions.get(id);
    if (!session) throw new Error(`fake card provider: no on-ramp session ${id}`);
    return session;
  }

  /** The session moves at the provider (as it would, before it sends the event); the session. */
  setStatus(
    id: string,
    status: OnrampStatus,
    facts: { transactionId?: string; destinationAmount?: string; sourceAmount?: string } = {},
  ): OnrampSessionObject {
    const session = this.session(id);
    session.status = status;
    const details = session.transaction_details;
    if (facts.transactionId !== undefined) details.transaction_id = facts.transactionId;
    if (facts.destinationAmount !== undefined) details.destination_amount = facts.destinationAmount;
    if (facts.sourceAmount !== undefined) details.source_amount = facts.sourceAmount;
    return session;
  }

  /** `crypto.onramp_session_updated` with the session as it stands now (a snapshot), or any object. */
  updated(session: string | OnrampSessionObject, options: { livemode: boolean }): CardEvent {
    const object = typeof session === "string" ? this.session(session) : session;
    return this.#host.event(ONRAMP_UPDATED, { ...structuredClone(object) }, options);
  }

  /**
   * The provider delivers: sends `units` of the session's currency to its wallet from `wallet`,
   * waits for the receipt, marks the session fulfillment_complete with that transaction, and
   * hands back the signed event for the test to post.
   */
  async fulfil(id: string, delivery: OnrampDelivery): Promise<Fulfilment & { blockNumber: bigint }> {
    const prepared = await this.fulfilAnnouncedFirst(id, delivery);
    const blockNumber = await prepared.broadcast();
    return { txHash: prepared.txHash, delivery: prepared.delivery, blockNumber };
  }

  /**
   * The same delivery with its event first: the transaction is signed (so its hash is known) and
   * named in the signed event, but only `broadcast()` sends it (awaited to a successful receipt;
   * its block). Lets a test post the event before the chain has the transfer.
   */
  async fulfilAnnouncedFirst(
    id: string,
    delivery: OnrampDelivery,
  ): Promise<Fulfilment & { broadcast(): Promise<bigint> }> {
    const session = this.session(id);
    const details = session.transaction_details;
    const to = details.wallet_address as Address | null;
    if (!to) throw new Error(`fake card provider: on-ramp session ${id} has no wallet`);
    const currency = details.destination_currency ?? "usdc";
    const { wallet, chain, units } = delivery;
    const request = await wallet.prepareTransactionRequest(
      currency === "eth"
        ? { account: wallet.account, chain: wallet.chain, to, value: units }
        : {
            account: wallet.account,
            chain: wallet.chain,
            to: delivery.usdc,
            data: encodeFunctionData({ abi: erc20Abi, functionName: "transfer", args: [to, units] }),
          },
    );
    const serialized = await wallet.signTransaction(request);
    const txHash = keccak256(serialized);
    this.setStatus(id, "fulfillment_complete", {
      transactionId: txHash,
      destinationAmount: delivery.destinationAmount ?? decimal(units, DECIMALS[currency] ?? 18),
    });
    const event = this.updated(id, { livemode: delivery.livemode });
    return {
      txHash,
      delivery: this.#host.sign(event, delivery.secret),
      broadcast: async () => {
        const sent = await chain.sendRawTransaction({ serializedTransaction: serialized });
        if (sent !== txHash) throw new Error(`fake card provider: sent ${sent}, signed ${txHash}`);
        const receipt = await chain.waitForTransactionReceipt({ hash: sent });
        if (receipt.status !== "success") throw new Error(`on-ramp delivery ${sent} ended ${receipt.status}`);
        return receipt.blockNumber;
      },
    };
  }

  // ---- the API: /v1/crypto/onramp_sessions -------------------------------------------------------

  handle(method: string, url: URL, record: RecordedRequest, secretKey: string, reply: Reply, fail: Fail) {
    const path = url.pathname;
    if (method === "GET" && path.startsWith(`${ONRAMP_SESSIONS_PATH}/`)) {
      const id = decodeURIComponent(path.slice(ONRAMP_SESSIONS_PATH.length + 1));
      const failing = this.#failRetrieves.get(id) ?? 0;
      if (failing > 0) {
        this.#failRetrieves.set(id, failing - 1);
        return fail(500, "api_error", "The crypto on-ramp is temporarily unavailable (fake card provider).");
      }
      const session = this.sessions.get(id);
      if (!session)
        return fail(404, "invalid_request_error", `No such crypto.onramp_session: '${id}'`, {
          code: "resource_missing",
        });
      // The answer is what the session is as the request arrives, even when it is held.
      const answer = this.#retrieveAnswers.get(id) ?? structuredClone(session);
      this.#retrieveAnswers.delete(id);
      const hold = this.#holds.get(id);
      if (!hold) return reply(200, answer);
      this.#holds.delete(id);
      hold.arrived();
      void hold.released.then(() => reply(200, answer));
      return;
    }
    if (method !== "POST" || path !== ONRAMP_SESSIONS_PATH)
      return fail(404, "invalid_request_error", `Unrecognized request URL (${method}: ${path}).`);

    const { form } = record;
    const fingerprint = JSON.stringify(Object.entries(form).sort(([a], [b]) => (a < b ? -1 : 1)));
    const idemKey = record.idempotencyKey ? `${secretKey}\n${record.idempotencyKey}` : undefined;
    const before = idemKey ? this.#host.idempotency.get(idemKey) : undefined;
    if (before) {
      if (before.form !== fingerprint)
        return fail(
          400,
          "idempotency_error",
          `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${record.idempotencyKey}' if you meant to execute a different request.`,
        );
      return reply(before.status, before.body, { "idempotent-replayed": "true" });
    }
    if (this.#failCreates > 0) {
      this.#failCreates -= 1;
      return fail(500, "api_error", "The crypto on-ramp is temporarily unavailable (fake card provider).");
    }
    const refusal = this.#refusals.shift();
    if (refusal) return fail(400, "invalid_request_error", refusal.message, refusal.extra);

    const invalid = this.#invalid(form);
    if (invalid) return fail(400, "invalid_request_error", invalid.message, { param: invalid.param });
    const metadata: Record<string, string> = {};
    const walletAddresses: Record<string, string> = {};
    const listed = (name: string) =>
      Object.entries(form)
        .filter(([k]) => new RegExp(`^${name}\\[\\d+\\]$`).test(k))
        .map(([, v]) => v);
    for (const [k, v] of Object.entries(form)) {
      const m = /^metadata\[(.+)\]$/.exec(k);
      if (m?.[1]) metadata[m[1]] = v;
      const w = /^wallet_addresses\[(.+)\]$/.exec(k);
      if (w?.[1]) walletAddresses[w[1]] = v;
    }
    const livemode = secretKey.includes("_live_");
    const id = this.#host.randomId("cos_", 24);
    const network = form.destination_network ?? null;
    const session: OnrampSessionObject = {
      id,
      object: "crypto.onramp_session",
      client_secret: `${id}_secret_${this.#host.randomId("", 25)}`,
      created: Math.floor(this.#host.now() / 1000),
      livemode,
      status: "initialized",
      redirect_url: `https://crypto.link.com?session_hash=${this.#host.randomId("", 32)}`,
      customer_ip_address: form.customer_ip_address ?? null,
      metadata,
      transaction_details: {
        destination_currency: form.destination_currency ?? null,
        destination_amount: form.destination_amount ?? null,
        destination_network: network,
        destination_currencies: listed("destination_currencies"),
        destination_networks: listed("destination_networks"),
        source_currency: form.source_currency ?? "usd",
        source_amount: form.source_amount ?? null,
        wallet_address: network ? (walletAddresses[network] ?? null) : null,
        wallet_addresses: walletAddresses,
        transaction_id: null,
        lock_wallet_address: form.lock_wallet_address === "true",
      },
    };
    this.sessions.set(id, session);
    // The stored answer is a snapshot: a replay returns the session as it was created.
    if (idemKey)
      this.#host.idempotency.set(idemKey, { form: fingerprint, status: 200, body: structuredClone(session) });
    return reply(200, session);
  }

  /** What the provider refuses in a creation's parameters, as it words it. */
  #invalid(form: Record<string, string>): { message: string; param: string } | undefined {
    if (form.source_amount !== undefined && form.destination_amount !== undefined)
      return {
        message: "You may only specify one of these parameters: source_amount, destination_amount.",
        param: "source_amount",
      };
    const network = form.destination_network;
    if (network !== undefined && !NETWORKS.has(network))
      return { message: `Invalid destination_network: ${network}`, param: "destination_network" };
    const currency = form.destination_currency;
    if (currency !== undefined && !(currency in DECIMALS))
      return { message: `Invalid destination_currency: ${currency}`, param: "destination_currency" };
    if (form.lock_wallet_address === "true" && !(network && form[`wallet_addresses[${network}]`]))
      return {
        message: "lock_wallet_address requires a wallet address for the destination network.",
        param: "lock_wallet_address",
      };
    const address = network ? form[`wallet_addresses[${network}]`] : undefined;
    if (address !== undefined && network === "ethereum" && !/^0x[0-9a-fA-F]{40}$/.test(address))
      return { message: `Invalid wallet address for ${network}: ${address}`, param: "wallet_addresses" };
    return undefined;
  }
}
