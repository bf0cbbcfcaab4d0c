/** `skiplock/pg`: the `pg` driver (install `pg` yourself: it is an optional peer dependency). Node only. */
export { createPgDriver, type PgPoolOptions } from './store/drivers/pg.ts';
export type { PgClientLike, PgPoolLike } from './store/drivers/pool.ts';
