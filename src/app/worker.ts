/**
 * This repository's Worker (wrangler.toml `main`), built from the public entry point only, as a
 * user's project is: the example tasks and schedule of src/tasks.
 */
import { createWorker } from '../cloudflare.ts';
import { schedules, tasks } from '../tasks/index.ts';

const worker = createWorker({ tasks, schedules });

export default worker;
/** The Durable Object ticker, bound as SKIPLOCK_TICKER in wrangler.toml (used with TICKER = "alarm"). */
export const SkiplockTicker = worker.Ticker;
