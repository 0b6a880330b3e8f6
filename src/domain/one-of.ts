// Whether a value is a member of one of the domain's closed lists (tokens, statuses, kinds): the
// one check behind every `is…` guard of such a list.

/** `value` is one of `members`, a list of string literals: a type guard for any such list. */
export function isOneOf<T extends string>(members: readonly T[], value: unknown): value is T {
  return typeof value === "string" && (members as readonly string[]).includes(value);
}
