/** Callback URLs (src/runtime/events/callback-token.ts) and their configuration from the environment. */
import { describe, expect, test } from 'vitest';
import { callbacksFromEnv } from '../../src/platform/env-options.ts';
import { createCallbackSigner } from '../../src/runtime/events/callback-token.ts';

describe('callback tokens', () => {
  const signer = createCallbackSigner({ secret: 'a-secret-of-16-chars', publicUrl: 'https://jobs.example.com/skiplock/' });

  test('a URL names its job and step, verifies, and is the same each time; another secret refuses it', async () => {
    const url = await signer.urlFor('42', 'approve/step ü');
    expect(url).toMatch(/^https:\/\/jobs\.example\.com\/skiplock\/v1\/callbacks\/42\.[\w-]+\.[\w-]{43}$/);
    expect(await signer.urlFor('42', 'approve/step ü')).toBe(url);
    const token = url.split('/').pop()!;
    expect(await signer.verify(token)).toEqual({ jobId: '42', stepId: 'approve/step ü' });
    const other = createCallbackSigner({ secret: 'another-secret-16ch', publicUrl: 'https://x.test' });
    expect(await other.verify(token)).toBeNull();
    const [job, step, sig] = token.split('.');
    for (const forged of [`43.${step}.${sig}`, `${job}.${step}x.${sig}`, `${job}.${step}.${sig!.slice(1)}A`, '', 'a.b.c', `${job}.${step}`, `${token}.x`])
      expect(await signer.verify(forged)).toBeNull();
  });

  test('options are checked', () => {
    expect(() => createCallbackSigner({ secret: 'short', publicUrl: 'https://x.test' })).toThrow(/16 characters/);
    expect(() => createCallbackSigner({ secret: 'long-enough-secret!', publicUrl: 'not a url' })).toThrow(/absolute URL/);
  });

  test('from the environment: PUBLIC_URL and the base path, CALLBACK_SECRET or else API_TOKEN', () => {
    expect(callbacksFromEnv({ API_TOKEN: 'api-token-0123456789' })).toBeUndefined();
    expect(callbacksFromEnv({ API_TOKEN: 'api-token-0123456789', PUBLIC_URL: 'https://app.test/' }, '/api/skiplock')).toEqual({ secret: 'api-token-0123456789', publicUrl: 'https://app.test/api/skiplock' });
    expect(callbacksFromEnv({ API_TOKEN: 'api-token-0123456789', CALLBACK_SECRET: 'callback-secret-0123', PUBLIC_URL: 'https://app.test' })).toEqual({ secret: 'callback-secret-0123', publicUrl: 'https://app.test' });
    expect(() => callbacksFromEnv({ CALLBACK_SECRET: 'short', PUBLIC_URL: 'https://app.test' })).toThrow(/16/);
    expect(() => callbacksFromEnv({ API_TOKEN: 'api-token-0123456789', PUBLIC_URL: 'app.test' })).toThrow(/PUBLIC_URL/);
  });
});
