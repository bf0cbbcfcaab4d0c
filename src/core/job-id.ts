/** Job ids: PostgreSQL's bigint, carried as canonical decimal strings. */
export const INT8_MAX = 9223372036854775807n;

/** True for a string that can be a job id (a positive int8 in canonical form). */
export function isJobId(id: string): boolean {
  return /^[1-9]\d{0,18}$/.test(id) && BigInt(id) <= INT8_MAX;
}
