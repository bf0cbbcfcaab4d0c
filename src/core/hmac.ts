/**
 * HMAC-SHA-256 under a secret, with WebCrypto (it runs in workerd, Node and browsers alike), and
 * base64url: what the signed tokens share — callback URLs (src/runtime/events/callback-token.ts)
 * and stream read tokens (src/runtime/streams/token.ts).
 */
const encoder = new TextEncoder();

export interface Hmac {
  sign(message: string): Promise<Uint8Array>;
  /** Whether `signature` is the message's, compared in constant time (crypto.subtle.verify). */
  verify(signature: Uint8Array, message: string): Promise<boolean>;
}

export function createHmac(secret: string): Hmac {
  const key = crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
  return {
    sign: async (message) => new Uint8Array(await crypto.subtle.sign('HMAC', await key, encoder.encode(message))),
    verify: async (signature, message) => crypto.subtle.verify('HMAC', await key, signature, encoder.encode(message)),
  };
}

export function toBase64Url(bytes: Uint8Array): string {
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** The bytes of base64url text (unpadded); null when it is not base64url. */
export function fromBase64Url(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return null;
  try {
    const binary = atob(text.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (text.length % 4)) % 4));
    return Uint8Array.from(binary, (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}
