import { Injectable, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { SAMPLE_ORCHESTRATOR_COMMAND as SAMPLE_ORCHESTRATOR_NAME } from '../../config/app-config';

/** scripts/sample-orchestrator.sh, from dist/src/runs/steps (built) or src/runs/steps (jest). */
const SAMPLE_SOURCE = [
  resolve(__dirname, '../../../../scripts/sample-orchestrator.sh'),
  resolve(__dirname, '../../../scripts/sample-orchestrator.sh'),
].find((p) => existsSync(p));

/**
 * The compiled CLI. When this file runs as TypeScript from src/ (jest), the compiled JavaScript
 * is looked up in dist/ (`npm test` and `npm start` build before anything runs).
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
 * A directory put first on every run command's PATH: `onceflow` (a shell script running a COPY
 * of the compiled CLI with this very Node binary) and the sample orchestrator. Copies, so that a
 * command running as another user needs no access to the install directory (which may sit in a
 * home directory it cannot enter); world-readable, owned by the worker's user, so a command cannot
 * replace them.
 */
@Injectable()
export class OnceflowBin implements OnModuleInit, OnApplicationShutdown {
  private dirPath: string | undefined;

  onModuleInit(): void {
    const dir = mkdtempSync(join(tmpdir(), 'onceflow-bin-'));
    const lib = join(dir, 'lib');
    mkdirSync(join(lib, 'cli'), { recursive: true });
    const cli = cliScript();
    // The CLI requires '../worker-api.protocol': keep that layout.
    copyFileSync(cli, join(lib, 'cli', 'onceflow.js'));
    copyFileSync(join(dirname(cli), '..', 'worker-api.protocol.js'), join(lib, 'worker-api.protocol.js'));
    writeFileSync(
      join(dir, 'onceflow'),
      `#!/bin/sh\nexec ${quote(process.execPath)} ${quote(join(lib, 'cli', 'onceflow.js'))} "$@"\n`,
    );
    if (SAMPLE_SOURCE) copyFileSync(SAMPLE_SOURCE, join(dir, SAMPLE_ORCHESTRATOR_NAME));
    for (const path of [dir, lib, join(lib, 'cli')]) chmodSync(path, 0o755);
    for (const path of [join(lib, 'cli', 'onceflow.js'), join(lib, 'worker-api.protocol.js')]) chmodSync(path, 0o644);
    chmodSync(join(dir, 'onceflow'), 0o755);
    if (existsSync(join(dir, SAMPLE_ORCHESTRATOR_NAME))) chmodSync(join(dir, SAMPLE_ORCHESTRATOR_NAME), 0o755);
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
