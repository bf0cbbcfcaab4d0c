/** Compiled alone by register.test.ts: its one error must name charge's payload, not a union. */
import { z } from 'zod';
import { defineTask } from '../../../src/index.ts';
import './tasks.ts';

export const wrong = defineTask({
  name: 'wrong',
  payload: z.object({}),
  handler: (_payload, ctx) => ctx.invoke('charge', 'charge', { amount: 'twelve' }),
});
