/**
 * Relative links in markdown: every one must name a file (or folder) of the repository, and its
 * `#anchor` a heading of that file, as GitHub renders it. Links to other sites are not followed.
 */
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

export interface BrokenLink {
  file: string;
  target: string;
  problem: string;
}

/** README.md, CONTRIBUTING.md, CHANGELOG.md and every .md under docs/. */
export function markdownFiles(root: string): string[] {
  const files = ['README.md', 'CONTRIBUTING.md', 'CHANGELOG.md'].map((name) => join(root, name)).filter((path) => existsSync(path));
  const walk = (dir: string): void => {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.md')) files.push(path);
    }
  };
  walk(join(root, 'docs'));
  return files;
}

/** The text outside fenced code blocks, with inline code spans removed. */
function prose(markdown: string): string {
  let fenced = false;
  const lines: string[] = [];
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      lines.push('');
      continue;
    }
    lines.push(fenced ? '' : line);
  }
  return lines.join('\n').replace(/(`+)[\s\S]*?\1/g, '');
}

/** Link targets: inline links and images, reference definitions, and HTML href/src. */
export function linkTargets(markdown: string): string[] {
  const text = prose(markdown);
  const targets: string[] = [];
  for (const match of text.matchAll(/\]\(\s*<?([^()\s<>]*(?:\([^()\s]*\)[^()\s<>]*)*)>?(?:\s+"[^"]*")?\s*\)/g)) targets.push(match[1]!);
  for (const match of text.matchAll(/^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)) targets.push(match[1]!);
  for (const match of text.matchAll(/\b(?:href|src)\s*=\s*"([^"]*)"/g)) targets.push(match[1]!);
  return targets;
}

/** GitHub's anchor of a heading's text (github-slugger): lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  const text = heading
    .replace(/!\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/[`*]/g, '');
  return text.trim().toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

/** Every anchor a markdown file offers: its headings' slugs (repeats numbered -1, -2, …) and explicit ids. */
export function anchors(markdown: string): Set<string> {
  const found = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    if (fenced) continue;
    const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const base = slug(heading[1]!);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    found.add(count === 0 ? base : `${base}-${count}`);
  }
  for (const match of markdown.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) found.add(match[1]!);
  return found;
}

export function brokenLinks(root: string, files: readonly string[] = markdownFiles(root)): BrokenLink[] {
  const broken: BrokenLink[] = [];
  for (const file of files) {
    const markdown = readFileSync(file, 'utf8');
    for (const target of linkTargets(markdown)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue; // another site, mailto:
      const report = (problem: string) => broken.push({ file: relative(root, file), target, problem });
      const hash = target.indexOf('#');
      const pathPart = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
      const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
      if (pathPart.startsWith('/')) {
        report('absolute path: write it relative to the file');
        continue;
      }
      const path = pathPart === '' ? file : resolve(dirname(file), pathPart);
      if (!existsSync(path)) {
        report('no such file');
        continue;
      }
      if (anchor === undefined || anchor === '') continue;
      if (statSync(path).isDirectory() || !path.endsWith('.md')) {
        report('an anchor into a file that is not markdown');
        continue;
      }
      if (!anchors(readFileSync(path, 'utf8')).has(anchor)) report(`no heading with the anchor #${anchor} in ${relative(root, path)}`);
    }
  }
  return broken;
}
