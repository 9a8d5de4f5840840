/** One `nereid serve` flag: its kind, help, default and choices (the table: flags.ts, triton-flags.ts). */
export type Kind = 'string' | 'bool' | 'int' | 'list';

export interface FlagSpec {
  kind: Kind;
  help: string;
  default?: string | boolean | number | string[];
  choices?: readonly string[];
  noEffect?: string;
  /** The form a string or list value must have (Triton's), e.g. `<gpu>:<bytes>`, checked when it is parsed. */
  form?: { readonly pattern: RegExp; readonly shape: string };
  /** A switch that takes no value (`--disable-auto-complete-config`). */
  switch?: boolean;
  alias?: string;
}
