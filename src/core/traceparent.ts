/** W3C Trace Context's traceparent header: its syntax, checked without any tracing library. */
export const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A traceparent W3C Trace Context accepts (not version ff, not an all-zero id). */
export function isTraceparent(value: string): boolean {
  const m = TRACEPARENT.exec(value);
  return m !== null && m[1] !== 'ff' && !/^0+$/.test(m[2]!) && !/^0+$/.test(m[3]!);
}
