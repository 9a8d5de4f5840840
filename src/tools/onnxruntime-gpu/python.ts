import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

/**
 * Finding CUDA libraries that pip installed: NVIDIA's PyPI wheels (`nvidia-cublas`, `nvidia-cudnn-cu13`, …) put
 * them under `site-packages/nvidia/**` (and TensorRT's under `site-packages/tensorrt_libs`), folders the loader
 * does not search. The Python that installed them knows where its site-packages are, so it is asked.
 */

const run = promisify(execFile);

/** Walks every site-packages folder of the interpreter for the file names in argv[1] (JSON); prints name → folder. */
const FIND_SCRIPT = `
import json, os, site, sys
want = set(json.loads(sys.argv[1]))
roots = []
for get in (site.getsitepackages, lambda: [site.getusersitepackages()]):
    try:
        roots += get()
    except Exception:
        pass
roots += [p for p in sys.path if p.endswith('-packages')]
found = {}
for root in dict.fromkeys(roots):
    for sub in ('nvidia', 'tensorrt_libs'):
        for folder, _dirs, files in os.walk(os.path.join(root, sub)):
            for f in files:
                if f in want and f not in found:
                    found[f] = folder
print(json.dumps(found))
`;

/** The interpreters tried when the user names none. */
export const DEFAULT_PYTHONS = ['python3', 'python'] as const;

/** The first interpreter of `candidates` that runs, or undefined. */
export async function findPython(candidates: readonly string[] = DEFAULT_PYTHONS): Promise<string | undefined> {
  for (const py of candidates) {
    try {
      await run(py, ['-c', 'import sys'], { timeout: 30_000 });
      return py;
    } catch {
      // not installed or broken: try the next
    }
  }
  return undefined;
}

/** Soname → folder, for each of `sonames` found in `python`'s site-packages. Empty where Python cannot tell. */
export async function findInSitePackages(python: string, sonames: readonly string[]): Promise<Map<string, string>> {
  if (sonames.length === 0) return new Map();
  try {
    const { stdout } = await run(python, ['-c', FIND_SCRIPT, JSON.stringify(sonames)], { timeout: 60_000 });
    return new Map(Object.entries(JSON.parse(stdout) as Record<string, string>));
  } catch {
    return new Map();
  }
}
