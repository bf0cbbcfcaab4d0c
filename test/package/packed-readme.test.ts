/**
 * The README the tarball ships: a user's README, under 200 lines. The contributor's parts (the local
 * stack, the example tasks, working on this repository) live in CONTRIBUTING.md, which the README
 * names in a short "Working on skiplock" section whose commands are repository-only; every link that is
 * relative in the repository (docs/, examples/, CHANGELOG.md, the bench chart) becomes absolute
 * into the repository package.json names, so it works on npm's site and in node_modules; the
 * repository's own README is left as it was. (examples.test.ts checks the same on a real `npm pack`.)
 */
import { existsSync, statSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { absoluteLinks, packageReadme, packReadme, README_REF, repositoryUrl, restoreReadme, withoutRepositoryOnly, type LinkBase } from '../../src/dev/packed-readme.ts';
import { anchors, linkTargets } from '../docs/links.ts';
import { ROOT } from './install.ts';

const manifest = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as {
  repository?: { type?: string; url?: string };
  homepage?: string;
  bugs?: { url?: string };
};
const REPO = 'https://github.com/skiplock/skiplock';
const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

/** The links a user of the packed README cannot follow: relative ones other than anchors into itself. */
const relativeLinks = (markdown: string) => linkTargets(markdown).filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t) && !t.startsWith('#'));

test('package.json names the repository, its home page and where to report bugs', () => {
  expect(manifest.repository).toEqual({ type: 'git', url: `git+${REPO}.git` });
  expect(manifest.homepage).toBe(`${REPO}#readme`);
  expect(manifest.bugs).toEqual({ url: `${REPO}/issues` });
  expect(repositoryUrl(manifest)).toBe(REPO);
  expect(repositoryUrl({ repository: 'github:skiplock/skiplock' })).toBe(REPO);
  expect(() => repositoryUrl({})).toThrow(/repository must name a GitHub repository/);
});

describe('absoluteLinks', () => {
  const base: LinkBase = { repository: REPO, ref: 'main', isDirectory: (path) => path === 'examples' || path === 'examples/node' };

  test('files to blob/, folders to tree/, images to their raw file; anchors, other sites and code stay', () => {
    const text = [
      '# Readme',
      'See [the guide](docs/guide.md), [its retries](docs/guide.md#retries-and-backoff) and [the examples](examples).',
      '![chart](test/bench/results/curve.svg "a title") [node](./examples/node) [self](#readme) [site](https://example.com/x.md)',
      '`[code](nothing.md)` and ``[code too](nothing.md)`` <img src="docs/a.png"> <a href="CHANGELOG.md">changes</a>',
      '[ref]: docs/cron.md',
      '```md',
      '[fenced](nothing-either.md)',
      '```',
    ].join('\n');
    expect(absoluteLinks(text, base).split('\n')).toEqual([
      '# Readme',
      `See [the guide](${REPO}/blob/main/docs/guide.md), [its retries](${REPO}/blob/main/docs/guide.md#retries-and-backoff) and [the examples](${REPO}/tree/main/examples).`,
      `![chart](https://raw.githubusercontent.com/skiplock/skiplock/main/test/bench/results/curve.svg "a title") [node](${REPO}/tree/main/examples/node) [self](#readme) [site](https://example.com/x.md)`,
      `\`[code](nothing.md)\` and \`\`[code too](nothing.md)\`\` <img src="https://raw.githubusercontent.com/skiplock/skiplock/main/docs/a.png"> <a href="${REPO}/blob/main/CHANGELOG.md">changes</a>`,
      `[ref]: ${REPO}/blob/main/docs/cron.md`,
      '```md',
      '[fenced](nothing-either.md)',
      '```',
    ]);
  });

  test('is idempotent', () => {
    const once = absoluteLinks('[a](docs/a.md) ![b](b.svg)', base);
    expect(absoluteLinks(once, base)).toBe(once);
  });
});

