/**
 * The local Neon proxy's `/<token>/v2?address=host:port` endpoint: a WebSocket→TCP bridge, as
 * the `@neondatabase/serverless` driver's `Pool`/`Client` use it (`neonConfig.wsProxy`). Each
 * WebSocket gets its own socket to a loopback PostgreSQL; binary frames pass unchanged. Whether
 * the request may upgrade at all (token, Host, Origin, shutting down) is decided by neon-proxy.ts.
 */
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer, type RawData } from 'ws';

/** The open bridges of one proxy. */
export interface WebSocketBridges {
  wss: WebSocketServer;
  tcpSockets: Set<net.Socket>;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1']);

export function createWebSocketBridges(): WebSocketBridges {
  return { wss: new WebSocketServer({ noServer: true }), tcpSockets: new Set() };
}

/**
 * An upgrade request: refused with `refusal` (an HTTP status line) when the proxy refuses it, with
 * 400 for a missing or malformed `address`, with 403 for a target that is not a loopback address;
 * otherwise bridged to the target.
 */
export function upgradeToBridge(bridges: WebSocketBridges, req: IncomingMessage, socket: Duplex, head: Buffer, refusal: string | undefined): void {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const target = parseAddress(url.searchParams.get('address'));
  const refused = refusal ?? (!target ? '400 Bad Request' : !LOOPBACK.has(target.host) ? '403 Forbidden' : undefined);
  if (refused || !target) {
    socket.end(`HTTP/1.1 ${refused ?? '400 Bad Request'}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    return;
  }
  bridges.wss.handleUpgrade(req, socket, head, (ws) => bridge(bridges, ws, target.host, target.port));
}

/** Ends every bridge: the WebSockets terminated, their sockets to Postgres destroyed. */
export function closeBridges(bridges: WebSocketBridges): void {
  for (const ws of bridges.wss.clients) ws.terminate();
  for (const tcp of bridges.tcpSockets) tcp.destroy();
}

// WebSocket → TCP: each WebSocket gets its own socket to Postgres; binary frames pass unchanged.
function bridge({ tcpSockets }: WebSocketBridges, ws: WebSocket, host: string, port: number): void {
  const tcp = net.connect({ host, port });
  tcpSockets.add(tcp);
  tcp.setNoDelay(true);
  ws.on('message', (data: RawData) => { tcp.write(toBuffer(data)); }); // queued until connected
  tcp.on('data', (chunk: Buffer) => { if (ws.readyState === WebSocket.OPEN) ws.send(chunk); });
  tcp.on('error', () => {}); // 'close' follows and closes the WebSocket
  tcp.on('close', () => { tcpSockets.delete(tcp); ws.close(); });
  ws.on('error', () => tcp.destroy());
  ws.on('close', () => tcp.destroy());
}

/** "host:port", where host may be an IPv6 literal, bracketed or not ("::1:5432", "[::1]:5432"). */
function parseAddress(address: string | null): { host: string; port: number } | undefined {
  const i = address?.lastIndexOf(':') ?? -1;
  if (!address || i <= 0) return undefined;
  const port = Number(address.slice(i + 1));
  if (!Number.isInteger(port) || port <= 0 || port > 65535) return undefined;
  return { host: address.slice(0, i).replace(/^\[(.*)\]$/, '$1'), port };
}

function toBuffer(data: RawData): Buffer {
  if (Array.isArray(data)) return Buffer.concat(data);
  return data instanceof ArrayBuffer ? Buffer.from(data) : data;
}
