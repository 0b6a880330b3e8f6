import type { ChainToken, Hex } from "../../chain/network.ts";
import type { AppContext } from "../../context.ts";
import { InsufficientBalance, InsufficientGas } from "../../domain/errors.ts";
import { formatAmount, NATIVE_TOKEN, TOKEN_DECIMALS } from "../../domain/money.ts";
import { type Committed, checkFunds } from "../../domain/payout-funds.ts";
import { spendsItsPayment } from "../../domain/payout-state.ts";
import {
  heldInbox,
  type OpenInboxTransfer,
  settlingWhole,
  stillToSettle,
  type UnsettledPayment,
} from "../../domain/unsettled-payments.ts";
import type { Db } from "../../platform/db/database.ts";
import { runFences } from "../../platform/db/fences.ts";
import type { SessionTurns } from "../../platform/db/wallet-lock.ts";
import type { Rail, WalletFunds } from "../../rails/rail.ts";
import type { PaymentsService } from "../payments/service.ts";
import { claimPayoutKey } from "./keys.ts";
import type { NewTransfer, TransferRow } from "./repo.ts";
import * as sending from "./sending-repo.ts";

// The balance check of a live payout (part 4.10), made so that it holds across instances: in a
// turn of the wallet's funds (a lock across instances, wallet-lock.ts), what is already on its way
// out is read from the database, the payout is checked against the balance
// (domain/payout-funds.ts) and recorded. A second instance's payout from the same wallet waits
// for that turn to end, then sees this one among what is on its way out. A settlement takes no
// turn: it spends only what every other check holds for it.

/**
 * What the payments module holds on a wallet: unsettled payments' money and open inbox transfers'
 * (read, or as SQL a sandbox payout's statement carries).
 */
export type HeldMoney = Pick<PaymentsService, "unsettledOn" | "openInboxOn" | "openInboxHeld">;

/** The money held on a wallet: its unsettled payments and its open inbox transfers. */
type Held = [UnsettledPayment[], OpenInboxTransfer[]];

/**
 * The wallet's funds read as its payout was ordered, before the payout's turn (run.ts): any read
 * is sound for the check (what is leaving is counted from the read's own mined nonce), so one
 * begun early serves; and the money held on the wallet, read once that read answered (after the
 * balance, as the check needs). Undefined where a read failed: the check reads itself.
 */
export interface FundsAhead {
  rail: Rail;
  from: Hex;
  read: Promise<WalletFunds | undefined>;
  held: Promise<Held | undefined>;
}

/**
 * Begins the reads of FundsAhead for a payout of `token` from `from` on a pipelined `rail`: the
 * payouts ordered together share them (the rail joins a balance read in flight, and the payments
 * module answers the wallets asked for in one round with one query).
 */
export function readAhead(rail: Rail, from: Hex, token: ChainToken, payments: HeldMoney): FundsAhead {
  const tokens: ChainToken[] = token === NATIVE_TOKEN ? [token] : [token, NATIVE_TOKEN];
  // A failed read is made again by the check, which reports its failure.
  const read = rail.funds(from, tokens).catch(() => undefined);
  const held = read
    .then((funds) => (funds ? heldOn(payments, rail, from) : undefined))
    .catch(() => undefined);
  return { rail, from, read, held };
}

function heldOn(payments: HeldMoney, rail: Rail, from: Hex): Promise<Held> {
  return Promise.all([payments.unsettledOn(rail.network, from), payments.openInboxOn(rail.network, from)]);
}

/**
 * Records the payout (processing, leased) if the wallet can pay it; undefined if its
 * idempotencyKey is taken. `gasUnits`: the gas limits the rail will sign its transactions with
 * (MoveHooks.persist), the most gas it can cost; reserved at the fee per gas it is signed with.
 */
