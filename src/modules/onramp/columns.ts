import { columnsOf } from "../../platform/db/columns.ts";
import type { OnrampSessionsTable } from "../../platform/db/schema-exchange.ts";

// The onramp_sessions table's columns, every one (platform/db/columns.ts), in the table's order
// (SELECT * returned them so): what repo.ts selects and returns where it wants the whole row.
// Apart from repo.ts to keep each file small.

/** A session's whole row (OnrampRow), named column by column (platform/db/columns.ts). */
export const ONRAMP_COLUMNS = columnsOf<OnrampSessionsTable>({
  id: true,
  workspace_id: true,
  environment: true,
  provider: true,
  provider_session_id: true,
  status: true,
  wallet_type: true,
  wallet_address: true,
  destination_currency: true,
  destination_network: true,
  source_amount: true,
  destination_amount: true,
  client_secret: true,
  redirect_url: true,
  transaction_id: true,
  credited_amount: true,
  completed_at: true,
  confirm_checked_at: true,
  created_at: true,
  updated_at: true,
  reconciled_at: true,
  confirm_given_up_at: true,
  network: true,
});
