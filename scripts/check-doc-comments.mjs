#!/usr/bin/env node
// Every public symbol of the documented packages has a doc comment (issue 12, API reference):
// each export of the package's entry point, and each member of an exported interface or
// class (the contracts: plugin hooks, the store API). Prints the undocumented ones and exits
// 1 when there are any. `npm run docs` runs it before TypeDoc; CI runs it through a test.
//   node scripts/check-doc-comments.mjs [package-dir ...]
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const DOCUMENTED = ['packages/plugin-api', 'packages/store', 'packages/plugin-testkit'];

/** `package/symbol[.member]` of every public symbol without a doc comment. */
export function undocumented(dirs = DOCUMENTED) {
  const entries = dirs.map((d) => path.join(root, d, 'src', 'index.ts'));
  const program = ts.createProgram(entries, { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, strict: true, noEmit: true });
  const checker = program.getTypeChecker();
  const missing = [];
  const hasDoc = (symbol) => symbol.getDocumentationComment(checker).length > 0 || (symbol.declarations ?? []).some((d) => ts.getJSDocTags(d).length > 0);
  for (const [i, entry] of entries.entries()) {
    const source = program.getSourceFile(entry);
    if (!source) throw new Error(`check-doc-comments: ${entry} not found`);
    const moduleSymbol = checker.getSymbolAtLocation(source);
    if (!moduleSymbol) continue;
    for (const exported of checker.getExportsOfModule(moduleSymbol)) {
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const where = `${dirs[i]}: ${exported.name}`;
      if (!hasDoc(symbol)) missing.push(where);
      if (symbol.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.Class)) {
        for (const member of checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(symbol))) {
          const declaredHere = (member.declarations ?? []).some((d) => d.parent && (symbol.declarations ?? []).includes(d.parent));
          if (declaredHere && !member.name.startsWith('#') && !(member.declarations ?? []).every((d) => ts.getCombinedModifierFlags(d) & ts.ModifierFlags.Private) && !hasDoc(member)) missing.push(`${where}.${member.name}`);
        }
      }
    }
  }
  return missing;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const dirs = process.argv.slice(2);
  const missing = undocumented(dirs.length > 0 ? dirs : DOCUMENTED);
  for (const m of missing) console.log(`undocumented: ${m}`);
  console.log(missing.length === 0 ? 'every public symbol has a doc comment' : `${missing.length} public symbol(s) without a doc comment`);
  process.exit(missing.length === 0 ? 0 : 1);
}
