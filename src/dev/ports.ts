/**
 * Whether a TCP port is free, checked before a server touches anything (a data directory, a file)
 * so that a port taken by another `skiplock dev` or `npm start` fails in one clear line.
 */
import { createServer } from 'node:net';

/** Resolves true when something already listens on host:port (EADDRINUSE); any other refusal is left to the real listen. */
export function portInUse(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolvePort) => {
    const server = createServer();
    server.unref();
    server.once('error', (error: NodeJS.ErrnoException) => resolvePort(error.code === 'EADDRINUSE'));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolvePort(false)));
  });
}
