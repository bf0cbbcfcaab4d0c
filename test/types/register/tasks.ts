/**
 * A project's tasks, declared in Register for the types of ctx.invoke and ctx.enqueue
 * (register.test.ts compiles this folder on its own: the augmentation would type the whole
 * repository's handlers otherwise).
 */
import { z } from 'zod';
import { defineTask } from '../../../src/index.ts';

export const charge = defineTask({
  name: 'charge',
  payload: z.object({ amount: z.number().transform((n) => Math.round(n * 100)) }),
  handler: (payload) => {
    // The handler gets the schema's output.
    const cents: number = payload.amount;
    return { cents };
  },
});

export const cleanup = defineTask({ name: 'cleanup', payload: z.object({}), handler: () => undefined });

export const order = defineTask({
  name: 'order',
  payload: z.object({ total: z.number() }),
  handler: async (payload, ctx) => {
    // Typed by the registered tasks: charge's payload is its schema's input.
    const receipt = (await ctx.invoke('charge', 'charge', { amount: payload.total })) as { cents: number };
    // A result type given as a type argument: the name is checked, the payload is not.
    await ctx.invoke<{ cents: number }>('charge-typed', 'charge', { amount: 1 });
    await ctx.invoke('cleanup', 'cleanup'); // {} fits: the payload may be omitted
    await ctx.enqueue({ task: 'cleanup' });
    await ctx.enqueue({ task: 'charge', payload: { amount: 1 }, delayMs: 1000 });
    // @ts-expect-error an unknown task
    await ctx.invoke('child', 'ad', {});
    // @ts-expect-error a payload of the wrong type
    await ctx.invoke('charge-2', 'charge', { amount: '12' });
    // @ts-expect-error the payload is required when {} does not fit
    await ctx.invoke('charge-3', 'charge');
    // @ts-expect-error an unknown task for ctx.enqueue too
    await ctx.enqueue({ task: 'ad' });
    // @ts-expect-error the payload of another task
    await ctx.enqueue({ task: 'cleanup', payload: { amount: 1 } });
    return receipt.cents;
  },
});

export const tasks = [charge, cleanup, order];

declare module '../../../src/index.ts' {
  interface Register {
    tasks: { charge: typeof charge; cleanup: typeof cleanup; order: typeof order };
  }
}
