// docs/openapi.yaml -> docs/openapi.json, the form the Worker serves at
// GET /openapi.json (embedded at build time). `make openapi` runs it; the
// contract test (tests/e2e/contract.test.mjs) fails when the two differ.
// `--check` only compares.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const yamlPath = path.join(root, 'docs', 'openapi.yaml');
const jsonPath = path.join(root, 'docs', 'openapi.json');
const want = `${JSON.stringify(YAML.parse(fs.readFileSync(yamlPath, 'utf8')), null, 1)}\n`;
if (process.argv.includes('--check')) {
  const have = fs.existsSync(jsonPath) ? fs.readFileSync(jsonPath, 'utf8') : '';
  if (have !== want) {
    console.error('docs/openapi.json is not docs/openapi.yaml: run `make openapi`');
    process.exit(1);
  }
} else if (!fs.existsSync(jsonPath) || fs.readFileSync(jsonPath, 'utf8') !== want) {
  fs.writeFileSync(jsonPath, want);
  console.log('wrote docs/openapi.json');
}
