import { adviseMissing, type ProviderStatus } from './diagnose.js';

/** Prints the providers' state and advice; 0 when the CUDA provider is usable. */
export async function report(
  statuses: readonly ProviderStatus[],
  python: string | undefined,
  env: NodeJS.ProcessEnv,
  print: (line: string) => void,
): Promise<number> {
  let code = 0;
  for (const s of statuses) {
    if (s.role === 'shared') continue;
    const name = s.role === 'cuda' ? 'CUDA provider' : 'TensorRT provider (optional)';
    if (!s.present) {
      print(`${name}: not installed`);
      if (s.role === 'cuda') code = 1;
      continue;
    }
    if (s.usable) {
      print(`${name}: ready — every library it needs resolves`);
      continue;
    }
    if (s.role === 'cuda') code = 1;
    if (s.missing.length === 0) {
      print(`${name}: cannot be loaded: ${s.error}`);
      continue;
    }
    print(`${name}: ${s.missing.length} librar${s.missing.length === 1 ? 'y' : 'ies'} missing:`);
    const advice = await adviseMissing(s, python, env);
    for (const line of advice.lines) print(`  ${line}`);
    if (advice.libraryPath) {
      print(`  found in ${python}'s site-packages; make the loader see them before starting nereid:`);
      print(`    export LD_LIBRARY_PATH=${advice.libraryPath.join(':')}\${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}`);
    } else if (advice.pipCommand) {
      print(`  fix: ${advice.pipCommand}`);
      print(
        `  then run 'nereid gpu check' again: it finds them in that Python's site-packages and prints LD_LIBRARY_PATH,`,
      );
      print('  or install the CUDA 13 toolkit and cuDNN 9 for CUDA 13 system-wide so that ldconfig finds them');
    }
  }
  return code;
}
