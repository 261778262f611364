// Validates custom resources against the schemas of their CRDs, offline (scripts/kube-tools.sh installs what it
// imports from the npm registry, pinned in package-lock.json):
//
//   node validate.mjs OBJECTS.json      # a JSON array of Kubernetes objects; prints one JSON line per object
//
// Two checks per object, both from the same npm packages (listed with their upstream CRDs in SOURCES below):
//  - the package's validator, compiled from the CRD's openAPIV3Schema: types, enums, required fields, patterns;
//  - the package's TypeScript type of the resource, checked by the TypeScript compiler with the object as a literal:
//    an unknown field anywhere is an error (the API server's strict field validation; a CRD's schema alone lets
//    the server prune a misspelt field silently).
// A kind with no schema here is an error, never skipped. Exits 1 if any object fails, 2 on bad input.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";

// kind → the npm module of its model, the TypeScript interface, and the CRD the package was generated from
export const SOURCES = {
  "monitoring.coreos.com/v1 ServiceMonitor": {
    module: "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor",
    type: "IServiceMonitor",
    crd: "prometheus-operator v0.90.1 stripped-down-crds.yaml (@kubernetes-models/prometheus-operator 5.0.1)",
  },
  "monitoring.coreos.com/v1 PrometheusRule": {
    module: "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule",
    type: "IPrometheusRule",
    crd: "prometheus-operator v0.90.1 stripped-down-crds.yaml (@kubernetes-models/prometheus-operator 5.0.1)",
  },
  "postgresql.cnpg.io/v1 Cluster": {
    module: "@kubernetes-models/cloudnative-pg/postgresql.cnpg.io/v1/Cluster",
    type: "ICluster",
    crd: "CloudNativePG v1.29.0 cnpg-1.29.0.yaml (@kubernetes-models/cloudnative-pg 1.0.0)",
  },
};

const here = new URL(".", import.meta.url).pathname;

function name(o) {
  return `${o?.kind ?? "?"}/${o?.metadata?.name ?? "?"}`;
}

// The compiled validator's verdict: its error messages, none when valid.
async function schemaErrors(source, object) {
  const mod = await import(source.module);
  const Model = mod[Object.keys(mod).find((k) => typeof mod[k] === "function" && mod[k].kind)];
  try {
    new Model(object).validate();
    return [];
  } catch (e) {
    return [String(e.message ?? e)];
  }
}

// The TypeScript compiler's verdict on every object at once: errors by object index.
function typeErrors(entries) {
  // beside node_modules, so the compiler resolves the packages as node does
  const dir = mkdtempSync(join(here, ".check-"));
  try {
    const aliases = new Map();
    for (const { source } of entries) {
      if (!aliases.has(source.module)) aliases.set(source.module, { alias: `T${aliases.size}`, type: source.type });
    }
    const head = [...aliases].map(([m, { alias, type }]) => `import type { ${type} as ${alias} } from "${m}";`);
    // one object per line: a diagnostic's line tells its object
    const lines = entries.map(
      ({ source, object }, i) => `export const o${i}: ${aliases.get(source.module).alias} = ${JSON.stringify(object)};`,
    );
    const file = join(dir, "objects.ts");
    writeFileSync(file, [...head, ...lines].join("\n") + "\n");
    const program = ts.createProgram([file], {
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      typeRoots: [],
    });
    const errors = new Map();
    for (const d of ts.getPreEmitDiagnostics(program)) {
      const text = ts.flattenDiagnosticMessageText(d.messageText, "\n").split("\n")[0].slice(0, 300);
      let index = -1;
      if (d.file && d.start !== undefined && d.file.fileName === file) {
        const line = d.file.getLineAndCharacterOfPosition(d.start).line;
        index = line - head.length;
      }
      if (!errors.has(index)) errors.set(index, []);
      errors.get(index).push(text);
    }
    return errors;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main() {
  const path = process.argv[2];
  if (!path) {
    console.error("usage: node validate.mjs OBJECTS.json");
    process.exit(2);
  }
  const objects = JSON.parse(readFileSync(path, "utf8"));
  if (!Array.isArray(objects)) {
    console.error(`${path}: expected a JSON array of objects`);
    process.exit(2);
  }
  let failed = false;
  const entries = [];
  const results = [];
  for (const object of objects) {
    const source = SOURCES[`${object?.apiVersion} ${object?.kind}`];
    if (!source) {
      results.push({ object: name(object), ok: false, errors: [`no schema for ${object?.apiVersion} ${object?.kind}`] });
      continue;
    }
    const errors = await schemaErrors(source, object);
    const result = { object: name(object), ok: true, crd: source.crd, errors };
    results.push(result);
    entries.push({ source, object, result });
  }
  const typed = entries.length ? typeErrors(entries) : new Map();
  entries.forEach(({ result }, i) => result.errors.push(...(typed.get(i) ?? []).map((e) => `unknown or mistyped: ${e}`)));
  // a diagnostic outside the objects (an import that does not resolve) fails them all
  for (const e of typed.get(-1) ?? []) for (const { result } of entries) result.errors.push(`type check: ${e}`);
  for (const r of results) {
    r.ok = r.errors.length === 0;
    failed ||= !r.ok;
    console.log(JSON.stringify(r));
  }
  process.exit(failed ? 1 : 0);
}

await main();
