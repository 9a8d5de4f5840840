/** Where a sub-command (`nereid model`, `gpu`, `tensorrt`, `convert`) writes: the terminal, or what a test collects. */
export interface CommandIo {
  out(s: string): void;
  err(s: string): void;
}

export const STDIO: CommandIo = {
  out: (s) => void process.stdout.write(s),
  err: (s) => void process.stderr.write(s),
};

/**
 * The exit code when `nereid <command> <sub> …` is answered with the command's help: 2 when no sub-command was
 * given, 0 when help was asked for (`--help`, `-h`, `help`); undefined when the sub-command is to run.
 */
export function helpExitCode(sub: string | undefined, rest: readonly string[]): number | undefined {
  if (sub === undefined) return 2;
  return sub === '--help' || sub === '-h' || sub === 'help' || rest.includes('--help') ? 0 : undefined;
}
