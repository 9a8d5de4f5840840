import { createRequire } from 'node:module';

/**
 * Nereid's version, read once from package.json so a release bumps one place. The relative path holds from both
 * src/core/ (run under tsx) and dist/core/ (the build), and package.json is in the published files by npm's rules.
 */
export const NEREID_VERSION: string = (createRequire(import.meta.url)('../../package.json') as { version: string })
  .version;
