/** Where skiplock's warnings go, and the one way to say a recurring warning once. */

export type Logger = (level: 'warn' | 'error', message: string, fields?: Record<string, unknown>) => void;

export const consoleLog: Logger = (level, message, fields) => console[level](`[skiplock] ${message}`, fields ?? '');

/** A warning that would repeat every tick (or every second in one): said once per key and instance. */
export type WarnOnce = (key: string, message: string, fields?: Record<string, unknown>) => void;

export function warnOnceWith(log: Logger): WarnOnce {
  const said = new Set<string>();
  return (key, message, fields) => {
    if (said.has(key)) return;
    said.add(key);
    log('warn', message, fields);
  };
}
