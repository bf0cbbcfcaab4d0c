/**
 * Headless Chromium for the browser tests, from the npm registry: @sparticuz/chromium ships the
 * browser brotli-compressed inside its tarball, so `npm install` is all it needs (no apt-get, no
 * download at install or run time). Each launch unpacks it (≈2 s, ≈210 MB) into a temp directory
 * of its own, so parallel runs never share a half-written binary, and `close()` removes it.
 * Driven by playwright-core.
 */
import sparticuz from '@sparticuz/chromium';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

export interface LaunchedChromium {
  context: BrowserContext;
  close(): Promise<void>;
}

export async function launchChromium(options: { viewport: { width: number; height: number } }): Promise<LaunchedChromium> {
  const dir = await mkdtemp(join(tmpdir(), 'skiplock-chromium-'));
  await chmod(dir, 0o755);
  try {
    const executablePath = await unpack(join(dir, 'bin'));
    // A machine without fontconfig's setup (no /etc/fonts) renders no text: give it the fonts of the package.
    const env = existsSync('/etc/fonts/fonts.conf') ? undefined : { ...process.env, FONTCONFIG_FILE: await packageFonts(join(dir, 'bin')) };
    const context = await chromium.launchPersistentContext(join(dir, 'profile'), {
      executablePath,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
      viewport: options.viewport,
      ...(env ? { env } : {}),
    });
    return {
      context,
      close: async () => {
        await context.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}

/** @sparticuz/chromium unpacks into the OS temp directory (`os.tmpdir()`): pointed, for this call, at `into`. */
async function unpack(into: string): Promise<string> {
  await mkdir(into, { recursive: true });
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = into;
  try {
    return await sparticuz.executablePath();
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  }
}

/** A fontconfig file naming the fonts unpacked with the browser (the package's own fonts.conf names Lambda's paths). */
async function packageFonts(bin: string): Promise<string> {
  const file = join(bin, 'fonts.conf');
  await writeFile(file, `<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig><dir>${join(bin, 'fonts', 'fonts')}</dir><cachedir>${join(bin, 'fonts-cache')}</cachedir></fontconfig>\n`);
  return file;
}
