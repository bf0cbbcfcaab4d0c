/**
 * The secrets a deployment is configured with (API_TOKEN, CRON_SECRET, METRICS_TOKEN): refused
 * when missing or guessable, with a message naming the variable and where a platform sets it.
 */
import { SkiplockError } from '../core/errors.ts';
import { MIN_SECRET_LENGTH } from '../core/types.ts';

export { MIN_SECRET_LENGTH };

/** Where the user sets a variable, by platform: said in the 503 an unconfigured deployment answers. */
export type SecretPlatform = 'cloudflare' | 'vercel' | 'node';

const WHERE: Record<SecretPlatform, (name: string) => string> = {
  cloudflare: (name) => `set it with \`wrangler secret put ${name}\` (locally: a line ${name}=… in .dev.vars, then restart wrangler dev)`,
  vercel: (name) => `set it in the Vercel project's Settings → Environment Variables (locally: a line ${name}=… in .env.local)`,
  node: (name) => `set it in the process's environment (${name}=…)`,
};

export interface SecretSpec {
  name: string;
  value: string | undefined;
  required: boolean;
}

/** What is wrong with a secret, or undefined when it can be used. */
export function secretProblem({ name, value, required }: SecretSpec, platform?: SecretPlatform): string | undefined {
  const fix = `generate one of at least ${MIN_SECRET_LENGTH} characters (\`openssl rand -base64 32\`; \`npx skiplock dev\` prints one)` +
    (platform ? `, and ${WHERE[platform](name)}` : '');
  if (value === undefined || value === '') return required ? `${name} is not set: ${fix}` : undefined;
  if (typeof value !== 'string') return `${name} must be a string`;
  if (value.length < MIN_SECRET_LENGTH) return `${name} is too short (${value.length} characters, at least ${MIN_SECRET_LENGTH}): ${fix}`;
  return undefined;
}

/** Throws not_configured for the first secret that cannot be used. */
export function checkSecrets(secrets: readonly SecretSpec[], platform?: SecretPlatform): void {
  for (const secret of secrets) {
    const problem = secretProblem(secret, platform);
    if (problem) throw new SkiplockError('not_configured', problem);
  }
}
