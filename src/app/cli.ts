/**
 * This repository's CLI: the package's CLI (src/cli.ts, the `skiplock` bin) with the example
 * tasks of src/tasks registered, so `enqueue echo …` works here without --tasks.
 *   node src/app/cli.ts enqueue echo '{"message":"hi"}'
 */
import { main } from '../cli.ts';
import { tasks } from '../tasks/index.ts';

process.exitCode = await main(process.argv.slice(2), { tasks });
