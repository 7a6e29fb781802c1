// A promptfoo config checked against the schema promptfoo's npm package ships (its zod
// UnifiedConfigSchema), and every assert's type against its assertion types (the config
// schema takes any string as a type: a custom one). Usage: node promptfoo_validate.mjs
// PROMPTFOO_PACKAGE_DIR CONFIG.yaml; prints {"ok": bool, "issues": [...]}.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const [packageDir, configPath] = process.argv.slice(2);
const require = createRequire(path.join(packageDir, 'package.json'));
const yaml = require('js-yaml');
const pf = await import(pathToFileURL(path.join(packageDir, 'dist/src/index.js')).href);
const config = yaml.load(fs.readFileSync(configPath, 'utf8'));
const issues = [];
const parsed = pf.UnifiedConfigSchema.safeParse(config);
if (!parsed.success) issues.push(...parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`));
const asserts = [...(config.defaultTest?.assert ?? []), ...(config.tests ?? []).flatMap((t) => t.assert ?? [])];
for (const a of asserts) {
  const base = String(a.type).replace(/^not-/, '');
  const known = pf.BaseAssertionTypesSchema.safeParse(base).success
    && (base === a.type || pf.NotPrefixedAssertionTypesSchema.safeParse(base).success);
  if (!known) issues.push(`assert type ${a.type}: not one of promptfoo's assertion types`);
}
console.log(JSON.stringify({ ok: issues.length === 0, issues }));
