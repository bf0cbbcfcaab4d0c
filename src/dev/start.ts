/**
 * `npm start` (and `npm run start:node`, with --node): the local stack of local-stack.ts. This
 * entry only makes sure the stack runs in a process group of its own (process-group.ts), and
 * loads it there.
 */
import { inOwnProcessGroup } from './process-group.ts';

let stop: ((reason: NodeJS.Signals) => void) | undefined;
if (inOwnProcessGroup(() => stop?.('SIGTERM'))) stop = (await import('./local-stack.ts')).runLocalStack();
