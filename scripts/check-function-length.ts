/**
 * No function in src/ over ~80 lines without a reason (STYLE.md, issue 24): exit 1 naming each function longer
 * than LIMIT lines (tests excepted) that has no `// Long: <why>` comment right above it. A table or wiring in
 * start order may be long; the comment says so where a reader meets it.
 *
 *   node --import tsx scripts/check-function-length.ts [src]
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';

const LIMIT = 80;

function sources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sources(path, out);
    else if (/\.m?ts$/.test(name) && !/\.(test|d)\.m?ts$/.test(name)) out.push(path);
  }
  return out;
}

/** Whether a `// Long:` comment sits above `node` (or above the statement that declares it). */
function hasReason(node: ts.Node, text: string): boolean {
  let at: ts.Node = node;
  while (at.parent && !ts.isSourceFile(at.parent) && !ts.isBlock(at.parent) && !ts.isClassLike(at.parent)) {
    at = at.parent;
  }
  const comments = ts.getLeadingCommentRanges(text, at.getFullStart()) ?? [];
  return comments.some((c) => /^\/\/\s*Long:/.test(text.slice(c.pos, c.end)));
}

const long: string[] = [];
for (const file of sources(process.argv[2] ?? 'src')) {
  const text = readFileSync(file, 'utf8');
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const visit = (n: ts.Node): void => {
    if (ts.isFunctionLike(n) && 'body' in n && n.body !== undefined) {
      const first = sf.getLineAndCharacterOfPosition(n.getStart(sf)).line;
      const lines = sf.getLineAndCharacterOfPosition(n.end).line - first + 1;
      if (lines > LIMIT && !hasReason(n, text)) {
        const name =
          n.name?.getText(sf) ?? (ts.isVariableDeclaration(n.parent) ? n.parent.name.getText(sf) : '<anonymous>');
        long.push(
          `${file}:${first + 1}: ${name} is ${lines} lines; split it, or say why in a '// Long:' comment above it`,
        );
      }
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
}
for (const line of long) console.error(line);
process.exit(long.length > 0 ? 1 : 0);
