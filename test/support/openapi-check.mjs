// Lints an OpenAPI document with Redocly's rules (redocly.yaml: the recommended set) and generates
// its TypeScript client types with openapi-typescript. Both packages ship ES modules only, which
// Jest cannot load on Node 20, so test/openapi.e2e-spec.ts runs this in a child process:
//
//   node test/support/openapi-check.mjs <document.json> <out.d.ts>
//
// Prints one JSON line: { problems: [{ ruleId, severity, message, pointer }] } (ignored ones left out).
import { lintFromString, loadConfig } from '@redocly/openapi-core';
import openapiTS, { astToString } from 'openapi-typescript';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const [documentPath, outPath] = process.argv.slice(2);
if (!documentPath || !outPath) {
  process.stderr.write('usage: node test/support/openapi-check.mjs <document.json> <out.d.ts>\n');
  process.exit(2);
}

const source = readFileSync(documentPath, 'utf8');
const config = await loadConfig({ configPath: join(ROOT, 'redocly.yaml') });
const problems = await lintFromString({ source, absoluteRef: documentPath, config });

const ast = await openapiTS(JSON.parse(source), { silent: true });
writeFileSync(outPath, astToString(ast));

const report = problems
  .filter((p) => !p.ignored)
  .map((p) => ({ ruleId: p.ruleId, severity: p.severity, message: p.message, pointer: p.location[0]?.pointer }));
process.stdout.write(`${JSON.stringify({ problems: report })}\n`);
