/**
 * Callback URLs (ctx.createCallback): `<publicUrl>/v1/callbacks/<token>`, where the token names
 * the job and the step and carries an HMAC-SHA-256 of both under a secret only the deployment
 * knows — unguessable, and checked before any statement runs. Web Crypto, so it works on Workers.
 */
import { permanentTypeError } from '../../core/errors.ts';
import { createHmac, fromBase64Url, toBase64Url } from '../../core/hmac.ts';

export interface CallbackOptions {
  /**
   * The HMAC key of callback tokens: at least 16 characters, kept secret. Changing it makes every
   * callback URL handed out before it invalid (404). The Cloudflare and Vercel entry points use
   * CALLBACK_SECRET, or else API_TOKEN.
   */
  secret: string;
  /**
   * Where this deployment's HTTP API is reached from outside, e.g. `https://jobs.example.com` (or
   * with the prefix the app is mounted under): callback URLs start with it. The Cloudflare and
   * Vercel entry points use PUBLIC_URL and append their base path.
   */
  publicUrl: string;
}

export interface CallbackSigner {
  urlFor(jobId: string, stepId: string): Promise<string>;
  /** The job and step a token names, or null when it is malformed or its signature is wrong. */
  verify(token: string): Promise<{ jobId: string; stepId: string } | null>;
}

const encoder = new TextEncoder();

const message = (jobId: string, stepId: string) => `skiplock-callback\n${jobId}\n${stepId}`;

export function createCallbackSigner(options: CallbackOptions): CallbackSigner {
  if (typeof options?.secret !== 'string' || options.secret.length < 16) throw new TypeError('callbacks.secret must be a string of at least 16 characters');
  let base: URL;
  try {
    base = new URL(options.publicUrl);
  } catch {
    throw new TypeError(`callbacks.publicUrl must be an absolute URL, got ${JSON.stringify(options.publicUrl)}`);
  }
  const prefix = base.href.replace(/\/+$/, '');
  const hmac = createHmac(options.secret);
  return {
    async urlFor(jobId, stepId) {
      const signature = await hmac.sign(message(jobId, stepId));
      return `${prefix}/v1/callbacks/${jobId}.${toBase64Url(encoder.encode(stepId))}.${toBase64Url(signature)}`;
    },
    async verify(token) {
      const parts = token.split('.');
      if (parts.length !== 3 || !/^\d{1,19}$/.test(parts[0]!)) return null;
      const step = fromBase64Url(parts[1]!);
      const signature = fromBase64Url(parts[2]!);
      if (!step || !signature || signature.length !== 32) return null;
      let stepId: string;
      try {
        stepId = new TextDecoder('utf-8', { fatal: true }).decode(step);
      } catch {
        return null;
      }
      const ok = await hmac.verify(signature, message(parts[0]!, stepId));
      return ok ? { jobId: parts[0]!, stepId } : null;
    },
  };
}

/** ctx.createCallback without the option: a mistake no retry fixes. */
export function callbacksNotConfigured(): Error {
  return permanentTypeError('ctx.createCallback needs callback URLs configured: createSkiplock({ callbacks: { secret, publicUrl } }) (PUBLIC_URL and CALLBACK_SECRET on the Cloudflare and Vercel entry points)');
}
