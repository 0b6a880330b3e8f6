import { type Kysely, sql } from "kysely";

// The gas a transaction can cost its wallet, kept for the balance check (transfers/funds.ts): the
// limit each transaction is signed with, and the limits a payout recorded but not signed yet will
// be signed with. Plain ETH to a contract is signed with up to 150,000 (its receiving code runs),
// not 21,000, so what is on its way out cannot be priced by its token alone. Null: recorded before
// this migration, priced as a transfer of its token (21,000 for ETH, 100,000 for an ERC-20).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE chain_transactions ADD COLUMN gas_limit bigint`.execute(db);
  await sql`ALTER TABLE payouts ADD COLUMN gas_limit bigint`.execute(db);
}
