import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import ts from 'typescript';
import { ROOT } from './env';

/** The parts of an OpenAPI 3.0 document test/openapi.e2e-spec.ts looks at. */
export interface Schema {
  $ref?: string;
  type?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
}
export interface Operation {
  summary?: string;
  security?: Array<Record<string, string[]>>;
  responses: Record<string, { content?: Record<string, { schema?: Schema }> }>;
}
export interface OpenApiDocument {
  servers?: Array<{ url: string }>;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
}
export interface Problem {
  ruleId: string;
  severity: string;
  message: string;
  pointer: string;
}

/**
 * The schema with every object closed (`additionalProperties: false` unless it says otherwise) and
 * its refs pointing into the document registered as `openapi`: a field the app answers but the
 * document does not list fails validation too.
 */
export function strict<T>(schema: T): T {
  const json = JSON.stringify(schema, (_key, value: unknown) =>
    value && typeof value === 'object' && 'properties' in value && !('additionalProperties' in value)
      ? { ...value, additionalProperties: false }
      : value,
  );
  return JSON.parse(json.replaceAll('"#/components/', '"openapi#/components/'));
}

export function operations(doc: OpenApiDocument): Array<[string, Operation]> {
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([m, op]): [string, Operation] => [`${m.toUpperCase()} ${path}`, op]),
  );
}

/**
 * Lints the document with Redocly (redocly.yaml) and writes its openapi-typescript client types to
 * `typesPath`. Both packages ship ES modules only, which Jest cannot load on Node 20: they run in a
 * child node process (openapi-check.mjs).
 */
export function lintAndGenerateClient(documentPath: string, typesPath: string): Problem[] {
  const check = spawnSync(process.execPath, [join(ROOT, 'test/support/openapi-check.mjs'), documentPath, typesPath], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (check.status !== 0) throw new Error(`openapi-check failed (${check.status}):\n${check.stderr}`);
  return JSON.parse(check.stdout).problems;
}

/** Type-checks one file (strict) with the project's typescript; each diagnostic as "file:line message". */
export function typeCheck(file: string): string[] {
  const program = ts.createProgram([file], {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    lib: ['lib.es2022.d.ts'],
    skipLibCheck: true,
    types: [],
  });
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const where =
      d.file && d.start !== undefined
        ? `${d.file.fileName.split('/').pop()}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}`
        : '';
    return `${where} ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
  });
}
