/**
 * The README as the package ships it: a user's README. The repository's README is also the
 * contributor's (`npm install`, `npm start`, `npm test`, the local stack, the example tasks and
 * their curls, working on this repository); those parts are between
 * `<!-- repository-only… -->` and `<!-- /repository-only -->` lines, and the package's README
 * leaves them out (a user of the tarball has no repository to run them in).
 *
 * npm's site, an editor opening node_modules/skiplock and
 * any registry mirror show the tarball's README.md, where a link relative to the repository
 * (docs/, examples/, CHANGELOG.md, the bench chart) names a file the tarball does not have.
 * `prepack` rewrites those links to absolute ones into the repository that package.json's
 * `repository` names (images to their raw file, so that they render), keeping the original
 * in README.repository.md; `postpack` puts it back. The repository's README keeps its relative
 * links, which GitHub resolves. Anchors into the README itself stay as they are.
 *
 *   node src/dev/packed-readme.ts pack | restore
 */
import { existsSync, statSync } from 'node:fs';
import { copyFile, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The branch the absolute links point at. */
export const README_REF = 'main';
const README = 'README.md';
const ORIGINAL = 'README.repository.md';

export interface LinkBase {
  /** https://github.com/owner/name */
  repository: string;
  ref: string;
  /** Whether a repository-relative path is a folder (a `tree/` link) rather than a file (`blob/`). */
  isDirectory(path: string): boolean;
}

/** `https://github.com/owner/name` from package.json's `repository` (string or `{ url }`, `git+…/.git`). */
export function repositoryUrl(manifest: { repository?: string | { url?: string } }): string {
  const raw = typeof manifest.repository === 'string' ? manifest.repository : manifest.repository?.url;
  const match = /(?:github\.com[/:]|^github:)([^/\s]+)\/([^/\s#]+?)(?:\.git)?\/?$/.exec(raw ?? '');
  if (!match) throw new Error(`package.json's repository must name a GitHub repository, got ${JSON.stringify(raw)}`);
  return `https://github.com/${match[1]}/${match[2]}`;
}

const REPOSITORY_ONLY_START = /^<!--\s*repository-only\b.*-->\s*$/;
const REPOSITORY_ONLY_END = /^<!--\s*\/repository-only\s*-->\s*$/;

/** The markdown without its repository-only parts (and the blank lines they leave doubled). */
export function withoutRepositoryOnly(markdown: string): string {
  const kept: string[] = [];
  let inside: number | undefined;
  markdown.split('\n').forEach((line, i) => {
    if (REPOSITORY_ONLY_START.test(line)) {
      if (inside !== undefined) throw new Error(`README line ${i + 1}: a repository-only part opened inside another (line ${inside + 1})`);
      inside = i;
    } else if (REPOSITORY_ONLY_END.test(line)) {
      if (inside === undefined) throw new Error(`README line ${i + 1}: a repository-only part closed that was not opened`);
      inside = undefined;
    } else if (inside === undefined) kept.push(line);
  });
  if (inside !== undefined) throw new Error(`README line ${inside + 1}: a repository-only part is never closed`);
  return kept.join('\n').replace(/\n{3,}/g, '\n\n');
}

/** The package's README from the repository's: its repository-only parts left out, its links made absolute. */
export function packageReadme(markdown: string, base: LinkBase): string {
  return absoluteLinks(withoutRepositoryOnly(markdown), base);
}

/** The markdown with every relative link and image made absolute; fenced and inline code untouched. */
export function absoluteLinks(markdown: string, base: LinkBase): string {
  let fenced = false;
  return markdown.split('\n').map((line) => {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      return line;
    }
    if (fenced) return line;
    // Odd pieces are code spans (kept), even ones prose.
    return line.split(/(`+[^`]*?`+)/).map((piece, i) => (i % 2 === 1 ? piece : rewriteProse(piece, base))).join('');
  }).join('\n');
}

function rewriteProse(text: string, base: LinkBase): string {
  return text
    // ![alt](target), then [text](target) (a link around an image too): the target ends at a space (a title) or the paren.
    .replace(/(!\[[^[\]]*\]\(\s*<?)([^()\s<>]+)/g, (_, head: string, target: string) => `${head}${absolute(target, base, true)}`)
    .replace(/(\]\(\s*<?)([^()\s<>]+)/g, (_, head: string, target: string) => `${head}${absolute(target, base, false)}`)
    // [label]: target (a reference definition)
    .replace(/^(\s{0,3}\[[^\]]+\]:\s*<?)(\S+?)(>?(?:\s|$))/, (_, head: string, target: string, tail: string) =>
      `${head}${absolute(target, base, false)}${tail}`)
    .replace(/\b(href|src)(\s*=\s*")([^"]*)"/g, (_, attribute: string, eq: string, target: string) =>
      `${attribute}${eq}${absolute(target, base, attribute === 'src')}"`);
}

function absolute(target: string, base: LinkBase, image: boolean): string {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//') || target.startsWith('#') || target === '') return target;
  const hash = target.indexOf('#');
  const path = (hash === -1 ? target : target.slice(0, hash)).replace(/^\.\//, '').replace(/^\//, '');
  const anchor = hash === -1 ? '' : target.slice(hash);
  if (image) return `${base.repository.replace('https://github.com/', 'https://raw.githubusercontent.com/')}/${base.ref}/${path}`;
  return `${base.repository}/${base.isDirectory(decodeURIComponent(path)) ? 'tree' : 'blob'}/${base.ref}/${path}${anchor}`;
}

/** prepack: README.md rewritten (packageReadme), its original kept. A backup left by an interrupted pack is the original. */
export async function packReadme(root: string): Promise<void> {
  const original = join(root, ORIGINAL);
  if (!existsSync(original)) await copyFile(join(root, README), original);
  const manifest = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as { repository?: string | { url?: string } };
  const base: LinkBase = {
    repository: repositoryUrl(manifest),
    ref: README_REF,
    isDirectory: (path) => existsSync(join(root, path)) && statSync(join(root, path)).isDirectory(),
  };
  // Replaced in one rename: a test reading the README meanwhile (test/docs) never sees it half written or absent.
  await writeFile(join(root, `${README}.tmp`), packageReadme(await readFile(original, 'utf8'), base));
  await rename(join(root, `${README}.tmp`), join(root, README));
}

/** postpack: the repository's README back. */
export async function restoreReadme(root: string): Promise<void> {
  const original = join(root, ORIGINAL);
  if (existsSync(original)) await rename(original, join(root, README));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const root = fileURLToPath(new URL('../../', import.meta.url));
  const command = process.argv[2];
  if (command === 'pack') await packReadme(root);
  else if (command === 'restore') await restoreReadme(root);
  else throw new Error('usage: packed-readme.ts pack | restore');
}
