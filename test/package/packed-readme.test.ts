/**
 * The README the tarball ships: every link that is relative in the repository (docs/, examples/,
 * CHANGELOG.md, the bench chart) becomes absolute into the repository package.json names, so it
 * works on npm's site and in node_modules; the repository's own README is left as it was.
 * (examples.test.ts checks the same on a real `npm pack`.)
 */
import { existsSync, statSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { absoluteLinks, packReadme, README_REF, repositoryUrl, restoreReadme, type LinkBase } from '../../src/dev/packed-readme.ts';
import { linkTargets } from '../docs/links.ts';
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
