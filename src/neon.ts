/**
 * `skiplock/neon`: Neon's serverless drivers — HTTP (one request per statement, nothing to hold:
 * Workers, Vercel) and the WebSocket Pool (the pg protocol over a WebSocket). No Node-only code.
 */
export { createNeonHttpDriver, type NeonHttpOptions } from './store/drivers/neon-http.ts';
export { createNeonWsDriver, type NeonWsOptions } from './store/drivers/neon-ws.ts';