export async function recordIfFunded(
  ctx: AppContext,
  turns: SessionTurns,
  payments: HeldMoney,
  rail: Rail,
  payout: NewTransfer,
  gasUnits?: Promise<bigint>,
  ahead?: FundsAhead,
): Promise<TransferRow | undefined> {
  const { environment } = payout.scope;
  const from = payout.fromAddress as Hex;
  const token = payout.tokenSymbol as ChainToken;
  const erc20Gas = rail.gasRequired("USDC");
  const ethGas = rail.gasRequired(NATIVE_TOKEN);
  const perUnit = rail.gasCost(1n);
  const gasPaid = erc20Gas !== undefined && ethGas !== undefined && perUnit !== undefined;
  const gas = gasPaid ? Promise.all([erc20Gas, ethGas, perUnit, gasUnits]) : Promise.resolve(null);
  gas.catch(() => undefined); // awaited below; not an unhandled rejection meanwhile
  // A settlement spends its own payment's money: that payment is not held against it.
  const spent = spendsItsPayment(payout.kind) ? payout.paymentId : null;
  const tokens: ChainToken[] = gasPaid && token !== NATIVE_TOKEN ? [token, NATIVE_TOKEN] : [token];
  // A pipelined rail reads its balances at one block with its mined nonce (Rail.funds): read here,
  // beside the gas. Any other rail's are read once, in the turn, after what is leaving (below).
  const early = ahead?.rail === rail && ahead.from === from ? ahead : undefined;
  const readFunds = async (): Promise<{ funds: WalletFunds; held?: Promise<Held | undefined> }> => {
    const read = await early?.read;
    if (early && read && tokens.every((t) => read.balances[t] !== undefined))
      return { funds: read, held: early.held };
    return { funds: await rail.funds(from, tokens) };
  };
  const [pipelined, gasCosts] = await Promise.all([rail.pipelined ? readFunds() : null, gas]);
  const funds = pipelined?.funds ?? null;
  // The money of payments received and not settled yet: a payment's gross while its settlement
  // is not recorded, its settlement's transfer from then on (one recorded after this read is in
  // the gross: committedFrom leaves it out), so never both, never neither. One that completes
  // meanwhile is at worst subtracted twice (a refusal), never not at all. Read after the balance
  // (a payment that balance holds is among them) and before what is leaving (in the turn): with
  // a balance read already, now (read after the early balance read, when that one serves).
  // And the open inbox transfers' money (issue 39), but for the one a return sends back.
  const readHeld = () => heldOn(payments, rail, from);
  const heldNow = pipelined ? (pipelined.held?.then((held) => held ?? readHeld()) ?? readHeld()) : undefined;
  heldNow?.catch(() => undefined); // awaited in the turn; not an unhandled rejection meanwhile
  const checkAndRecord = async (
    db: Db,
    unsettled: UnsettledPayment[],
    inbox: OpenInboxTransfer[],
    leaving: (db: Db) => Promise<Leaving>,
  ): Promise<TransferRow | undefined> => {
    // A repeat of an idempotency key in flight (on another instance): its original is among
    // what is on its way out, so the check would refuse it; it is answered as a repeat instead.
    const { idempotencyKey } = payout;
    // The orderer's fence first (a refund's share of its payment): a refusal records nothing. A
    // fenced transfer claims no payout key (validate.ts): a taken key here would commit the fence.
    await runFences(db, payout.fences ?? []);
    if (idempotencyKey && !(await claimPayoutKey(db, { ...payout, idempotencyKey }))) return undefined;
    const { committed, balances } = await leaving(db);
    const units = gasCosts?.[3];
    const verdict = checkFunds({
      token,
      amount: payout.amount,
      balances,
      committed,
      unsettled: heldInbox(stillToSettle(unsettled), inbox),
      gas: gasCosts
        ? {
            erc20: gasCosts[0],
            eth: gasCosts[1],
            perUnit: gasCosts[2],
            ...(units === undefined ? {} : { own: units * gasCosts[2] }),
          }
        : null,
    });
    if (!verdict.ok && verdict.short === "balance") {
      const decimals = TOKEN_DECIMALS[token];
      throw new InsufficientBalance({
        available: formatAmount(verdict.available < 0n ? 0n : verdict.available, decimals),
        requested: formatAmount(payout.amount, decimals),
        tokenSymbol: token,
        network: payout.network,
      });
    }
    if (!verdict.ok) {
      const shown = verdict.ethBalance < 0n ? 0n : verdict.ethBalance;
      // What it lacks: the available ETH may be below zero (what is leaving takes more than it holds).
      const short = verdict.required - verdict.ethBalance;
      throw new InsufficientGas(
        {
          ethBalance: formatAmount(shown, 18),
          required: formatAmount(verdict.required, 18),
          action: `Send at least ${formatAmount(short, 18)} ETH to ${from}, or wait for the automatic gas top-up`,
        },
        short,
      );
    }
    return sending.insertPayout(db, payout, ctx.config.transferLeaseSeconds, gasPaid ? units : undefined);
  };
  // A settlement spends only its own payment's money, which every other transfer's check holds
  // for it with its transfers' gas (unsettled-payments.ts), whether or not it is recorded yet: no
  // transfer recorded beside it can take that, so it needs no turn of the wallet, and the
  // settlements of a wallet's payments are checked, recorded and sent together.
  const turn = <T>(task: () => Promise<T>): Promise<T> =>
    spendsItsPayment(payout.kind)
      ? task()
      : turns.run(`payout-funds:${environment}:${from.toLowerCase()}`, task);
  return turn(async () => {
    const [owed, open] = await (heldNow ?? readHeld());
    const unsettled = owed.filter((p) => p.id !== spent);
    const inbox = open.filter((t) => t.id !== payout.unmatchedTransferId);
    const whole = settlingWhole(unsettled);
    let leaving: (db: Db) => Promise<Leaving>;
    if (funds) {
      // Tied to its mined nonce: what is leaving is every transaction from that nonce on, read in
      // the transaction that records this one.
      const { minedNonce, balances } = funds;
      leaving = async (db) => ({
        committed: await sending.committedFrom(db, rail.network, from, minedNonce, whole),
        balances,
      });
    } else {
      // Without a mined nonce to tie the balance to (a smart account), what is leaving is every
      // transfer still processing: it is read first and the balance after it, so that one
      // completing in between is at worst subtracted twice (a refusal), never not at all. Both
      // before the transaction: a rail may read its balance from the database (the ledger).
      const committed = await sending.committedFrom(ctx.db, rail.network, from, null, whole);
      const { balances } = await rail.funds(from, tokens);
      leaving = async () => ({ committed, balances });
    }
    // With a key, its claim, the check and the record are one transaction: a refusal leaves the
    // key unclaimed, and a concurrent repeat waits for this one to commit, then is answered as one.
    // So are an orderer's fences and the record they fence.
    return payout.idempotencyKey || payout.fences?.length
      ? ctx.db.transaction().execute((trx) => checkAndRecord(trx, unsettled, inbox, leaving))
      : checkAndRecord(ctx.db, unsettled, inbox, leaving);
  });
}

/** What is on its way out of the wallet, and the balance it is checked against. */
interface Leaving {
  committed: Map<string, Committed>;
  balances: WalletFunds["balances"];
}
