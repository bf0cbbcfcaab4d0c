/**
 * This repository's Vercel Function (vercel.json), built from the public entry point only: the
 * example tasks and schedule of src/tasks. vercel.json routes every path here and its cron calls
 * GET /v1/tick with `Authorization: Bearer $CRON_SECRET`.
 */
import { schedules, tasks } from '../tasks/index.ts';
import { createVercelHandler } from '../vercel.ts';

/** Read by Vercel at build time: this function may run `maxDuration` seconds (Hobby allows up to 300 with Fluid compute). */
export const config = { maxDuration: 60 };

export default createVercelHandler({ tasks, schedules, maxDuration: config.maxDuration });
