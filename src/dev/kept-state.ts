/**
 * What `skiplock dev` keeps in its state directory (.skiplock/) from one run to the next, so that
 * the variables pasted from one run stay valid in the next: the proxy's token and both ports
 * (dev-state.json), the local API token (api-token) and CRON_SECRET (cron-secret). Every such
 * file holds a secret and is written private (mode 0600).
 */
import { randomBytes } from 'node:crypto';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PROXY_TOKEN } from '../store/drivers/local-proxy-token.ts';

/** What a run keeps for the next, so that the variables pasted from it stay valid: DIR/dev-state.json. */
export interface KeptState {
  proxyToken: string;
  pgPort: number;
  proxyPort: number;
}

/** The project's local API token: DIR/api-token, written with a new random one the first time. */
export async function localApiToken(stateDir: string): Promise<string> {
  const file = join(stateDir, 'api-token');
  const kept = (await readFile(file, 'utf8').catch(() => '')).trim();
  if (kept.length >= 16) return kept;
  const token = randomBytes(32).toString('base64url');
  await writeFile(file, `${token}\n`, { mode: 0o600 });
  return token;
}

/** The last run's proxy token and ports; whatever is missing or malformed is left out (made anew). */
export async function readKeptState(file: string): Promise<Partial<KeptState>> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file, 'utf8'));
  } catch {
    return {};
  }
  const state = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as Record<string, unknown>;
  const portOf = (value: unknown) => (Number.isInteger(value) && (value as number) > 0 && (value as number) <= 65_535 ? (value as number) : undefined);
  return {
    ...(typeof state.proxyToken === 'string' && PROXY_TOKEN.test(state.proxyToken) ? { proxyToken: state.proxyToken } : {}),
    ...(portOf(state.pgPort) ? { pgPort: portOf(state.pgPort)! } : {}),
    ...(portOf(state.proxyPort) ? { proxyPort: portOf(state.proxyPort)! } : {}),
  };
}

export async function writeKeptState(file: string, state: KeptState): Promise<void> {
  await writePrivate(file, `${JSON.stringify(state, null, 2)}\n`);
}

/**
 * Writes a file of secrets: created private (mode 0600 from its first byte, in a new file beside
 * it), then renamed over the old one, so that a crash leaves the old file or the new, never half.
 */
export async function writePrivate(file: string, text: string): Promise<void> {
  const temporary = `${file}.${process.pid}.tmp`;
  await rm(temporary, { force: true });
  await writeFile(temporary, text, { mode: 0o600, flag: 'wx' });
  await rename(temporary, file);
}

/** A random secret kept in `file` (mode 0600), made on first use so that it survives restarts like the data. */
export async function keptSecret(file: string): Promise<string> {
  const kept = await readFile(file, 'utf8').then((text) => text.trim(), () => '');
  if (kept) return kept;
  const secret = randomBytes(24).toString('base64url');
  await writeFile(file, `${secret}\n`, { mode: 0o600 });
  return secret;
}