test("the repository's README: every relative link made absolute, each onto a path the repository has", async () => {
  const readme = await readFile(join(ROOT, 'README.md'), 'utf8');
  const before = relativeLinks(readme);
  expect(before.length).toBeGreaterThan(20); // the README links docs/, examples/, CHANGELOG.md, the chart
  const packed = absoluteLinks(readme, { repository: REPO, ref: README_REF, isDirectory: (path) => existsSync(join(ROOT, path)) && statSync(join(ROOT, path)).isDirectory() });
  expect(relativeLinks(packed)).toEqual([]);
  const prefix = new RegExp(`^(?:${REPO}/(?:blob|tree)|https://raw\\.githubusercontent\\.com/skiplock/skiplock)/${README_REF}/`);
  const into = linkTargets(packed).filter((t) => prefix.test(t)).map((t) => t.replace(prefix, '').replace(/#.*$/, ''));
  expect(into).toHaveLength(before.length);
  for (const path of into) expect(existsSync(join(ROOT, decodeURIComponent(path))), path).toBe(true);
});

test('prepack rewrites README.md and keeps its original; postpack puts it back byte for byte; an interrupted pack heals', async () => {
  const root = await mkdtemp(join(tmpdir(), 'skiplock-readme-'));
  dirs.push(root);
  await mkdir(join(root, 'docs'));
  await cp(join(ROOT, 'package.json'), join(root, 'package.json'));
  const original = '# Readme\n\n[docs](docs) [cron](docs/cron.md) ![chart](chart.svg)\n';
  await writeFile(join(root, 'README.md'), original);

  await packReadme(root);
  const packed = await readFile(join(root, 'README.md'), 'utf8');
  expect(packed).toBe(`# Readme\n\n[docs](${REPO}/tree/main/docs) [cron](${REPO}/blob/main/docs/cron.md) ![chart](https://raw.githubusercontent.com/skiplock/skiplock/main/chart.svg)\n`);
  expect(await readFile(join(root, 'README.repository.md'), 'utf8')).toBe(original);

  await packReadme(root); // a pack that died before its postpack, then another
  expect(await readFile(join(root, 'README.md'), 'utf8')).toBe(packed);
  await restoreReadme(root);
  expect(await readFile(join(root, 'README.md'), 'utf8')).toBe(original);
  expect(existsSync(join(root, 'README.repository.md'))).toBe(false);
  await restoreReadme(root); // nothing to restore
  expect(await readFile(join(root, 'README.md'), 'utf8')).toBe(original);
});

describe('the package README is a user\'s README', () => {
  const repositoryReadme = () => readFile(join(ROOT, 'README.md'), 'utf8');
  const packed = async () => packageReadme(await repositoryReadme(), { repository: REPO, ref: README_REF, isDirectory: (path) => existsSync(join(ROOT, path)) && statSync(join(ROOT, path)).isDirectory() });

  test('withoutRepositoryOnly leaves out the marked parts; a marker out of place is an error', () => {
    const text = ['# A', '', '<!-- repository-only: for contributors -->', '## B', 'npm start', '<!-- /repository-only -->', '', '## C', ''].join('\n');
    expect(withoutRepositoryOnly(text)).toBe('# A\n\n## C\n');
    expect(() => withoutRepositoryOnly('<!-- repository-only -->\nx\n')).toThrow(/never closed/);
    expect(() => withoutRepositoryOnly('x\n<!-- /repository-only -->\n')).toThrow(/not opened/);
    expect(() => withoutRepositoryOnly('<!-- repository-only -->\n<!-- repository-only -->\n')).toThrow(/inside another/);
  });

  test("the repository's README names the two commands and points to CONTRIBUTING.md, which starts with them and holds the contributor's sections", async () => {
    const readme = await repositoryReadme();
    const working = /^## Working on skiplock\n([^]*?)(?=^## |(?![^]))/m.exec(readme)?.[1] ?? '';
    for (const text of ['`npm install`', '`npm start`', '`npm test`', '(CONTRIBUTING.md)']) expect(working, text).toContain(text);
    expect(working.trim().split('\n').filter((line) => !line.startsWith('<!--')).length).toBeLessThanOrEqual(3);
    const contributing = await readFile(join(ROOT, 'CONTRIBUTING.md'), 'utf8');
    const firstBlock = /```sh\n([^]*?)```/.exec(contributing);
    expect(firstBlock?.index).toBeLessThan(contributing.indexOf('\n## '));
    expect((firstBlock?.[1] ?? '').split('\n').map((line) => line.split(/\s+#/)[0]!.trim()).filter(Boolean)).toEqual(['npm install', 'npm start', 'npm test']);
    for (const text of ['## Working on this repository', '## The local stack: `npm start`', '### The example tasks', '.skiplock/api-token)', 'src/tasks/index.ts'])
      expect(contributing, text).toContain(text);
  });

  test('under 200 lines, without the contributor sections, with the set-up of each platform, and no anchor into a part it left out', async () => {
    const readme = await packed();
    expect(readme.split('\n').length).toBeLessThan(200);
    expect((await repositoryReadme()).split('\n').length).toBeLessThan(200);
    for (const text of ['npm start', 'npm test', 'Working on this repository', '## The local stack', '### The example tasks', 'src/tasks/index.ts', '.skiplock/api-token)'])
      expect(readme, text).not.toContain(text);
    for (const text of [
      '## Add skiplock to your project', 'npm install skiplock zod', '### Cloudflare Workers', '### Vercel and Next.js', '### Node', '### Your first job',
      '```jsonc\n// wrangler.jsonc', 'npx skiplock migrate', 'NotMigratedError', '## Working on skiplock', 'CONTRIBUTING.md', 'npx skiplock dev',
      '### When a job starts',
    ])
      expect(readme, text).toContain(text);
    // The requirements per platform: the Worker's tools need Node 22; TypeScript on Node is said how to run.
    expect(readme).toMatch(/\*\*Cloudflare Workers\*\*[^]*?need Node \*\*22\*\* \(create-cloudflare: Node 22\.0 or later;\s+wrangler: Node 22\.12 or later\)/);
    expect(readme).toMatch(/npx tsx main\.ts/);
    expect(readme).toMatch(/Node 22\.18 or later/);
    // Its curls name the base path of each platform.
    expect(readme).toContain('/skiplock');
    expect(readme).toContain('/api/skiplock');
    const own = anchors(readme);
    const dangling = linkTargets(readme).filter((t) => t.startsWith('#') && !own.has(t.slice(1)));
    expect(dangling).toEqual([]);
  });

  test("the Worker's configuration says the same in the README's wrangler.jsonc and docs/platforms.md's wrangler.jsonc and wrangler.toml (read by wrangler)", async () => {
    const readme = await packed();
    const platforms = await readFile(join(ROOT, 'docs', 'platforms.md'), 'utf8');
    const block = (lang: string, markdown = platforms) => new RegExp('```' + lang + '\\n(// wrangler|# wrangler)([^]*?)```').exec(markdown)?.slice(1).join('');
    const dir = await mkdtemp(join(tmpdir(), 'skiplock-wrangler-'));
    dirs.push(dir);
    await mkdir(join(dir, 'src'));
    await writeFile(join(dir, 'src', 'index.ts'), 'export default {};\n');
    await writeFile(join(dir, 'wrangler.jsonc'), block('jsonc')!);
    await writeFile(join(dir, 'readme.wrangler.jsonc'), block('jsonc', readme)!);
    await writeFile(join(dir, 'wrangler.toml'), block('toml')!);
    const { unstable_readConfig } = await import('wrangler');
    const read = (file: string) => {
      const c = unstable_readConfig({ config: join(dir, file) });
      return { name: c.name, main: c.main, compatibility_date: c.compatibility_date, minify: c.minify, triggers: c.triggers, durable_objects: c.durable_objects, migrations: c.migrations };
    };
    const jsonc = read('wrangler.jsonc');
    expect(jsonc).toEqual(read('wrangler.toml'));
    expect(read('readme.wrangler.jsonc')).toEqual(jsonc);
    expect(jsonc).toMatchObject({ triggers: { crons: ['* * * * *'] }, durable_objects: { bindings: [{ name: 'SKIPLOCK_TICKER', class_name: 'SkiplockTicker' }] } });
  });
});
