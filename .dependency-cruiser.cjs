/**
 * The import rules of src/ (issue 32), run by `npm test` (`npm run check:imports`). The layers
 * point down — core → store → runtime → http → platform → entry points (src/*.ts) → app, dev —
 * and no import goes round in a circle, type-only imports included; above the runtime, a capability
 * is used through its public face (src/runtime/<capability>/index.ts). A violation fails with the
 * rule's name and its comment.
 */
const above = (...layers) => `^src/(${layers.join('|')})/`;

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'Two modules that import each other (directly or round a circle) want a shared piece with a home of its own.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'core-is-pure',
      comment: 'src/core is pure logic: it imports no other layer.',
      severity: 'error',
      from: { path: '^src/core/' },
      to: { path: ['^src/(store|runtime|http|platform|dev|app|cli|client|tasks)/', '^src/[^/]+\\.ts$'] },
    },
    {
      name: 'store-below-runtime',
      comment: 'src/store (all SQL, the Sql port, drivers) is below the runtime: it imports only core.',
      severity: 'error',
      from: { path: '^src/store/' },
      to: { path: [above('runtime', 'http', 'platform', 'dev', 'app', 'cli', 'client', 'tasks'), '^src/[^/]+\\.ts$'] },
    },
    {
      name: 'runtime-below-http',
      comment: 'src/runtime composes core and store; the HTTP app and the platforms are above it.',
      severity: 'error',
      from: { path: '^src/runtime/' },
      to: { path: [above('http', 'platform', 'dev', 'app', 'cli', 'client', 'tasks'), '^src/[^/]+\\.ts$'] },
    },
    {
      name: 'http-below-platform',
      comment: 'src/http is the hono app over the runtime; platform adapters mount it, not the reverse.',
      severity: 'error',
      from: { path: '^src/http/' },
      to: { path: [above('platform', 'dev', 'app', 'cli', 'tasks'), '^src/[^/]+\\.ts$'] },
    },
    {
      name: 'platform-below-entry-points',
      comment: 'src/platform holds thin adapters; the entry points (src/*.ts), the app and dev tools are above them.',
      severity: 'error',
      from: { path: '^src/platform/' },
      to: { path: [above('dev', 'app', 'cli', 'tasks'), '^src/[^/]+\\.ts$'] },
    },
    {
      name: 'runtime-through-faces',
      comment: 'Above the runtime (http, platform, the CLI, the entry points, app, dev, client), a capability is used through its public face, src/runtime/<capability>/index.ts, or the composition, src/runtime/skiplock.ts: never by reaching into its modules.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/runtime/' },
      to: { path: '^src/runtime/[^/]+/(?!index[.]ts$)[^/]+$' },
    },
    {
      name: 'faces-are-for-the-layers-above',
      comment: 'Inside src/runtime, modules import one another directly: a capability importing another one\'s index.ts would pull in its whole face and could close a circle through it.',
      severity: 'error',
      from: { path: '^src/runtime/' },
      to: { path: '^src/runtime/[^/]+/index[.]ts$' },
    },
    {
      name: 'client-stands-alone',
      comment: 'skiplock/client runs in a browser: it imports nothing but its own modules and core types.',
      severity: 'error',
      from: { path: '^src/client/' },
      to: { path: above('store', 'runtime', 'http', 'platform', 'dev', 'app', 'cli', 'tasks') , dependencyTypesNot: ['type-only'] },
    },
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/.*\\.d\\.ts$' },
  },
};
