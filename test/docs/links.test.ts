/** Every relative link in README.md, CONTRIBUTING.md, CHANGELOG.md and docs/ resolves: the file exists, and so does the heading an anchor names. */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { anchors, brokenLinks, markdownFiles, slug } from './links.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

test('every relative link in the README, CONTRIBUTING.md, the changelog and docs/ resolves', () => {
  const files = markdownFiles(ROOT);
  expect(files.map((file) => file.slice(ROOT.length))).toEqual(expect.arrayContaining(['README.md', 'CONTRIBUTING.md', 'CHANGELOG.md', join('docs', 'library.md')]));
  expect(brokenLinks(ROOT, files)).toEqual([]);
});

test('anchors are GitHub slugs of the headings', () => {
  expect(slug('Cron: recurring schedules')).toBe('cron-recurring-schedules');
  expect(slug('Overview: `/`')).toBe('overview-');
  expect(slug('`npm start`: the local stack')).toBe('npm-start-the-local-stack');
  expect(slug('Figures (2 cores, AMD EPYC, Node 24.21, PostgreSQL 18.4)')).toBe('figures-2-cores-amd-epyc-node-2421-postgresql-184');
  expect(slug('Jobs: `/jobs` and `/jobs/:id`')).toBe('jobs-jobs-and-jobsid');
  expect([...anchors('# A\n## B\n```\n# not a heading\n```\n## B\n')]).toEqual(['a', 'b', 'b-1']);
});

test('a link to a missing file or a missing heading is reported; code and other sites are not links', async () => {
  const root = await mkdtemp(join(tmpdir(), 'skiplock-links-'));
  try {
    await mkdir(join(root, 'docs'));
    await writeFile(join(root, 'docs', 'guide.md'), '# Guide\n\n## Retries and backoff\n');
    await writeFile(
      join(root, 'README.md'),
      [
        '# Readme',
        '[ok](docs/guide.md) [ok too](docs/guide.md#retries-and-backoff) [self](#readme) ![img](docs/guide.md)',
        '[gone](docs/missing.md) [no heading](docs/guide.md#retries) [no self](#nowhere) [abs](/docs/guide.md)',
        '[site](https://example.com/x.md) `[code](nothing.md)`',
        '```md',
        '[fenced](nothing-either.md)',
        '```',
      ].join('\n'),
    );
    expect(brokenLinks(root).map(({ target, problem }) => `${target}: ${problem}`)).toEqual([
      'docs/missing.md: no such file',
      'docs/guide.md#retries: no heading with the anchor #retries in docs/guide.md',
      '#nowhere: no heading with the anchor #nowhere in README.md',
      '/docs/guide.md: absolute path: write it relative to the file',
    ]);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});
