/**
 * The connection string as users paste it, and what to tell them when it cannot work: one line
 * naming the variable, the server and the reason, never the password.
 */

/** The sslmode values pg 8 already treats as verify-full, and warns about (a 7-line SECURITY WARNING). */
const VERIFY_FULL_ALIASES = new Set(['prefer', 'require', 'verify-ca']);

export interface PgUrlOptions {
  connectionString: string;
  /** From `channel_binding=require` (Neon's connection strings carry it): SCRAM-SHA-256-PLUS. */
  enableChannelBinding?: boolean;
}

/**
 * A connection string for `pg`, with the parameters written for libpq (as Neon's console gives
 * them: `?sslmode=require&channel_binding=require`) turned into what pg 8 does with them.
 * pg 8 treats sslmode=prefer/require/verify-ca as verify-full (the certificate and the host name
 * are checked), as Neon documents `require` and recommends `verify-full`; so they become
 * `verify-full`: the same behaviour, without pg's warning. `channel_binding` becomes pg's
 * `enableChannelBinding`. A string that is not a URL is left as it is.
 */
export function pgUrlOptions(connectionString: string): PgUrlOptions {
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch {
    return { connectionString };
  }
  const params = url.searchParams;
  const sslmode = params.get('sslmode');
  const channelBinding = params.get('channel_binding');
  if (params.get('uselibpqcompat') === 'true' || (sslmode === null && channelBinding === null)) return { connectionString };
  if (sslmode !== null && VERIFY_FULL_ALIASES.has(sslmode)) params.set('sslmode', 'verify-full');
  params.delete('channel_binding');
  return {
    connectionString: url.toString(),
    ...(channelBinding === null ? {} : { enableChannelBinding: channelBinding === 'require' }),
  };
}

/** What is wrong with a connection string's form, or undefined when pg can use it. */
export function databaseUrlProblem(value: string, name = 'DATABASE_URL'): string | undefined {
  if (value.startsWith('/') || value.startsWith('socket:')) return undefined; // a Unix socket, as pg accepts it
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (url && (url.protocol === 'postgres:' || url.protocol === 'postgresql:') && url.hostname !== '') return undefined;
  return `${name} is not a PostgreSQL URL (postgres://user:password@host:port/database): got ${JSON.stringify(redact(value))}`;
}

/**
 * Refuses, when a driver is created, what cannot be a connection string: `undefined` (an unset
 * `process.env.DATABASE_URL!`) or text that is not a PostgreSQL URL. Without it the first
 * statement fails with "Cannot read properties of undefined" or "getaddrinfo ENOTFOUND base".
 */
export function checkConnectionString(value: unknown, driver: string): asserts value is string {
  if (typeof value !== 'string' || value.trim() === '')
    throw new TypeError(`${driver}: no connection string (got ${value === '' ? 'an empty string' : String(value)}): is DATABASE_URL set?`);
  const problem = databaseUrlProblem(value, 'the connection string');
  if (problem) throw new TypeError(`${driver}: ${problem}`);
}

const NETWORK_REASONS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed',
  ETIMEDOUT: 'timed out',
  ECONNRESET: 'connection reset',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
};
// Refusals of the login itself: bad password, no pg_hba entry, no such database or role, server starting.
const LOGIN_SQLSTATES = new Set(['28P01', '28000', '3D000', '57P03', '53300']);

/**
 * One line for an error met while connecting (network, TLS, login), naming the variable and the
 * server; undefined for any other error (a query's), which the caller reports as it does today.
 */
export function describeConnectionError(error: unknown, connectionString: string, name = 'DATABASE_URL'): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  // Node reports a refused dual-stack "localhost" as an AggregateError holding one error per address.
  const first = error instanceof AggregateError && error.errors.length > 0 ? error.errors[0] : error;
  const { code, message } = first as { code?: unknown; message?: unknown };
  const text = typeof message === 'string' ? message : '';
  const server = serverOf(connectionString);
  const reason = typeof code === 'string' && NETWORK_REASONS[code] ? NETWORK_REASONS[code]
    : /does not support SSL/i.test(text) ? 'the server does not support SSL; remove sslmode from the URL for a local server'
    : typeof code === 'string' && /CERT|SSL|TLS/.test(code) ? `TLS: ${text}`
    : /Connection terminated (unexpectedly|due to connection timeout)/.test(text) ? text.toLowerCase()
    : undefined;
  if (reason !== undefined) return `${name}: cannot connect to PostgreSQL at ${server} (${reason})`;
  if (typeof code === 'string' && LOGIN_SQLSTATES.has(code)) return `${name}: PostgreSQL at ${server} refused the login: ${text}`;
  return undefined;
}

function serverOf(connectionString: string): string {
  try {
    const url = new URL(connectionString);
    return `${url.hostname}:${url.port || '5432'}`;
  } catch {
    return 'the configured server';
  }
}

/** The text with any password between `user:` and `@` replaced by `***`. */
function redact(text: string): string {
  return text.replace(/^([^:/?#]+:\/\/[^:/@]*):[^@]*@/, '$1:***@');
}
