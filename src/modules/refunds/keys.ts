import { KeyTaken, ResourceKeys } from "../../platform/db/resource-keys.ts";

// A refund's (or a return's) Idempotency-Key (D19: like payouts) in the platform's idempotency
// records (scope "refunds"): claimed in the transaction that records the refund, naming it, never
// lapsing. A repeat is answered with the refund as it stands; the same key with another request is
// a conflict.

export const refundKeys = new ResourceKeys("refunds");
export { KeyTaken as RefundKeyTaken };
