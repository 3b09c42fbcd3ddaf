import { Injectable, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/**
 * The compiled CLI. Under ts-jest-like runners this file is TypeScript in src/, so the compiled
 * JavaScript is looked up in dist/ (built by `npm test` and `npm start` before anything runs).
 */
export function cliScript(): string {
  const beside = join(__dirname, 'cli', 'onceflow.js');
  if (existsSync(beside)) return beside;
  const built = resolve(__dirname, '../../../dist/src/runs/steps/cli/onceflow.js');
  if (existsSync(built)) return built;
  throw new Error(`the onceflow CLI is not built (${built} is missing): run \`npm run build\``);
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * A directory holding the `onceflow` executable, put first on every run command's PATH: a shell
 * script that runs the compiled CLI with this very Node binary. World-readable (the command may
 * run as another user) and owned by the worker's user, so a command cannot replace it.
 */
@Injectable()
export class OnceflowBin implements OnModuleInit, OnApplicationShutdown {
  private dirPath: string | undefined;

  onModuleInit(): void {
    const dir = mkdtempSync(join(tmpdir(), 'onceflow-bin-'));
    chmodSync(dir, 0o755);
    const file = join(dir, 'onceflow');
    writeFileSync(file, `#!/bin/sh\nexec ${quote(process.execPath)} ${quote(cliScript())} "$@"\n`, { mode: 0o755 });
    chmodSync(file, 0o755);
    this.dirPath = dir;
  }

  get dir(): string {
    if (!this.dirPath) throw new Error('onceflow bin directory not created yet');
    return this.dirPath;
  }

  onApplicationShutdown(): void {
    if (this.dirPath) rmSync(this.dirPath, { recursive: true, force: true });
  }
}
